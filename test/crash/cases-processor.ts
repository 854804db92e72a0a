// The processor runtime's crash point: killed after its batch's result is journaled and before
// the state is applied. The dispatcher sees the attempt die and retries; the retry replays the
// journal, so the outputs arrive once and the state is applied once.
import { expect } from "bun:test";
import { join } from "node:path";
import { readState } from "../../src/processor/files.ts";
import { attemptsOf } from "./checks.ts";
import { type CrashCase, hook, statusOf } from "./harness.ts";

export const killedAfterJournal: CrashCase = {
  name: "the retry replays the journal: each output delivered once, the state applied once",
  async run(s) {
    // The dispatcher's armed hook reaches its processor children; only they call this point.
    const armed = await s.start(["run"], { hook: "processor.after_journal" });
    expect(statusOf(await s.send(armed.port, hook("tally", { topic: "t-1", type: "push", n: 1 })))).toBe('202 {"status":"queued"}');
    await s.settled(15_000);
    const batch = s.db.query("SELECT id FROM batches WHERE destination = 'script:tally'").get() as { id: number };
    expect(attemptsOf(s, batch.id).map((a) => [a.outcome, a.error?.split(";")[0] ?? null])).toEqual([
      ["retry", "killed by SIGKILL"],
      ["ok", null],
    ]);
    // Two outputs per batch (the unmapped type dropped), each delivered in its own batch, once.
    const outputs = s.receiver.accepted().filter((d) => d.path === "/tally");
    const items = outputs.flatMap((d) => d.doc.events) as { count: number; total: number }[];
    expect(items.sort((a, b) => b.count - a.count)).toEqual([
      { count: 1, total: 1 },
      { key: "other-key", count: 0, total: 1 },
    ] as never);
    expect(outputs.map((d) => d.doc.route).sort()).toEqual(["tally-tally", "tally-tally"]);
    expect(readState(join(s.home, "bobbins", "tally"), "total", 0)).toBe(1);
  },
};
