// Crash cases at the dispatcher's points: a killed seal or claim leaves
// the batch as it was; a killed delivery is recovered at startup as 'lease expired' and delivered
// again with the same events, content_hash and webhook-id; a killed mark loses the script's emits.
import { expect } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { attemptsOf, batchRow, copiesOf, expectDeliveredOnce, expectLeaseExpiredThenOk } from "./checks.ts";
import { type CrashCase, hook, type Scene, statusOf } from "./harness.ts";

/** Send one webhook to a process armed at a dispatcher point; the intake acks it normally. */
async function ackedThenKilled(
  s: Scene,
  point: Parameters<Scene["killedAt"]>[1],
  source: string,
  dedupId: string,
  n: number,
): Promise<number> {
  const armed = await s.start(["run"], { hook: point });
  const h = hook(source, { topic: `t-${dedupId}`, type: "push", n }, dedupId);
  expect(
    statusOf(await s.send(armed.port, h)),
    `event ${dedupId}: the intake must ack before the dispatcher dies`,
  ).toBe('202 {"status":"queued"}');
  await s.killedAt(armed.hs, point);
  const copies = copiesOf(s, dedupId);
  expect(copies.length, `event ${dedupId}: acked, so it must be spooled`).toBe(1);
  return copies[0].batch_id;
}

/**
 * seal.before_commit runs on every tick, so a dispatcher armed there dies on its first one: the
 * open batches come first, from `hookspool enqueue` (a real process, as a sweep would).
 */
export const killedInSeal: CrashCase = {
  name: "the batches stay open with no content_hash; after the restart each is delivered once",
  async run(s) {
    expect((await s.command(["migrate"])).code, "hookspool migrate").toBe(0);
    const file = join(s.home, "payload.json");
    writeFileSync(file, JSON.stringify({ topic: "alpha", type: "push", n: 4 }));
    const enq = await s.command([
      "enqueue",
      "--source",
      "demo",
      "--key",
      "alpha",
      "--event-type",
      "push",
      "--dedup-id",
      "evt-seal",
      "--file",
      file,
    ]);
    expect(enq.code, `hookspool enqueue: ${enq.stderr}`).toBe(0);
    const copies = copiesOf(s, "evt-seal");
    expect(copies.length, "hookspool enqueue made a primary and a tee copy").toBe(2);
    s.closeDb();

    const armed = await s.start(["dispatch"], { hook: "seal.before_commit" });
    await s.killedAt(armed.hs, "seal.before_commit");
    for (const c of copies) {
      const b = batchRow(s, c.batch_id);
      expect(
        { state: b.state, sealed_at: b.sealed_at, content_hash: b.content_hash },
        `batch ${b.id}: a half-applied seal survived`,
      ).toEqual({ state: "open", sealed_at: null, content_hash: null });
    }

    await s.start(["dispatch"]);
    await s.settled();
    for (const c of copies) {
      expectDeliveredOnce(s, c.batch_id, [4]);
      expect(
        attemptsOf(s, c.batch_id).map((a) => a.outcome),
        `batch ${c.batch_id}: attempts`,
      ).toEqual(["ok"]);
    }
  },
};

export const killedInClaim: CrashCase = {
  name: "the batch stays sealed with no lease and no attempt row; after the restart it is delivered once",
  async run(s) {
    const batch = await ackedThenKilled(s, "claim.before_commit", "slow", "evt-claim", 5);
    const b = batchRow(s, batch);
    expect({ state: b.state, lease_owner: b.lease_owner }, `batch ${batch}: a half-applied claim survived`).toEqual({
      state: "sealed",
      lease_owner: null,
    });
    expect(b.content_hash, `batch ${batch}: sealed before the claim, so its content_hash is set`).not.toBeNull();
    expect(attemptsOf(s, batch).length, `batch ${batch}: the killed claim's attempt row survived`).toBe(0);

    await s.start();
    await s.settled();
    const d = expectDeliveredOnce(s, batch, [5]);
    expect(d.doc.content_hash, `batch ${batch}: the delivered content_hash is not the one frozen at seal`).toBe(
      b.content_hash as string,
    );
    expect(
      attemptsOf(s, batch).map((a) => [a.n, a.outcome]),
      `batch ${batch}: attempts`,
    ).toEqual([[1, "ok"]]);
  },
};

