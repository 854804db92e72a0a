// deploy/hermes/completion.sh, the Hermes route's completion_script: run with bash on sample
// envelopes, with HOOKSPOOL_BIN a fake hookspool that records its argv, once reading the
// envelope with jq and once with python3 (a PATH without jq), and once with neither.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers/tmp.ts";

const SCRIPT = join(import.meta.dir, "..", "..", "deploy", "hermes", "completion.sh");
const BASH = Bun.which("bash");
const SH = Bun.which("sh");
const JQ = Bun.which("jq");
const PYTHON = realPython();

const DIR = tempDir("hookspool-completion-");

// The fake records each argument on its own line, then HOOKSPOOL_HOME as it saw it.
const FAKE = join(DIR, "fake-hookspool");
writeFileSync(
  FAKE,
  '#!/bin/sh\n{ printf \'%s\\n\' "$@"; printf \'HOME=%s\\n\' "${HOOKSPOOL_HOME-}"; } > "$FAKE_RECORD"\n',
);
chmodSync(FAKE, 0o755);

/** The interpreter python3 runs, not a version manager's shim (which needs its own PATH). */
function realPython(): string | null {
  if (!Bun.which("python3")) return null;
  const p = Bun.spawnSync(["python3", "-c", "import sys; print(sys.executable)"]);
  const path = p.stdout.toString().trim();
  return p.exitCode === 0 && path ? realpathSync(path) : null;
}

/** A PATH directory holding only the named tools, symlinked. */
function binWith(name: string, tools: Record<string, string>): string {
  const bin = join(DIR, name);
  mkdirSync(bin);
  for (const [tool, path] of Object.entries(tools)) symlinkSync(path, join(bin, tool));
  return bin;
}

// python3 with no jq beside it: the fallback path. Nothing at all: neither reader.
const PYTHON_BIN = PYTHON ? binWith("python-only", { python3: PYTHON }) : null;
const EMPTY_BIN = binWith("empty", {});

interface Run {
  code: number;
  stderr: string;
  /** The fake's argv, or null when the script did not run it. */
  argv: string[] | null;
  /** HOOKSPOOL_HOME as the fake saw it. */
  home: string | null;
}

let runs = 0;

async function run(
  stdin: string,
  opts: { path?: string; env?: Record<string, string>; shell?: string } = {},
): Promise<Run> {
  const record = join(DIR, `record-${++runs}`);
  const proc = Bun.spawn([opts.shell ?? BASH!, SCRIPT], {
    stdin: new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: opts.path ?? process.env.PATH ?? "", HOOKSPOOL_BIN: FAKE, FAKE_RECORD: record, ...(opts.env ?? {}) },
  });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (!existsSync(record)) return { code, stderr, argv: null, home: null };
  const lines = readFileSync(record, "utf8").split("\n").slice(0, -1);
  const home = lines.pop()!.replace(/^HOME=/, "");
  return { code, stderr, argv: lines, home };
}

const ID = "hs_5f0c1a9e2b7d_42";

/** An envelope with the keys the script reads (status, delivery_id) beside others it leaves alone. */
function envelope(status: string, deliveryId: string | null = ID, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    version: 1,
    route: "hookspool-inbox",
    status,
    ...(deliveryId === null ? {} : { delivery_id: deliveryId }),
    payload: { batch: { id: 42 }, events: [{ status: "success", delivery_id: "hs_other_1" }] },
    ...extra,
  });
}

const REASON = "hermes agent run ended: failure";

const READERS = [
  { name: "jq", path: undefined, skip: !JQ },
  { name: "python3 (no jq on PATH)", path: PYTHON_BIN ?? undefined, skip: !PYTHON_BIN },
];

