// Crash cases at the intake's points: killed before COMMIT, the request got no
// 2xx and left nothing; killed after COMMIT, the event is spooled and the sender's retry is a
// dedup hit or a second event in the same batch. Either way the receiver ends up with it.
import { expect } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { batchRow, copiesOf, expectDeliveredOnce } from "./checks.ts";
import { BODY_GRACE_S } from "../../src/bodies.ts";
import { type CrashCase, type CrashPoint, hook, type Scene, statusOf, waitFor } from "./harness.ts";

/** What an enqueue or quarantine transaction writes besides its rows (enqueue.ts, setMetaTx). */
const ENQUEUE_META = "meta WHERE key = 'last_enqueue_at' OR key LIKE 'source:%:last_event_at'";

/** Killed inside the enqueue transaction of a request with two copies (primary + tee). */
export function killedBeforeCommit(point: CrashPoint): CrashCase {
  return {
    name: "no 2xx, no copy, no batch, no dedup row; the sender's retry is accepted and both copies delivered",
    async run(s: Scene) {
      const h = hook("demo", { topic: "alpha", type: "push", n: 1 }, `evt-${point}`);
      const armed = await s.start(["run"], { hook: point });
      const first = await s.send(armed.port, h);
      expect(
        "dropped" in first,
        `event ${h.dedupId}: the request killed at ${point} was answered ${statusOf(first)}`,
      ).toBe(true);
      await s.killedAt(armed.hs, point);
      const left = {
        events: s.count("events"),
        batches: s.count("batches"),
        dedup: s.count("dedup"),
        meta: s.count(ENQUEUE_META),
      };
      expect(left, `event ${h.dedupId}: a half-applied enqueue transaction survived ${point}`).toEqual({
        events: 0,
        batches: 0,
        dedup: 0,
        meta: 0,
      });

      const again = await s.start();
      const retry = await s.send(again.port, h);
      expect(statusOf(retry), `event ${h.dedupId}: the sender's retry after the restart`).toBe(
        '202 {"status":"queued"}',
      );
      await s.settled();
      const copies = copiesOf(s, h.dedupId as string);
      expect(
        copies.map((c) => c.route),
        `event ${h.dedupId}: copies after the retry`,
      ).toEqual(["demo", "demo-mirror"]);
      for (const c of copies) expectDeliveredOnce(s, c.batch_id, [1]);
      expect(
        s.count("dedup WHERE dedup_id = ? AND event_id = ?", h.dedupId as string, copies[0].id),
        `event ${h.dedupId}: the dedup row does not point at the primary copy`,
      ).toBe(1);
    },
  };
}

/** Killed after COMMIT, before the response, for a source with a dedup id: the retry is a duplicate. */
export const afterCommitWithDedupId: CrashCase = {
  name: "committed without a 2xx; the retry is a dedup hit (200 duplicate) and each copy is delivered once",
  async run(s) {
    const h = hook("demo", { topic: "alpha", type: "push", n: 1 }, "evt-after-commit");
    const armed = await s.start(["run"], { hook: "intake.after_commit" });
    const first = await s.send(armed.port, h);
    expect("dropped" in first, `event ${h.dedupId}: killed after COMMIT, yet answered ${statusOf(first)}`).toBe(true);
    await s.killedAt(armed.hs, "intake.after_commit");
    const copies = copiesOf(s, "evt-after-commit");
    expect(
      copies.map((c) => c.route),
      `event ${h.dedupId}: committed before the kill, so both copies must be spooled`,
    ).toEqual(["demo", "demo-mirror"]);

    const again = await s.start();
    const retry = await s.send(again.port, h);
    expect(statusOf(retry), `event ${h.dedupId}: the retry of a committed event`).toBe('200 {"status":"duplicate"}');
    await s.settled();
    expect(copiesOf(s, "evt-after-commit"), `event ${h.dedupId}: a duplicate must make no new copies`).toEqual(copies);
    expect(
      s.count("dedup WHERE dedup_id = ? AND dup_count = 1", "evt-after-commit"),
      `event ${h.dedupId}: dup_count`,
    ).toBe(1);
    for (const c of copies) expectDeliveredOnce(s, c.batch_id, [1]);
  },
};