export const killedBeforeRequest: CrashCase = {
  name: "startup recovery finishes the attempt as 'lease expired' (retry); the receiver sees the batch once",
  async run(s) {
    const batch = await ackedThenKilled(s, "deliver.before_request", "slow", "evt-before-request", 6);
    expect(batchRow(s, batch).state, `batch ${batch}`).toBe("leased");
    expect(
      attemptsOf(s, batch).map((a) => a.finished_at),
      `batch ${batch}: one attempt, open`,
    ).toEqual([null]);
    expect(s.receiver.of(batch).length, `batch ${batch} reached the receiver before the request`).toBe(0);

    const again = await s.start();
    await s.settled();
    expectDeliveredOnce(s, batch, [6]);
    expectLeaseExpiredThenOk(s, batch);
    expect(again.hs.stderr(), "startup recovery says what it did").toContain("recovered leases of a previous run");
  },
};

export const killedAfterResponse: CrashCase = {
  name: "delivered again after the restart with the same events, content_hash and webhook-id",
  async run(s) {
    const batch = await ackedThenKilled(s, "deliver.after_response", "slow", "evt-after-response", 8);
    expect(batchRow(s, batch).state, `batch ${batch}: the mark never ran`).toBe("leased");
    expect(s.receiver.of(batch).length, `batch ${batch}: the receiver answered 200 before the kill`).toBe(1);

    await s.start();
    await s.settled();
    expect(s.receiver.of(batch).length, `batch ${batch}: at least once means exactly twice here`).toBe(2);
    const [one, two] = s.receiver.of(batch);
    const hash = batchRow(s, batch).content_hash;
    expect(
      [one.doc.content_hash, two.doc.content_hash],
      `batch ${batch} was delivered with two content_hashes`,
    ).toEqual([hash as string, hash as string]);
    expect(two.doc.events, `batch ${batch}: the redelivery carries other events`).toEqual(one.doc.events);
    expect(two.doc.event_meta, `batch ${batch}: the redelivery carries other event_meta`).toEqual(one.doc.event_meta);
    expect(two.webhookId, `batch ${batch}: an http redelivery must keep its webhook-id so the receiver dedups`).toBe(
      one.webhookId,
    );
    expect([one.doc.attempt, two.doc.attempt], `batch ${batch}: attempt numbers`).toEqual([1, 2]);
    expect(batchRow(s, batch).state, `batch ${batch}`).toBe("delivered");
    expectLeaseExpiredThenOk(s, batch);
  },
};

/** A script that prints an emit, killed between its exit and the fenced mark. */
export const killedInMark: CrashCase = {
  name: "the killed run's emits never appear; the script runs again and its emits commit once, with the mark",
  async run(s) {
    const batch = await ackedThenKilled(s, "mark.before_commit", "jobs", "evt-mark", 9);
    expect(batchRow(s, batch).state, `batch ${batch}: the mark was rolled back`).toBe("leased");
    expect(
      attemptsOf(s, batch).map((a) => a.finished_at),
      `batch ${batch}: one attempt, open`,
    ).toEqual([null]);
    expect(s.scriptRuns().length, `batch ${batch}: the script ran before the kill`).toBe(1);
    expect(
      s.count("events WHERE source = 'emitted'"),
      `batch ${batch}: the killed run's emit was committed without its mark`,
    ).toBe(0);

    await s.start();
    await s.settled();
    const runs = s.scriptRuns();
    expect(runs.length, `batch ${batch}: the script runs again after the restart`).toBe(2);
    expect(
      runs.map((r) => r.doc.batch_id),
      "both runs are of the one batch",
    ).toEqual([batch, batch]);
    expect(runs[1].doc.content_hash, `batch ${batch}: the second run got another content_hash`).toBe(
      runs[0].doc.content_hash,
    );
    expect(runs[1].doc.events, `batch ${batch}: the second run got other events`).toEqual(runs[0].doc.events);
    expect(
      runs.map((r) => r.env_delivery_id),
      `batch ${batch}: a script's delivery id is per batch`,
    ).toEqual([runs[0].doc.delivery_id, runs[0].doc.delivery_id]);

    const done = batchRow(s, batch);
    expect(done.state, `batch ${batch}`).toBe("delivered");
    const emitted = s.db
      .query(
        "SELECT e.id, e.batch_id, b.key, e.received_at FROM events e JOIN batches b ON b.id = " +
          "e.batch_id WHERE e.source = 'emitted'",
      )
      .all() as { id: number; batch_id: number; key: string; received_at: number }[];
    expect(
      emitted.map((e) => e.key),
      `batch ${batch}: its emit must appear exactly once`,
    ).toEqual([`followup-${batch}`]);
    expect(
      emitted[0].received_at,
      `event ${emitted[0].id}: the emit was not committed with batch ${batch}'s delivered mark`,
    ).toBe(done.delivered_at as number);
    expectDeliveredOnce(s, emitted[0].batch_id, [undefined]);
    expect(s.receiver.of(emitted[0].batch_id)[0].doc.events, `event ${emitted[0].id}`).toEqual([{ from_batch: batch }]);
    expectLeaseExpiredThenOk(s, batch);
  },
};
