// Resending delivered work (replay --delivered): the batch goes out once more with its content
// unchanged, under a new delivery id, and both deliveries stay in the audit trail. The
// dispatcher's case runs on both backends; the CLI's is over a SQLite home.
import { expect, setDefaultTimeout, test } from "bun:test";
import { deliveryId } from "../../src/delivery.ts";
import { batchIdOf, fakeDestination, rigOn } from "../helpers/dispatch.ts";
import { onBothWorlds } from "../helpers/world.ts";
import { enqueueJson, initHome, inHome, withDb } from "../cli/home.ts";

setDefaultTimeout(30_000);

onBothWorlds((open) => {
  test(
    "a delivered batch resent is delivered again under id _r1," + " then _r2; the first deliveries stay recorded",
    async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, `[sources.s]\naction = "hermes:a"\n`, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      expect((await r.batch(id)).state).toBe("delivered");
      const first = a.calls[0];
      for (const n of [1, 2]) {
        await r.world.operator.resendDelivered(id, r.clock.now());
        expect(await r.batch(id)).toMatchObject({ state: "retry", delivered_at: null, attempts: 0 });
        await r.step();
        expect((await r.batch(id)).state).toBe("delivered");
        const call = a.calls[n];
        expect(call.deliveryId).toBe(`${first.deliveryId}_r${n}`);
        // The same content each time.
        expect(call.body).toBe(
          first.body.replace(first.deliveryId, call.deliveryId).replace(/"attempt":\d+/, `"attempt":${call.attempt}`),
        );
      }
      expect((await r.attempts(id)).map((x) => [x.outcome, x.delivery_id])).toEqual([
        ["ok", first.deliveryId],
        ["ok", `${first.deliveryId}_r1`],
        ["ok", `${first.deliveryId}_r2`],
      ]);
    },
  );
});

test("per-event ids (unwrap) move on with the resend too; per-attempt ids are new anyway", () => {
  expect(deliveryId("per-event", "abc", 7, 0, 41)).toBe("hs_abc_7_41");
  expect(deliveryId("per-event", "abc", 7, 0, 41, 1)).toBe("hs_abc_7_41_r1");
  expect(deliveryId("per-batch", "abc", 7, 9, undefined, 2)).toBe("hs_abc_7_r2");
  expect(deliveryId("per-attempt", "abc", 7, 9, undefined, 2)).toBe("hs_abc_7_9");
});

test(
  "replay --delivered: by id or by filter; what is not delivered" + " is refused; a bare --delivered is a usage error",
  async () => {
    const h = await initHome();
    const id = await enqueueJson(h, "once", "k", { n: 1 });
    withDb(h.db, (db) =>
      db.run("UPDATE batches SET state = 'delivered', delivered_at = last_at, result = 'ok' WHERE id = ?", [id]),
    );
    const open = await enqueueJson(h, "demo", "k2", { n: 2 });
    const r = await inHome(h, ["replay", "--delivered", String(id)]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`batch ${id}: delivered -> retry, due now`);
    expect(r.out).toContain("new delivery id");
    expect(withDb(h.db, (db) => db.query("SELECT state FROM batches WHERE id = ?").get(id))).toEqual({
      state: "retry",
    });
    const notDelivered = await inHome(h, ["replay", "--delivered", String(open)]);
    expect(notDelivered.code).toBe(1);
    expect(notDelivered.err).toContain("replay --delivered applies to delivered batches");
    expect((await inHome(h, ["replay", "--delivered"])).code).toBe(2);
    expect((await inHome(h, ["replay", "--delivered", "--dead"])).code).toBe(2);
    withDb(h.db, (db) => db.run("UPDATE batches SET state = 'delivered', delivered_at = last_at WHERE id = ?", [id]));
    const bulk = await inHome(h, ["--json", "replay", "--delivered", "--since", "1h"]);
    expect(JSON.parse(bulk.out)).toEqual({ resent: [id] });
  },
);
