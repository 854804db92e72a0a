// With an hour between the dispatcher's ticks, a batch is still delivered the moment it is ready:
// an event whose batch is ready at once (the immediate span) in milliseconds, and one in a quiet
// window as that window ends. Under `run` the intake tells the dispatcher; with intake and
// dispatch as two processes, the dispatcher sees the other process's commits (data_version).
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { earliestReady } from "../../src/intake/pipeline.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const TOKEN = "kit-test-wake-token";

async function deliver(
  layout: "run" | "split",
  window: string,
  topics: string[],
): Promise<{ docs: { events: { n: number }[] }[]; elapsedMs: number }> {
  const home = tempDir("hookspool-wake-");
  writeFileSync(join(home, "token"), TOKEN, { mode: 0o600 });
  const receiver = new Receiver<{ events: { n: number }[] }>({});
  writeFileSync(
    join(home, "config.toml"),
    `[intake]\nlisten = "127.0.0.1:0"\n\n[dispatch]\npoll_s = 3600\n\n[sources.s]\ntemplate = { ` +
      `scheme = "static-token", header = "X-Token", key = "topic" }\nsecrets.secret = { file ` +
      `= "${join(home, "token")}" }\n${window}\naction = "receiver"\n\n[destinations.receiver]\ntype = ` +
      `"http"\nurl = "http://127.0.0.1:${receiver.port}/in"\nallow_insecure = true\nunsigned = true\n`,
  );
  if (layout === "split") expect((await runHookspool(home, ["migrate"])).code).toBe(0);
  const procs: Hookspool[] =
    layout === "run"
      ? [await startHookspool(home, ["run"])]
      : [await startHookspool(home, ["intake"]), await startHookspool(home, ["dispatch"])];
  try {
    const port = await procs[0].port();
    // The dispatcher's first tick is over (it wrote its heartbeat): what follows waits on no tick.
    if (layout === "split")
      await waitFor("the dispatcher's first tick", () => heartbeatPid(home) === procs[1].proc.pid);
    const sent = Date.now();
    for (const [n, topic] of topics.entries()) {
      const res = await fetch(`http://127.0.0.1:${port}/hooks/s`, {
        method: "POST",
        body: JSON.stringify({ topic, n }),
        headers: { "Content-Type": "application/json", "X-Token": TOKEN },
      });
      expect(res.status).toBe(202);
    }
    await waitFor(`${topics.length} deliveries`, () => receiver.accepted().length === topics.length, 10_000);
    return { docs: receiver.accepted().map((d) => d.doc), elapsedMs: Date.now() - sent };
  } finally {
    for (const p of procs) p.kill("SIGTERM");
    for (const p of procs) await p.exited;
    receiver.stop();
  }
}

function heartbeatPid(home: string): number | null {
  const db = new Database(join(home, "spool.db"), { readonly: true });
  try {
    const row = db.query("SELECT value FROM meta WHERE key = 'dispatcher_pid'").get() as { value: string } | null;
    return row ? Number(row.value) : null;
  } finally {
    db.close();
  }
}

for (const layout of ["run", "split"] as const) {
  test(`${layout}: a ready batch is delivered without waiting for the next tick`, async () => {
    const { docs } = await deliver(layout, 'span = "immediate"', ["t1", "t2", "t3"]);
    expect(docs.flatMap((d) => d.events.map((e) => e.n)).sort()).toEqual([0, 1, 2]);
  }, 20_000);

  test(`${layout}: a batch in a quiet window is delivered as the window ends, not at the next tick`, async () => {
    const { docs, elapsedMs } = await deliver(layout, "quiet_s = 0.4\nmax_s = 30", ["t"]);
    expect(docs.map((d) => d.events.map((e) => e.n))).toEqual([[0]]);
    // Not before the quiet window ended: the batch was open until then.
    expect(elapsedMs).toBeGreaterThanOrEqual(400);
  }, 20_000);
}

test("earliestReady: now when sealed or windowless, else the shortest window of the copies", () => {
  const w = (quiet_s: number, max_s: number) => ({ quiet_s, max_s, max_events: 10, max_bytes: 1000 });
  const copy = (quiet_s: number, max_s: number, tee = false) => ({
    route: "r",
    destination: "d",
    tee,
    window: w(quiet_s, max_s),
  });
  const placed = (sealed: boolean, tee = false) => ({
    eventId: 1,
    batchId: 1,
    route: "r",
    destination: "d",
    tee,
    sealed,
  });
  expect(earliestReady([placed(false)], [copy(5, 60)], 100)).toBe(105);
  expect(earliestReady([placed(false)], [copy(90, 60)], 100)).toBe(160);
  expect(earliestReady([placed(true)], [copy(5, 60)], 100)).toBe(100);
  expect(earliestReady([placed(false)], [copy(0, 60)], 100)).toBe(100);
  expect(earliestReady([placed(false), placed(false, true)], [copy(5, 60), copy(2, 60, true)], 100)).toBe(102);
});
