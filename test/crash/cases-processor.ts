// The processor runtime's crash point: killed after its batch's result is journaled and before
// the state is applied. The dispatcher sees the attempt die and retries; the retry replays the
// journal, so the outputs arrive once and the state is applied once.
import { expect } from "bun:test";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { readState } from "../../src/processor/files.ts";
import { manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { attemptsOf } from "./checks.ts";
import { type CrashCase, hook, statusOf, waitFor } from "./harness.ts";

export const killedAfterJournal: CrashCase = {
  name: "the retry replays the journal: each output delivered once, the state applied once",
  async run(s) {
    // The dispatcher's armed hook reaches its processor children; only they call this point.
    const armed = await s.start(["run"], { hook: "processor.after_journal" });
    expect(statusOf(await s.send(armed.port, hook("tally", { topic: "t-1", type: "push", n: 1 })))).toBe(
      '202 {"status":"queued"}',
    );
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

/**
 * The poll clock's crash point: killed after the tick is enqueued and before next_at moves, in
 * the same transaction, so neither is on disk; the restarted dispatcher ticks once.
 */
export const killedInPollTick: CrashCase = {
  name: "neither the tick nor the next_at move survives; after the restart the instance ticks once",
  async run(s) {
    const root = join(s.home, "bobbins-private");
    const manifest = manifestText(
      "acme.feed",
      '\n[poll]\nevery_s = 60\njitter_s = 0\nmodule = "poller"\n\n[outputs.filing]\ndescription = "a filing"\n',
    )
      .replace(/\[source\][\s\S]*?\n\n/, "")
      .replace(/\[secrets\.secret\]\ndescription = "the signing secret"\n\n/, "")
      .replace(/\[outputs\."\*"\]\ndescription = "every accepted event"\n/, "");
    writeBobbin(root, "acme/feed", manifest, { "poller.ts": "export default { poll: () => [] };\n" });
    appendFileSync(
      join(s.home, "config.toml"),
      '\n[bobbins.feed]\nbobbin = "acme.feed"\noutputs = { filing = "receiver" }\n',
    );
    const armed = await s.start(["dispatch"], { hook: "poll.after_enqueue" });
    await s.killedAt(armed.hs, "poll.after_enqueue");
    const row = () =>
      s.db.query("SELECT next_at, created_at, last_batch_id FROM polls WHERE instance = 'feed'").get() as {
        next_at: number;
        created_at: number;
        last_batch_id: number | null;
      };
    const ticks = () => s.count("events WHERE source = 'feed'");
    // Scheduled in an earlier transaction (jitter 0: due at once), then killed inside the tick's.
    expect({ ticks: ticks(), moved: row().next_at !== row().created_at, batch: row().last_batch_id }).toEqual({
      ticks: 0,
      moved: false,
      batch: null,
    });
    s.closeDb();
    await s.start(["dispatch"]);
    await waitFor("the restarted dispatcher's tick", () => ticks() >= 1);
    await s.settled();
    expect(ticks()).toBe(1);
    expect(s.db.query("SELECT dedup_id FROM events WHERE source = 'feed'").get()).toEqual({
      dedup_id: `poll:feed:${row().created_at}`,
    });
  },
};