/**
 * The same for a source without a dedup id (Gmail's Pub/Sub): the retry is a second event in the
 * same batch. The intake comes back first and alone (its own unit), so nothing seals
 * the immediate batch before the retry joins it; then the dispatcher delivers both.
 */
export const afterCommitWithoutDedupId: CrashCase = {
  name: "committed without a 2xx; the retry without a dedup id is a second event in the same batch",
  async run(s) {
    const h = hook("nodedup", { topic: "beta", type: "push", n: 7 });
    const armed = await s.start(["run"], { hook: "intake.after_commit" });
    const first = await s.send(armed.port, h);
    expect("dropped" in first, `killed after COMMIT, yet answered ${statusOf(first)}`).toBe(true);
    await s.killedAt(armed.hs, "intake.after_commit");
    const committed = s.db.query("SELECT id, batch_id FROM events WHERE source = 'nodedup'").all() as {
      id: number;
      batch_id: number;
    }[];
    expect(committed.length, "the event committed before the kill is missing").toBe(1);
    const batch = committed[0].batch_id;
    expect(batchRow(s, batch).state, `batch ${batch}`).toBe("open");

    const intake = await s.start(["intake"]);
    const retry = await s.send(intake.port, h);
    expect(statusOf(retry), `batch ${batch}: the sender's retry`).toBe('202 {"status":"queued"}');
    const events = s.db.query("SELECT id, batch_id FROM events WHERE source = 'nodedup' ORDER BY id").all() as {
      id: number;
      batch_id: number;
    }[];
    expect(
      events.map((e) => e.batch_id),
      `event ${events[1]?.id}: the retry must join batch ${batch}`,
    ).toEqual([batch, batch]);
    intake.hs.kill("SIGTERM");
    expect(await intake.hs.exited, "the intake's clean stop").toBe(0);

    await s.start(["run"]);
    await s.settled();
    const d = expectDeliveredOnce(s, batch, [7, 7]);
    expect(
      d.doc.event_meta.map((m) => m.id),
      `batch ${batch}: both events, in commit order`,
    ).toEqual(events.map((e) => e.id));
  },
};

/** Killed inside the quarantine transaction of a verified request whose plugin raised. */
export const killedInQuarantine: CrashCase = {
  name: "no 2xx, no quarantine batch, no issue; the retry is quarantined, and after the fix queued and delivered",
  async run(s) {
    const broken = join(s.home, "broken");
    writeFileSync(broken, "");
    const h = hook("flaky", { topic: "gamma", type: "push", n: 3 });
    const armed = await s.start(["run"], { hook: "quarantine.before_commit" });
    const first = await s.send(armed.port, h);
    expect("dropped" in first, `killed inside quarantine, yet answered ${statusOf(first)}`).toBe(true);
    await s.killedAt(armed.hs, "quarantine.before_commit");
    const left = {
      events: s.count("events"),
      batches: s.count("batches"),
      issues: s.count("issues"),
      meta: s.count(ENQUEUE_META),
    };
    expect(left, "a half-applied quarantine transaction survived").toEqual({
      events: 0,
      batches: 0,
      issues: 0,
      meta: 0,
    });

    const again = await s.start();
    expect(statusOf(await s.send(again.port, h)), "the retry while the plugin is still broken").toBe(
      '202 {"status":"quarantined"}',
    );
    const q = s.db
      .query(
        "SELECT b.id, b.state, e.raw FROM batches b JOIN events e ON e.batch_id = b.id WHERE " +
          "b.destination = 'quarantine'",
      )
      .all() as { id: number; state: string; raw: Uint8Array }[];
    expect(q.length, "exactly one quarantine batch (the retry's)").toBe(1);
    expect(q[0].state, `quarantine batch ${q[0].id}`).toBe("dead");
    expect(new TextDecoder().decode(q[0].raw), `quarantine batch ${q[0].id} must keep the raw body`).toBe(h.body);

    rmSync(broken);
    expect(statusOf(await s.send(again.port, h)), "the retry after the fix").toBe('202 {"status":"queued"}');
    await s.settled();
    const queued = s.db
      .query("SELECT id, batch_id FROM events WHERE source = 'flaky' AND payload IS NOT NULL")
      .all() as { id: number; batch_id: number }[];
    expect(queued.length, "the fixed retry's event").toBe(1);
    expectDeliveredOnce(s, queued[0].batch_id, [3]);
  },
};

