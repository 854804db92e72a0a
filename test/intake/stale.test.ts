// Stale events end to end: a template source reads each request's version from a header (as
// Shopify's X-Shopify-Triggered-At), a real intake stores it as epoch seconds, and a dispatcher
// delivers to a route that skips stale events: an order's update that arrives after a newer
// one was delivered never reaches the receiver, yet stays in the spool, and /metrics counts it.
import { expect, test } from "bun:test";
import { fakeDestination, rig } from "../helpers/dispatch.ts";
import { startIntakeIn } from "../helpers/intake.ts";

const CONFIG = `[intake]\nlisten = "127.0.0.1:0"\n
[sources.shop]
template = { scheme = "static-token", header = "X-Token", key = "id", event_type = "header:X-Topic", \
  version = "header:X-Triggered-At" }
secrets.secret = { env = "SHOP_TOKEN" }
action = "http:d"
span = "immediate"

[[routes]]
name = "orders"
source = "shop"
stale = "skip"
`;

test("an older update that arrives late is left out, kept in the spool and counted", async () => {
  const r = rig(CONFIG, [fakeDestination("http:d")]);
  const t = await startIntakeIn(r.home, { clock: r.clock, env: { SHOP_TOKEN: "tok" } });
  try {
    const post = (status: string, at: string) =>
      t.post("/hooks/shop", JSON.stringify({ id: 1001, status }), {
        "X-Token": "tok",
        "X-Topic": "orders/updated",
        "X-Triggered-At": at,
      });
    expect((await post("paid", "2024-05-01T12:00:05.250Z")).status).toBe(202);
    await r.step();
    // The update Shopify sent first arrives last: older than what was delivered.
    expect((await post("pending", "2024-05-01T12:00:01Z")).status).toBe(202);
    r.clock.advance(1);
    await r.step();
    expect((await post("fulfilled", "2024-05-01T12:00:09Z")).status).toBe(202);
    r.clock.advance(1);
    await r.step();
    const bodies = r.dests["http:d"].calls.map((c) => JSON.parse(c.body) as { events: { status: string }[] });
    expect(bodies.map((b) => b.events.map((e) => e.status))).toEqual([["paid"], ["fulfilled"]]);
    const events = r.spool.db.query("SELECT batch_id, version, trace FROM events ORDER BY id").all() as {
      batch_id: number;
      version: number;
      trace: string;
    }[];
    expect(events.map((e) => e.version)).toEqual([1_714_564_805.25, 1_714_564_801, 1_714_564_809]);
    expect(events.map((e) => JSON.parse(e.trace).stale)).toEqual(["skip", "skip", "skip"]);
    expect(r.batch(events[1].batch_id)).toMatchObject({ state: "delivered", result: "stale" });
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/^hookspool_stale_events_total\{rule="skip"\} [1-9]/m);
  } finally {
    await t.stop();
    await r.d.stop();
  }
});
