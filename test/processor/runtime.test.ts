// The processor runtime: one batch in, emits out; the journal makes a retry of the same batch
// replay instead of run; staged state is applied only after the journal; exit 0/65/75 with the
// permanent reason on the last stderr line; nothing but emits on stdout; secrets only as granted.
import { beforeEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { cleanReason } from "../../src/processor/context.ts";
import { journalPath, readState } from "../../src/processor/files.ts";
import { EXIT_PERMANENT, EXIT_RETRY, runProcessor } from "../../src/processor/runtime.ts";
import { writeTallyBobbin } from "../helpers/bobbins.ts";
import { MAIN } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const calls = ((globalThis as { __tallyCalls?: { n: number } }).__tallyCalls ??= { n: 0 });
const T0 = 1_714_564_800;

/** A private bobbin acme.tally whose processor is the fixture, and an instance's environment. */
function setup(settings: Record<string, unknown> = {}, batchId = 41) {
  const root = tempDir("hookspool-proc-");
  const dir = writeTallyBobbin(root);
  const stateDir = join(root, "state");
  const secret = join(root, "api-key");
  writeFileSync(secret, "key-value-0123", { mode: 0o600 });
  const env: Record<string, string> = {
    HOOKSPOOL_BOBBIN: "acme.tally",
    HOOKSPOOL_BOBBIN_INSTANCE: "tally",
    HOOKSPOOL_BOBBIN_DIR: dir,
    HOOKSPOOL_SETTINGS: JSON.stringify(settings),
    HOOKSPOOL_DELTA_ROUTES: JSON.stringify({ tally: "hermes:tally" }),
    HOOKSPOOL_SECRET_REFS: JSON.stringify({ api_key: { file: secret } }),
    HOOKSPOOL_BATCH_ID: String(batchId),
    HOOKSPOOL_DELIVERY_ID: "d-1",
    HOOKSPOOL_STATE_DIR: stateDir,
  };
  return { root, dir, stateDir, env };
}

const doc = (n: number) =>
  JSON.stringify({ source: "tally", key: "k1", batch_id: 41, events: Array.from({ length: n }, (_, i) => ({ i })) });

async function run(env: Record<string, string>, stdin = doc(3)) {
  let out = "";
  let err = "";
  const code = await runProcessor("tally", {
    stdin: async () => new TextEncoder().encode(stdin),
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    env,
    clock: new FakeClock(T0),
    uid: process.getuid?.() ?? 0,
  });
  const emits = out
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { enqueue: Record<string, unknown> }).enqueue);
  return { code, out, err, emits };
}

beforeEach(() => {
  calls.n = 0;
});

