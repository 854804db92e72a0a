// Power-loss simulation: a writer SIGSTOPped at a crash point, its
// spool.db, -wal and -shm copied while it is frozen mid-transaction, then SIGKILLed. The copy
// must pass quick_check and hold exactly the committed state: everything acknowledged, nothing
// of the stopped transaction, and the same rows the original holds once its writer is dead.
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { openSpool, quickCheck } from "../../src/store/sqlite/db.ts";
import type { Hookspool } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";
import { dump } from "./checks.ts";
import { hook, type Scene, scene, statusOf, waitFor } from "./harness.ts";

/** The state letter of /proc/<pid>/stat ('T' when stopped). */
function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return null;
  }
}

/** Wait for the writer to stop itself, copy the database files, then kill it. Returns the copy's path. */
async function copyWhileStopped(s: Scene, hs: Hookspool, point: string): Promise<string> {
  await waitFor(
    `hookspool to stop itself at ${point}`,
    () => procState(hs.proc.pid) === "T" || hs.proc.exitCode !== null,
  );
  expect(procState(hs.proc.pid), `hookspool should be stopped at ${point}: ${hs.stderr().slice(-300)}`).toBe("T");
  const dir = tempDir("hookspool-powerloss-");
  const copied: string[] = [];
  for (const suffix of ["", "-wal", "-shm"]) {
    if (!existsSync(s.dbPath + suffix)) continue;
    copyFileSync(s.dbPath + suffix, join(dir, `spool.db${suffix}`));
    copied.push(`spool.db${suffix}`);
  }
  hs.kill("SIGKILL");
  await hs.exited;
  expect(copied, "the database and its WAL were there to copy").toContain("spool.db-wal");
  return join(dir, "spool.db");
}

/** Open the copy and the original (its writer dead): both pass quick_check and hold the same rows. */
function readCopy(s: Scene, copy: string): ReturnType<typeof openSpool> {
  const spool = openSpool(copy);
  expect(quickCheck(spool), "quick_check of the copy").toEqual([]);
  const copyRows = dump(spool.db);
  const originalRows = dump(s.db);
  for (const table of Object.keys(originalRows)) {
    expect(copyRows[table], `table ${table}: the copy does not hold the committed state of the original`).toEqual(
      originalRows[table],
    );
  }
  return spool;
}

function dedupIds(db: ReturnType<typeof openSpool>["db"]): string[] {
  return (db.query("SELECT dedup_id FROM dedup ORDER BY dedup_id").all() as { dedup_id: string }[]).map(
    (r) => r.dedup_id,
  );
}

test(
  "stopped at enqueue.before_commit: the copy holds every acknowledged event and nothing of the open transaction",
  () =>
    scene("bun", async (s) => {
      // Acknowledged events, left in the WAL by a writer that dies without a clean close.
      const first = await s.start();
      const acked = ["pl-1", "pl-2", "pl-3"];
      for (const [i, id] of acked.entries()) {
        expect(
          statusOf(await s.send(first.port, hook("demo", { topic: `k${i}`, type: "push", n: i }, id))),
          `event ${id}`,
        ).toBe('202 {"status":"queued"}');
      }
      first.hs.kill("SIGKILL");
      await first.hs.exited;

      const armed = await s.start(["run"], { hook: "enqueue.before_commit", hookAction: "stop" });
      const walBefore = statSync(`${s.dbPath}-wal`).size;
      // ~2.4 MB (stored once: the raw body is the payload byte for byte): more than the page cache
      // holds, so SQLite spills the open transaction's pages into the WAL before COMMIT and the copy has them.
      const pending = s.send(
        armed.port,
        hook("demo", { topic: "omega", type: "push", n: 9, pad: "x".repeat(2_400_000) }, "pl-stopped"),
      );
      const copy = await copyWhileStopped(s, armed.hs, "enqueue.before_commit");
      expect(
        statSync(`${copy}-wal`).size,
        "the copied WAL should carry the open transaction's spilled pages",
      ).toBeGreaterThan(walBefore + 1_000_000);
      const answer = await pending;
      expect("dropped" in answer, `event pl-stopped: the stopped request was answered ${statusOf(answer)}`).toBe(true);

      const spool = readCopy(s, copy);
      try {
        expect(dedupIds(spool.db), "dedup rows in the copy: the acknowledged events, not the stopped one").toEqual(
          acked,
        );
        for (const id of acked) {
          const routes = (
            spool.db.query("SELECT route FROM events WHERE dedup_id = ? ORDER BY id").all(id) as { route: string }[]
          ).map((r) => r.route);
          expect(routes, `event ${id} was acknowledged but its copies are not all in the copy`).toEqual([
            "demo",
            "demo-mirror",
          ]);
        }
        expect(
          spool.db.query("SELECT COUNT(*) AS n FROM events WHERE dedup_id = 'pl-stopped'").get(),
          "event pl-stopped: a row of the stopped transaction",
        ).toEqual({ n: 0 });
        expect(
          spool.db.query("SELECT COUNT(*) AS n FROM batches WHERE key = 'omega'").get(),
          "event pl-stopped: a batch of the stopped transaction",
        ).toEqual({ n: 0 });
      } finally {
        spool.close();
      }
    }),
  20_000,
);

