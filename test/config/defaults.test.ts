// The documented defaults: an empty config.toml is a complete config, section by section, with
// the six span presets. The numbers are written out here, not read from the schema.
import { describe, expect, test } from "bun:test";
import { poolSize } from "../../src/store/open.ts";
import { clean, parse } from "./support.ts";

const SPEC_15: Record<string, unknown> = {
  spool: {
    home: "/var/lib/hookspool",
    db: "spool.db",
    store_raw: true,
    inline_max_bytes: 262144,
    bobbin_path: [],
    backend: "sqlite",
  },
  intake: {
    listen: "127.0.0.1:8650",
    allow_non_loopback: false,
    max_body_bytes: 786432,
    busy_timeout_s: 10,
    threads: 16,
  },
  dispatch: {
    parallel: 4,
    poll_s: 1,
    heartbeat_s: 10,
    lease_grace_s: 60,
    max_attempts: 64,
    backoff_base_s: 15,
    backoff_cap_s: 300,
    breaker: { trip_after: 3, cooldown_initial_s: 30, cooldown_max_s: 600 },
  },
  coalesce: { quiet_s: 0, max_s: 0, max_events: 500, max_bytes: 786432 },
  limits: { min_free_bytes: 536870912 },
  retention: { delivered_days: 7, attempts_days: 30, dropped_days: 7, issues_days: 90 },
  alerts: { argv: ["logger", "-t", "hookspool"], dry: false, rate_limit_s: 1800, timeout_s: 60 },
  hermes: {
    base_url: "http://127.0.0.1:8644",
    subscriptions_path: "~/.hermes/webhook_subscriptions.json",
    timeout_s: 30,
    max_body_bytes: 1048576,
    legacy_signature: true,
    rate_limit: 30,
  },
};

const PRESETS = {
  burst: { quiet_s: 120, max_s: 600 },
  mail: { quiet_s: 30, max_s: 120 },
  calendar: { quiet_s: 45, max_s: 180 },
  sync: { quiet_s: 60, max_s: 300 },
  meeting: { quiet_s: 60, max_s: 900 },
  immediate: { quiet_s: 0, max_s: 0 },
};

describe("an empty config.toml", () => {
  test.each(Object.keys(SPEC_15))("[%s] has its documented defaults", (section) => {
    const config = clean("") as unknown as Record<string, unknown>;
    expect(config[section]).toEqual(SPEC_15[section]);
  });

  test("has the six span presets and nothing else", () => {
    expect(clean("").spans).toEqual(PRESETS);
  });

  test("has no sources, routes, destinations or bobbin instances", () => {
    const config = clean("");
    expect(config.sources).toEqual({});
    expect(config.routes).toEqual([]);
    expect(config.destinations).toEqual({});
    expect(config.bobbins).toEqual({});
  });

  test("a file of comments and blank lines is the same as an empty one", () => {
    expect(clean("# nothing here\n\n   # still nothing\n")).toEqual(clean(""));
  });
});

describe("a partly written section", () => {
  test("keeps the defaults of every key it leaves out", () => {
    const config = clean("[dispatch]\nparallel = 8\n");
    expect(config.dispatch).toEqual({ ...(SPEC_15.dispatch as object), parallel: 8 } as typeof config.dispatch);
  });

  test("[dispatch.breaker] with one key keeps the other two breaker defaults", () => {
    const config = clean("[dispatch.breaker]\ntrip_after = 5\n");
    expect(config.dispatch.breaker).toEqual({ trip_after: 5, cooldown_initial_s: 30, cooldown_max_s: 600 });
    expect(config.dispatch.parallel).toBe(4);
  });

  test("an inline breaker table works the same as a sub-table", () => {
    const config = clean("[dispatch]\nbreaker = { cooldown_max_s = 120 }\n");
    expect(config.dispatch.breaker).toEqual({ trip_after: 3, cooldown_initial_s: 30, cooldown_max_s: 120 });
  });

  test("a source gets its own defaults (dedup window one day, no liveness expectation)", () => {
    const config = clean('[sources.github]\naction = "hermes:github"\n');
    expect(config.sources.github).toMatchObject({ action: "hermes:github", dedup_window_s: 86400 });
    // Unset: the plugin's expectation, if it has one.
    expect(config.sources.github.expect_every_s).toBeUndefined();
    expect(config.sources.github.secrets).toBeUndefined();
    expect(config.sources.github.quiet_s).toBeUndefined();
    expect(config.sources.github.span).toBeUndefined();
  });

  test("a route defaults to an empty match and no tee", () => {
    const config = clean('[sources.s]\naction = "hermes:s"\n[[routes]]\nname = "r"\nsource = "s"\n');
    expect(config.routes[0]).toEqual({ name: "r", source: "s", match: {}, tee: false });
  });

  test("defaults are fresh copies: changing one loaded config leaves the next one alone", () => {
    const first = clean("");
    first.alerts.argv.push("--extra");
    first.spans.burst.quiet_s = 1;
    const second = clean("");
    expect(second.alerts.argv).toEqual(["logger", "-t", "hookspool"]);
    expect(second.spans.burst.quiet_s).toBe(120);
  });
});

describe("[spans]", () => {
  test("a user-added span is kept alongside the six presets", () => {
    const config = clean("[spans]\nnightly = { quiet_s = 600, max_s = 3600 }\n");
    expect(config.spans).toEqual({ ...PRESETS, nightly: { quiet_s: 600, max_s: 3600 } });
  });

  test("a preset redefined in the file takes the file's values; the others stay", () => {
    const config = clean("[spans.burst]\nquiet_s = 10\nmax_s = 20\n");
    expect(config.spans.burst).toEqual({ quiet_s: 10, max_s: 20 });
    expect(config.spans.mail).toEqual({ quiet_s: 30, max_s: 120 });
  });

  test("a span needs both quiet_s and max_s", () => {
    expect(() => parse("[spans.half]\nquiet_s = 10\n")).toThrow("is required");
  });
});

describe("spool.pool", () => {
  test("unset, a process sizes its pool: a dispatcher one connection per worker and two, else four", () => {
    const bare = clean("");
    expect([poolSize(bare, "dispatch"), poolSize(bare, "intake"), poolSize(bare, "operator")]).toEqual([6, 4, 4]);
    const wide = clean("[dispatch]\nparallel = 16\n");
    expect(poolSize(wide, "dispatch")).toBe(18);
    const set = clean("[spool]\npool = 3\n[dispatch]\nparallel = 16\n");
    expect([poolSize(set, "dispatch"), poolSize(set, "intake")]).toEqual([3, 3]);
  });
});