/**
 * Killed inside a group commit, with requests from several senders in the transaction: none is
 * answered, none is stored, and each sender's retry is queued and delivered once.
 */
export const killedInGroup: CrashCase = {
  name:
    "a group of concurrent requests killed before its COMMIT: no 2xx to any, nothing stored; " +
    "every retry delivered once",
  async run(s: Scene) {
    const hooks = Array.from({ length: 8 }, (_, i) =>
      hook("demo", { topic: `g${i}`, type: "push", n: i }, `evt-group-${i}`),
    );
    const armed = await s.start(["run"], { hook: "enqueue.after_savepoint" });
    const answers = await Promise.all(hooks.map((h) => s.send(armed.port, h)));
    for (const [i, a] of answers.entries())
      expect(
        "dropped" in a,
        `event ${hooks[i].dedupId}: answered ${statusOf(a)} though the process died before its COMMIT`,
      ).toBe(true);
    await s.killedAt(armed.hs, "enqueue.after_savepoint");
    expect(
      { events: s.count("events"), batches: s.count("batches"), dedup: s.count("dedup") },
      "a killed group left rows behind",
    ).toEqual({ events: 0, batches: 0, dedup: 0 });

    const again = await s.start();
    for (const h of hooks)
      expect(statusOf(await s.send(again.port, h)), `event ${h.dedupId}: the retry after the restart`).toBe(
        '202 {"status":"queued"}',
      );
    await s.settled();
    for (const [i, h] of hooks.entries()) {
      const copies = copiesOf(s, h.dedupId as string);
      expect(
        copies.map((c) => c.route),
        `event ${h.dedupId}: copies after the retry`,
      ).toEqual(["demo", "demo-mirror"]);
      for (const c of copies) expectDeliveredOnce(s, c.batch_id, [i]);
    }
  },
};

/**
 * Killed after a large body's file was kept and before the transaction that names it: no 2xx,
 * no row, and the file is an orphan the maintenance loop's body sweep removes once it is past the
 * grace; the sender's retry is accepted and delivered with the whole body.
 */
export const killedAfterBodyFile: CrashCase = {
  name: "a kept body file without its row is an orphan the body sweep removes; the retry is delivered whole",
  async run(s) {
    // Above the harness's spool.inline_max_bytes (2.5 MB): streamed to a file under <home>/bodies/.
    const pad = "x".repeat(2_700_000);
    const h = hook("demo", { topic: "alpha", type: "push", n: 1, pad }, "evt-body-file");
    const sha = createHash("sha256").update(h.body).digest("hex");
    const file = join(s.home, "bodies", sha);
    const armed = await s.start(["run"], { hook: "intake.after_body_file" });
    const first = await s.send(armed.port, h);
    expect("dropped" in first, `event ${h.dedupId}: killed before COMMIT, yet answered ${statusOf(first)}`).toBe(true);
    await s.killedAt(armed.hs, "intake.after_body_file");
    expect(s.count("events"), `event ${h.dedupId}: a row survived the kill before COMMIT`).toBe(0);
    expect(existsSync(file), `event ${h.dedupId}: the body file was kept (fsync'd) before the kill`).toBe(true);
    // The sweep leaves files younger than its grace (an intake may be about to commit): age it.
    const old = (Date.now() - 2 * BODY_GRACE_S * 1000) / 1000;
    utimesSync(file, old, old);
    const again = await s.start();
    await waitFor("the body sweep to remove the orphan", () => !existsSync(file));
    const retry = await s.send(again.port, h);
    expect(statusOf(retry), `event ${h.dedupId}: the sender's retry after the restart`).toBe('202 {"status":"queued"}');
    await s.settled();
    expect(existsSync(file), `event ${h.dedupId}: the retry's body file`).toBe(true);
    const copies = copiesOf(s, "evt-body-file");
    for (const c of copies) {
      const got = expectDeliveredOnce(s, c.batch_id, [1]);
      expect((got.doc.events[0] as { pad?: string }).pad?.length, `batch ${c.batch_id}: the body inline`).toBe(
        pad.length,
      );
    }
  },
};
