// okta.events: Okta's event hooks (the hook's secret in Authorization, compared in constant
// time), through a real `hookspool run`: a delivery queued, the one-time verification GET
// answered {"verification": ...} before any verification and never stored, a wrong secret 401;
// and against an intake what is Okta's own: one event per element of data.events, each typed by
// its eventType and deduplicated by its uuid, in one batch per actor.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, expectAnswers, expectAsCaptured, kitIntake, kitOf, sharedRun } from "./catalogue.ts";

const bobbin = builtin("okta.events");
const SECRET = kitOf(bobbin).secrets.secret;
const accepted = capturesOf(bobbin.files()).find((c) => c.file === "captures/accepted.http");
if (!accepted) throw new Error("no accepted capture");
const BODY = new TextDecoder().decode(accepted.request.body);

// The catalogue's runner finds a capture's event by its payload, which a split request does not
// keep whole (each event's payload is its element), so this file makes the same proof itself on
// the shared run: every capture sent over loopback, each queued element delivered.
test("every capture gets what it says; each System Log event is queued and delivered under its actor", async () => {
  const run = await sharedRun(bobbin);
  const results = await run.results(bobbin);
  expectAsCaptured(results);
  expectAnswers(results, {
    "captures/accepted.http": 202,
    "captures/challenge.http": {
      method: "GET",
      status: 200,
      body: '{"verification":"Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg"}',
    },
    "captures/rejected.http": { status: 401, body: "" },
  });
  const events = (JSON.parse(BODY) as { data: { events: { uuid: string; eventType: string }[] } }).data.events;
  const row = (uuid: string) => run.events(bobbin).find((r) => r.dedup_id === uuid);
  await waitFor(`${events.length} events delivered`, () => events.every((e) => row(e.uuid)?.state === "delivered"));
  for (const e of events)
    expect({ key: row(e.uuid)?.key, type: row(e.uuid)?.event_type }).toEqual({
      key: "00u1a2b3c4DEFGHIJ5d7",
      type: e.eventType,
    });
  const got = await run.deliveries<{ events: { uuid: string }[] }>(bobbin);
  expect(got.accepted.flatMap((d) => d.doc.events.map((x) => x.uuid)).sort()).toEqual(events.map((e) => e.uuid).sort());
  expect(got.unverified).toEqual([]);
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("okta.events");
  });
  afterAll(() => t.stop());
  const headers = { "Content-Type": "application/json", Authorization: SECRET };
  const rows = () =>
    t.db.db
      .query("SELECT b.key, e.event_type, e.dedup_id FROM events e JOIN batches b ON b.id = e.batch_id ORDER BY e.id")
      .all() as { key: string; event_type: string; dedup_id: string }[];

  test("each System Log event is its own event, by uuid and eventType, in its actor's batch", async () => {
    const r = await t.post("/hooks/okta", BODY, headers);
    expect([r.status, await r.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows()).toEqual([
      {
        key: "00u1a2b3c4DEFGHIJ5d7",
        event_type: "user.session.start",
        dedup_id: "b9ed0d5e-50ad-11e9-a8ba-d5c0b8e1e0f9",
      },
      {
        key: "00u1a2b3c4DEFGHIJ5d7",
        event_type: "group.user_membership.add",
        dedup_id: "c41f7a2e-50ad-11e9-a8ba-d5c0b8e1e0f9",
      },
    ]);
    // Okta's retry of the same delivery: both events are duplicates, nothing new is stored.
    const again = await t.post("/hooks/okta", BODY, headers);
    expect(again.status).toBe(200);
    expect(rows()).toHaveLength(2);
  });

  test("the verification GET is answered before verify, even without the secret, and stores nothing", async () => {
    const r = await fetch(`${t.url}/hooks/okta`, { headers: { "X-Okta-Verification-Challenge": "abc_123-XYZ" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json");
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await r.text()).toBe('{"verification":"abc_123-XYZ"}');
    const plain = await fetch(`${t.url}/hooks/okta`);
    expect(plain.status).toBe(405);
    expect(rows()).toHaveLength(2);
  });
});
