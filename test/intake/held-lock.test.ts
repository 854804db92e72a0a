// Another process holds the spool's write lock (a long prune --vacuum, a sqlite3 shell) while
// `hookspool run` takes requests. Nothing on the event loop waits for the lock: /healthz, a 404
// and an unsigned request keep answering at once; a signed request waits for the lock off the
// loop for busy_timeout_s, then gets 503 with Retry-After; one whose wait spans the release is
// committed and acked; and every 2xx comes after its event's COMMIT (a reader sees it as soon as
// the answer arrives).
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const HOLDER = join(import.meta.dir, "..", "helpers", "children", "lock-holder.ts");
const BUSY_TIMEOUT_S = 1;

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)];

test("with another process holding the write lock, the loop keeps answering and a POST gets 503 in time", async () => {
  const home = tempDir("hookspool-held-lock-");
  writeFileSync(join(home, "secret"), "s3cret", { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[intake]\nlisten = "127.0.0.1:0"\nbusy_timeout_s = ${BUSY_TIMEOUT_S}\n\n[sources.demo]\n` +
      `template = { scheme = "static-token", header = "X-Token", key = "topic", dedup = "id" }\n` +
      `secrets.secret = { file = "${join(home, "secret")}" }\naction = "script:x"\n\n` +
      `[destinations."script:x"]\nargv = ["/bin/true"]\n`,
  );
  const run = await startHookspool(home, ["run"]);
  let reader: Database | null = null;
  let holder: ReturnType<typeof Bun.spawn> | null = null;
  try {
    const base = `http://127.0.0.1:${await run.port()}`;
    const db = new Database(join(home, "spool.db"), { readonly: true });
    reader = db;
    let n = 0;
    const post = async (token = "s3cret") => {
      const id = `e${++n}`;
      const t0 = performance.now();
      const res = await fetch(`${base}/hooks/demo`, {
        method: "POST",
        body: JSON.stringify({ topic: "t", id }),
        headers: { "X-Token": token },
        signal: AbortSignal.timeout(20_000),
      });
      const ms = performance.now() - t0;
      // Read at once, on another connection: an acked event must already be committed.
      const stored = db.query("SELECT COUNT(*) AS n FROM events WHERE dedup_id = ?").get(id) as { n: number };
      return { id, status: res.status, retryAfter: res.headers.get("retry-after"), ms, stored: stored.n };
    };
    expect((await post()).status).toBe(202);

    holder = Bun.spawn([process.execPath, HOLDER, join(home, "spool.db"), "30"], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const lines = (holder.stdout as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await lines.read()).value);
    expect(first).toContain("held");

    // Sample the answers that must not wait while signed requests do.
    let sampling = true;
    const samples = { healthz: [] as number[], notFound: [] as number[], unsigned: [] as number[] };
    const sampler = (async () => {
      while (sampling) {
        for (const [kind, req] of [
          ["healthz", () => fetch(`${base}/healthz`, { keepalive: false })],
          ["notFound", () => fetch(`${base}/nowhere`, { keepalive: false })],
          [
            "unsigned",
            () =>
              fetch(`${base}/hooks/demo`, {
                method: "POST",
                body: "{}",
                headers: { "X-Token": "no" },
                keepalive: false,
              }),
          ],
        ] as const) {
          const t0 = performance.now();
          const res = await req();
          await res.arrayBuffer();
          samples[kind].push(performance.now() - t0);
          if (kind === "notFound") expect(res.status).toBe(404);
          if (kind === "unsigned") expect(res.status).toBe(401);
          if (kind === "healthz") expect([200, 503]).toContain(res.status);
        }
      }
    })();

    // Signed requests while the lock is held: each waits its busy timeout, then 503.
    const refused = await Promise.all([post(), Bun.sleep(300).then(() => post()), Bun.sleep(900).then(() => post())]);
    for (const r of refused) {
      expect({ status: r.status, retryAfter: r.retryAfter, stored: r.stored }).toEqual({
        status: 503,
        retryAfter: "1",
        stored: 0,
      });
      expect(r.ms).toBeGreaterThanOrEqual(BUSY_TIMEOUT_S * 1000 - 50);
      expect(r.ms).toBeLessThan((BUSY_TIMEOUT_S + 1) * 1000);
    }

    // One whose wait spans the release: committed, then acked.
    const spanning = post();
    await Bun.sleep(100);
    (holder.stdin as import("bun").FileSink).end();
    await waitFor("the holder to let go", async () => holder?.exitCode === 0);
    const late = await spanning;
    expect({ status: late.status, stored: late.stored }).toEqual({ status: 202, stored: 1 });
    sampling = false;
    await sampler;

    const after = await Promise.all(Array.from({ length: 5 }, () => post()));
    expect(after.map((r) => [r.status, r.stored])).toEqual(Array(5).fill([202, 1]));

    for (const [kind, xs] of Object.entries(samples)) {
      expect([kind, xs.length >= 20]).toEqual([kind, true]);
      expect([kind, p99(xs) < 50]).toEqual([kind, true]);
    }
    console.info(
      `held lock: /healthz p99 ${p99(samples.healthz).toFixed(1)} ms over ${samples.healthz.length} ` +
        `answers; 503s after ${refused.map((r) => r.ms.toFixed(0)).join(", ")} ms`,
    );
  } catch (e) {
    console.error(
      run
        .stderr()
        .split("\n")
        .filter((l) => !l.includes("unverified"))
        .join("\n")
        .slice(-4000),
    );
    throw e;
  } finally {
    if (holder && holder.exitCode === null) holder.kill("SIGKILL");
    reader?.close();
    run.kill("SIGKILL");
    await run.proc.exited;
  }
}, 60_000);