test(
  "stopped at mark.before_commit: the copy has the batch leased, its attempt open, and none of the script's emits",
  () =>
    scene("bun", async (s) => {
      const armed = await s.start(["run"], { hook: "mark.before_commit", hookAction: "stop" });
      expect(
        statusOf(await s.send(armed.port, hook("jobs", { topic: "pm", type: "push", n: 1 }, "pm-1"))),
        "event pm-1",
      ).toBe('202 {"status":"queued"}');
      const copy = await copyWhileStopped(s, armed.hs, "mark.before_commit");
      expect(s.scriptRuns().length, "the script ran and printed its emit before the stop").toBe(1);

      const spool = readCopy(s, copy);
      try {
        const row = spool.db
          .query("SELECT b.id, b.state FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.dedup_id = 'pm-1'")
          .get() as { id: number; state: string } | null;
        expect(row, "event pm-1 was acknowledged but is not in the copy").not.toBeNull();
        const batch = row as { id: number; state: string };
        expect(batch.state, `batch ${batch.id}: the stopped mark must not be in the copy`).toBe("leased");
        const attempts = spool.db.query("SELECT finished_at, outcome FROM attempts WHERE batch_id = ?").all(batch.id);
        expect(attempts, `batch ${batch.id}: its one attempt is still open in the copy`).toEqual([
          { finished_at: null, outcome: null },
        ]);
        expect(
          spool.db.query("SELECT COUNT(*) AS n FROM events WHERE source = 'emitted'").get(),
          `batch ${batch.id}: an emit of the stopped mark is in the copy`,
        ).toEqual({ n: 0 });
      } finally {
        spool.close();
      }
    }),
  20_000,
);

test(
  "stopped at intake.after_commit (before the 2xx is written): the copy already holds the event",
  () =>
    scene("bun", async (s) => {
      const armed = await s.start(["run"], { hook: "intake.after_commit", hookAction: "stop" });
      const pending = s.send(armed.port, hook("demo", { topic: "alpha", type: "push", n: 1 }, "pa-1"));
      const copy = await copyWhileStopped(s, armed.hs, "intake.after_commit");
      await pending;

      const spool = readCopy(s, copy);
      try {
        const routes = (
          spool.db.query("SELECT route FROM events WHERE dedup_id = 'pa-1' ORDER BY id").all() as { route: string }[]
        ).map((r) => r.route);
        expect(routes, "event pa-1: committed before its 2xx, so the copy must hold both copies").toEqual([
          "demo",
          "demo-mirror",
        ]);
        expect(dedupIds(spool.db), "event pa-1: its dedup row").toEqual(["pa-1"]);
      } finally {
        spool.close();
      }
    }),
  20_000,
);