describe.each(READERS)("completion.sh reading the envelope with $name", ({ path, skip }) => {
  test.skipIf(skip)("success reports ok for the delivery id", async () => {
    const r = await run(envelope("success"), { path });
    expect(r.code).toBe(0);
    expect(r.argv).toEqual(["outcome", ID, "ok"]);
  });

  test.skipIf(skip)("failure reports failed with a fixed reason, never the run's error or the payload", async () => {
    const r = await run(envelope("failure", ID, { error: "agent said: the secret is sk-planted" }), { path });
    expect(r.code).toBe(0);
    expect(r.argv).toEqual(["outcome", ID, "failed", "--reason", REASON]);
  });

  test.skipIf(skip)("a delivery id that is not hookspool's reports nothing", async () => {
    const r = await run(envelope("success", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), { path });
    expect(r.code).toBe(0);
    expect(r.argv).toBeNull();
  });

  test.skipIf(skip)("a cancelled run reports nothing", async () => {
    const r = await run(envelope("cancelled"), { path });
    expect(r.code).toBe(0);
    expect(r.argv).toBeNull();
  });

  test.skipIf(skip)("stdin that is not one JSON value reports nothing and exits 0", async () => {
    for (const stdin of ['{"status": "success", "delivery_id": "hs_', "", "{} {}"]) {
      const r = await run(stdin, { path });
      expect(r.code).toBe(0);
      expect(r.argv).toBeNull();
      expect(r.stderr).toContain("not one JSON value");
    }
  });

  test.skipIf(skip)("a status it does not know reports nothing and says so", async () => {
    const r = await run(envelope("paused"), { path });
    expect(r.code).toBe(0);
    expect(r.argv).toBeNull();
    expect(r.stderr).toContain('status "paused"');
  });

  test.skipIf(skip)("an id with anything but letters, digits and _ after hs_ reports nothing", async () => {
    for (const id of ["hs_1 --permanent", "hs_1\n", "hs_"]) {
      const r = await run(envelope("success", id), { path });
      expect(r.argv).toBeNull();
    }
  });

  test.skipIf(skip)("the envelope's own keys count, not a status or id inside the payload", async () => {
    // The payload carries status "success" and an hs_ id; the envelope says failure, no id.
    const r = await run(envelope("failure", null), { path });
    expect(r.argv).toBeNull();
  });

  test.skipIf(skip)(
    "without an id in the envelope, HERMES_WEBHOOK_DELIVERY_ID is used when it is hookspool's",
    async () => {
      expect((await run(envelope("success", null), { path, env: { HERMES_WEBHOOK_DELIVERY_ID: ID } })).argv).toEqual([
        "outcome",
        ID,
        "ok",
      ]);
      expect(
        (await run(envelope("success", null), { path, env: { HERMES_WEBHOOK_DELIVERY_ID: "gh-1" } })).argv,
      ).toBeNull();
      // An id in the envelope wins, even one that is not hookspool's.
      expect(
        (await run(envelope("success", "gh-1"), { path, env: { HERMES_WEBHOOK_DELIVERY_ID: ID } })).argv,
      ).toBeNull();
    },
  );

  test.skipIf(skip)("HOOKSPOOL_HOME reaches the CLI through the environment", async () => {
    const r = await run(envelope("success"), { path, env: { HOOKSPOOL_HOME: "/var/lib/hookspool" } });
    expect(r.argv).toEqual(["outcome", ID, "ok"]);
    expect(r.home).toBe("/var/lib/hookspool");
  });
});

describe("completion.sh", () => {
  test("with neither jq nor python3 on PATH it reports nothing and says why", async () => {
    const r = await run(envelope("success"), { path: EMPTY_BIN });
    expect(r.code).toBe(0);
    expect(r.argv).toBeNull();
    expect(r.stderr).toContain("neither jq nor python3");
  });

  test.skipIf(!SH || (!JQ && !PYTHON))("runs under a POSIX sh too", async () => {
    expect((await run(envelope("failure"), { shell: SH! })).argv).toEqual([
      "outcome",
      ID,
      "failed",
      "--reason",
      REASON,
    ]);
  });

  test.skipIf(!Bun.which("shellcheck"))("is shellcheck-clean as sh", async () => {
    const proc = Bun.spawn(["shellcheck", "-s", "sh", SCRIPT], { stdout: "pipe", stderr: "pipe" });
    const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
    expect(out).toBe("");
    expect(code).toBe(0);
  });
});