describe("the processor runtime", () => {
  test("items become emits through the output routes; unmapped ones are dropped with one line", async () => {
    const { env, stateDir } = setup();
    const r = await run(env);
    expect(r.code).toBe(0);
    expect(r.emits).toEqual([
      {
        source: "tally",
        key: "k1",
        event_type: "tally",
        dedup_id: "tally:41:0",
        destination: "hermes:tally",
        payload: { count: 3, total: 3 },
      },
      {
        source: "tally",
        key: "other-key",
        event_type: "tally",
        dedup_id: "tally:41:2",
        destination: "hermes:tally",
        payload: { key: "other-key", count: 0, total: 3 },
      },
    ]);
    expect(r.err.split("\n").filter((l) => l.includes("dropped")).length).toBe(1);
    expect(r.err).toContain("dropped the items of unmapped event types unmapped-type");
    expect(readState(stateDir, "total", 0)).toBe(3);
  });

  test(
    "a retry of the same batch replays its journal: the same emits, process() not called again, " +
      "state not added twice",
    async () => {
      const { env, stateDir } = setup();
      const first = await run(env);
      const again = await run(env);
      expect(calls.n).toBe(1);
      expect(again.emits).toEqual(first.emits);
      expect(again.err).toContain("replayed its journal");
      expect(readState(stateDir, "total", 0)).toBe(3);
      // The next batch builds on the state.
      const next = await run({ ...env, HOOKSPOOL_BATCH_ID: "42" });
      expect(calls.n).toBe(2);
      expect(next.emits[0]?.payload).toEqual({ count: 3, total: 6 });
    },
  );

  test("Permanent: exit 65 and the reason on the last stderr line; no journal, no state", async () => {
    const { env, stateDir } = setup({ mode: "permanent" });
    const r = await run(env);
    expect(r.code).toBe(EXIT_PERMANENT);
    expect(r.err.trimEnd().split("\n").pop()).toBe("hookspool-permanent: the tally is closed");
    expect(r.out).toBe("");
    expect(existsSync(journalPath(stateDir, 41))).toBe(false);
  });

  test("Retryable and any other error: exit 75 with the class only, never the message", async () => {
    for (const mode of ["retry", "throw"]) {
      const r = await run(setup({ mode }).env);
      expect(r.code).toBe(EXIT_RETRY);
      expect(r.err).not.toContain("secret-value-in-message");
      expect(r.err).toContain(mode === "retry" ? "retry: Retryable" : "retry: TypeError");
      expect(r.out).toBe("");
    }
  });

  test("a processor that prints is refused, and nothing it printed reaches stdout", async () => {
    const r = await run(setup({ mode: "print" }).env);
    expect(r.code).toBe(EXIT_PERMANENT);
    expect(r.out).toBe("");
    expect(r.err).toContain("hookspool-permanent: the processor printed");
  });

  test("a secret the manifest does not grant is Permanent; a granted one is read and never logged", async () => {
    const denied = await run(setup({ mode: "secret" }).env);
    expect(denied.code).toBe(EXIT_PERMANENT);
    expect(denied.err).toContain("hookspool-permanent: secret not_granted is not granted to the processor");
    const granted = await run(setup({ mode: "granted" }).env);
    expect(granted.code).toBe(0);
    expect(granted.err).toContain("secret length 14");
    expect(granted.err).not.toContain("key-value-0123");
  });

  test("items without an event type, a document that is not JSON, a missing variable: Permanent", async () => {
    expect((await run(setup({ mode: "bad-items" }).env)).err).toContain(
      "hookspool-permanent: an item has no event_type",
    );
    expect((await run(setup().env, "not json")).err).toContain(
      "hookspool-permanent: the batch document on stdin is not JSON",
    );
    const { env } = setup();
    delete env.HOOKSPOOL_BOBBIN;
    expect((await run(env)).code).toBe(EXIT_PERMANENT);
  });

  test("a journal older than the retention of delivered batches is removed by a later batch", async () => {
    const { env, stateDir } = setup();
    await run({ ...env, HOOKSPOOL_JOURNAL_KEEP_S: "3600" });
    const old = journalPath(stateDir, 41);
    // FakeClock reads T0; the journal was written well before it.
    utimesSync(old, T0 - 7200, T0 - 7200);
    await run({ ...env, HOOKSPOOL_BATCH_ID: "42", HOOKSPOOL_JOURNAL_KEEP_S: "3600" });
    expect(readdirSync(join(stateDir, "journal"))).toEqual(["42.json"]);
  });

  test("a permanent reason is kept to one line of at most 300 characters", () => {
    expect(cleanReason(`a\nb${"x".repeat(400)}`)).toBe(`a b${"x".repeat(297)}`);
  });

  test("a processor file others may write is not loaded", async () => {
    const { env, dir } = setup();
    const { chmodSync } = await import("node:fs");
    chmodSync(join(dir, "processor.ts"), 0o666);
    const r = await run(env);
    expect(r.code).toBe(EXIT_PERMANENT);
    expect(r.err).toContain("writable by group/other");
    expect(calls.n).toBe(0);
  });
});

