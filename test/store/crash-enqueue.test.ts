// A real process killed with SIGKILL inside the enqueue transaction leaves all copies or none.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { freshSpool } from "../helpers/spool.ts";

const child = join(import.meta.dir, "..", "helpers", "children", "enqueue-once.ts");

async function runChild(
  dbPath: string,
  hook?: string,
): Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }> {
  const p = Bun.spawn([process.execPath, child, dbPath], {
    env: { ...process.env, HOOKSPOOL_TEST_HOOK: hook ?? "" },
    stdout: "pipe",
    stderr: "pipe",
  });
  await p.exited;
  return { exitCode: p.exitCode, signal: typeof p.signalCode === "string" ? p.signalCode : null };
}

function counts(dbPath: string): { events: number; batches: number; dedup: number } {
  const s = openSpool(dbPath);
  try {
    const n = (t: string) => (s.db.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
    return { events: n("events"), batches: n("batches"), dedup: n("dedup") };
  } finally {
    s.close();
  }
}

for (const hook of ["enqueue.after_copy.0", "enqueue.after_copy.1", "enqueue.before_commit"]) {
  test(`killed at ${hook}: no copy, no batch, no dedup row survives`, async () => {
    const t = freshSpool();
    t.spool.close();
    const r = await runChild(t.path, hook);
    expect(r.signal).toBe("SIGKILL");
    expect(counts(t.path)).toEqual({ events: 0, batches: 0, dedup: 0 });
  });
}

test("not killed: all three copies commit together", async () => {
  const t = freshSpool();
  t.spool.close();
  const r = await runChild(t.path);
  expect(r.exitCode).toBe(0);
  expect(counts(t.path)).toEqual({ events: 3, batches: 3, dedup: 1 });
});
