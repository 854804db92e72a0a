# The README's commands: `make run`, `make test` and `make test-all`.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(HOME)/.local/bin:$(HOME)/.bun/bin:$(PATH)

HOME_DIR ?= $(CURDIR)/.hookspool
BIN := dist/hookspool

.PHONY: all deps build run test test-all lint fmt fmt-check timings bench soak clean typecheck docs screenshots

all: build

deps: node_modules/.deps-ok

node_modules/.deps-ok: package.json bun.lock
	@./scripts/ensure-bun.sh
	bun install --frozen-lockfile
	@touch $@

# Rebuilt only when a source, a migration, the build script or the lockfile changed.
SOURCES := $(shell find src migrations bobbins -type f) scripts/build.ts scripts/gen-bobbins.ts package.json bun.lock

build: $(BIN)

$(BIN): node_modules/.deps-ok $(SOURCES)
	bun scripts/gen-bobbins.ts
	bun scripts/build.ts

# Install, build, write a starter home (once) and start intake + dispatcher on 127.0.0.1:8650.
run: build
	@if [ ! -f "$(HOME_DIR)/config.toml" ]; then $(BIN) --home "$(HOME_DIR)" init; fi
	$(BIN) --home "$(HOME_DIR)" run

# The quick check (under 90 s on two cores): the bobbin registry, the type check, Biome's lint and
# format (warnings fail), no line over 120 columns, then the unit tests, the SQLite store
# conformance and one end-to-end test per layout, on two workers. test/test-all.txt names the
# test files it leaves to `make test-all`, and it leaves the PostgreSQL halves of the others to it
# too (scripts/run-tests.ts says how each is run).
test: deps
	bun scripts/gen-bobbins.ts
	tsc --noEmit -p .
	biome ci --error-on-warnings
	bun scripts/wrap-comments.ts --check src test scripts bobbins
	bun scripts/line-length.ts src test scripts bobbins
	bun scripts/run-tests.ts run fast

# Everything (CI's, about 7 minutes): the same checks, then every test file, each in its own
# global (PostgreSQL, the browser, crash, concurrency, soak and the bobbins' end-to-end tests).
test-all: deps
	bun scripts/gen-bobbins.ts
	tsc --noEmit -p .
	biome ci --error-on-warnings
	bun scripts/wrap-comments.ts --check src test scripts bobbins
	bun scripts/line-length.ts src test scripts bobbins
	bun scripts/run-tests.ts run all

lint: deps
	biome lint

# Formats the code (biome.json): Biome wraps it at 120 columns, scripts/wrap-comments.ts the
# comments Biome leaves long, Biome once more for what moved, and the registry follows bobbins/.
# What stays over 120 columns (string literals: split them by hand): bun scripts/line-length.ts src test scripts bobbins
fmt: deps
	biome format --write
	bun scripts/wrap-comments.ts --write src test scripts bobbins
	biome format --write
	bun scripts/gen-bobbins.ts

# What `make fmt` would change, without changing it (exit 1 if anything), and any line over 120
# columns; `make test` checks the same.
fmt-check: deps
	biome format
	bun scripts/wrap-comments.ts --check src test scripts bobbins
	bun scripts/line-length.ts src test scripts bobbins

# test/timings.json: each test file's duration in a full run, so the slowest start first.
timings: deps
	bun scripts/run-tests.ts run all --update-timings

# The README's dashboard screenshot: the browser tests (they need /usr/bin/chromium) save one per
# step under test-results/; the overview's is kept in docs/img/.
screenshots: deps
	@test -x /usr/bin/chromium || { echo "make screenshots needs Debian's chromium: apt-get install chromium" >&2; exit 1; }
	bun test test/browser/
	mkdir -p docs/img
	cp test-results/dashboard-overview-after.png docs/img/dashboard-overview.png

typecheck: deps
	tsc --noEmit -p .

# The generated docs: docs/config.md, the catalogue in docs/bobbins/README.md, and the passages
# the bobbins' SETUP.md and AGENTS.md take from docs/partials/ (test/docs-partials.test.ts).
docs: deps
	bun scripts/gen-config-docs.ts
	bun scripts/gen-catalogue-docs.ts
	bun scripts/gen-bobbin-docs.ts

bench: build
	bun scripts/bench/run.ts

# The long soak (the 60 s one runs inside make test-all): make soak DURATION=3600. BACKEND=postgres
# runs it on a throwaway PostgreSQL server with two intakes and two dispatchers (30 s in test-all).
DURATION ?= 3600
BACKEND ?= sqlite
SOAK_PROCS_postgres := --intakes 2 --dispatchers 2
soak: deps
	bun scripts/soak.ts --duration $(DURATION) --backend $(BACKEND) $(SOAK_PROCS_$(BACKEND))

clean:
	rm -rf dist node_modules/.deps-ok