describe("the context", () => {
  test("a retried batch reads no API again: the journal answers", async () => {
    let hits = 0;
    const api = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => {
        hits += 1;
        return Response.json({ n: 7 });
      },
    });
    try {
      const { env } = setup({ mode: "fetch", url: `http://127.0.0.1:${api.port}/count` });
      const first = await run(env);
      const again = await run(env);
      expect([first.code, again.code, hits]).toEqual([0, 0, 1]);
      expect(again.emits).toEqual(first.emits);
      expect(first.emits[0]?.payload).toEqual({ count: 7, total: 7 });
    } finally {
      api.stop(true);
    }
  });

  test("ctx.oauth refreshes from the credential and keeps the access token in the runtime's state", async () => {
    const seen: string[] = [];
    const api = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(req) {
        const url = new URL(req.url);
        if (url.pathname === "/token") {
          seen.push(`token ${new URLSearchParams(await req.text()).get("refresh_token")}`);
          return Response.json({ access_token: "at-1", expires_in: 3600 });
        }
        seen.push(`api ${req.headers.get("authorization")}`);
        return Response.json({ n: 3 });
      },
    });
    try {
      const { env, root, stateDir } = setup({ mode: "oauth", url: `http://127.0.0.1:${api.port}/count` });
      writeFileSync(
        join(root, "api-key"),
        JSON.stringify({
          client_id: "c",
          client_secret: "s",
          refresh_token: "rt-1",
          token_uri: `http://127.0.0.1:${api.port}/token`,
        }),
      );
      expect((await run(env)).code).toBe(0);
      expect((await run({ ...env, HOOKSPOOL_BATCH_ID: "42" })).code).toBe(0);
      // One refresh for two batches: the second used the token the first kept.
      expect(seen).toEqual(["token rt-1", "api Bearer at-1", "api Bearer at-1"]);
      expect(existsSync(join(stateDir, "runtime", "oauth-api_key.json"))).toBe(true);
    } finally {
      api.stop(true);
    }
  });

  test("a hooks module is loaded by path and given as ctx.hooks; one others may write is refused", async () => {
    const { env, root } = setup();
    const hooks = join(root, "hooks.ts");
    writeFileSync(hooks, 'export function classify(n: number): string {\n  return n > 2 ? "busy" : "quiet";\n}\n', {
      mode: 0o644,
    });
    const withHooks = { ...env, HOOKSPOOL_SETTINGS: JSON.stringify({ mode: "hooks", hooks }) };
    const r = await run(withHooks);
    expect(r.emits[0]?.payload).toMatchObject({ label: "busy" });
    const { chmodSync } = await import("node:fs");
    chmodSync(hooks, 0o666);
    const refused = await run({ ...withHooks, HOOKSPOOL_BATCH_ID: "43" });
    expect(refused.code).toBe(EXIT_PERMANENT);
    expect(refused.err).toContain("writable by group/other");
  });
});

describe("a real runtime process", () => {
  const spawn = async (env: Record<string, string>, stdin: string) => {
    const p = Bun.spawn([process.execPath, MAIN, "__processor", "tally"], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdin: new TextEncoder().encode(stdin),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    return { out, err, code, signal: p.signalCode };
  };

  test("killed (SIGKILL) between the journal and the state: the retry emits the same items once and " +
    "applies the state once", async () => {
    const { env, stateDir } = setup();
    const killed = await spawn({ ...env, HOOKSPOOL_TEST_HOOK: "processor.after_journal" }, doc(2));
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.out).toBe("");
    expect(existsSync(journalPath(stateDir, 41))).toBe(true);
    expect(readState(stateDir, "total", null)).toBeNull();
    const retry = await spawn(env, doc(2));
    expect(retry.code).toBe(0);
    expect(retry.err).toContain("replayed its journal");
    const emits = retry.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).enqueue);
    expect(emits.map((e: { dedup_id: string }) => e.dedup_id)).toEqual(["tally:41:0", "tally:41:2"]);
    expect(readState(stateDir, "total", 0)).toBe(2);
    expect(readdirSync(join(stateDir, "journal"))).toEqual(["41.json"]);
  }, 20_000);
});
