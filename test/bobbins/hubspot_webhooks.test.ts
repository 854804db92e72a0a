// hubspot.webhooks: a HubSpot app's webhooks (X-HubSpot-Signature-v3, the base64 HMAC-SHA256 under
// the client secret of the method, the public URL with its query, the body and the millisecond
// X-HubSpot-Request-Timestamp), through a real `hookspool run`, and against an intake for what is
// HubSpot's own: each element of the posted array its own event (key portalId:objectId, type
// subscriptionType, dedup eventId), a retry answered as a duplicate, a timestamp more than five
// minutes off refused. @hubspot/api-client, HubSpot's own Node SDK, signs every request this file
// makes (Signature.getSignature v3), gives the captures' signatures, and its Signature.isValid
// accepts them at the kit's time and refuses the rejected one.
//
// The catalogue's runner finds a capture's event by its payload, which a split request does not
// keep whole (each event's payload is its element), so this file makes the same proof itself on
// the shared run: every capture sent over loopback, each queued element delivered.
import { Signature } from "@hubspot/api-client";
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from "bun:test";
import { type Capture, capturesOf } from "../../src/bobbin/captures.ts";
import { signedUrl } from "../../src/plugin/template-verify.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, expectAnswers, expectAsCaptured, KIT_DESTINATION, kitOf, sharedRun } from "./catalogue.ts";

const bobbin = builtin("hubspot.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const PUBLIC_URL = String(kit.instance.settings.public_url);
const captures = capturesOf(bobbin.files());
const captured = (file: string): Capture => {
  const c = captures.find((x) => x.file === file);
  if (!c) throw new Error(`no ${file}`);
  return c;
};
const textOf = (c: Capture) => new TextDecoder().decode(c.request.body);
const headersOf = (c: Capture) =>
  Object.fromEntries(c.request.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())));
const headerOf = (c: Capture, name: string) => {
  const h = c.request.headers.find(([k]) => k.toLowerCase() === name.toLowerCase());
  if (!h) throw new Error(`${c.file} has no ${name}`);
  return h[1];
};
/** The URL the bobbin's template signs for a request to `target`: public_url, then the query as received. */
const urlFor = (target: string) => {
  const q = target.indexOf("?");
  return signedUrl({ scheme: "hmac", public_url: PUBLIC_URL }, { rawQuery: q < 0 ? "" : target.slice(q + 1) });
};
type Element = { eventId: number; portalId: number; objectId: number; subscriptionType: string };
const elementsOf = (c: Capture) => JSON.parse(textOf(c)) as Element[];
/**
 * @hubspot/api-client's Signature.getSignature v3. Its options type asks for the signature too
 * (isValid shares it), which signing does not read.
 */
const v3 = (secret: string, method: string, url: string, body: string, ts: string) =>
  Signature.getSignature(method, "v3", {
    signature: "",
    clientSecret: secret,
    requestBody: body,
    url,
    timestamp: Number(ts),
  });
/**
 * @hubspot/api-client's Signature.isValid v3 for a POST, with Date.now set to `atMs`: it throws on
 * a timestamp more than 300000 ms older than that, and only then reads the time.
 */
function isValidAt(atMs: number, o: { signature: string; url: string; body: string; ts: string }): boolean {
  setSystemTime(new Date(atMs));
  try {
    return Signature.isValid({
      signatureVersion: "v3",
      method: "POST",
      signature: o.signature,
      clientSecret: SECRET,
      requestBody: o.body,
      url: o.url,
      timestamp: Number(o.ts),
    });
  } finally {
    setSystemTime();
  }
}
const signed = (body: string, o: { ts?: number; url?: string; secret?: string } = {}) => {
  const ts = String(o.ts ?? NOW * 1000);
  return {
    "Content-Type": "application/json",
    "X-HubSpot-Request-Timestamp": ts,
    "X-HubSpot-Signature-v3": v3(o.secret ?? SECRET, "POST", o.url ?? PUBLIC_URL, body, ts),
  };
};

test(
  "every capture gets what it says; each element of a queued post is its own event, delivered " + "under its record",
  async () => {
    const run = await sharedRun(bobbin);
    const results = await run.results(bobbin);
    expectAsCaptured(results);
    expectAnswers(results, {
      "captures/accepted.http": 202,
      "captures/batch.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
    });
    const queued = ["captures/accepted.http", "captures/batch.http"].flatMap((f) => elementsOf(captured(f)));
    const row = (e: Element) => run.events(bobbin).find((r) => r.dedup_id === String(e.eventId));
    await waitFor(`${queued.length} events delivered`, () => queued.every((e) => row(e)?.state === "delivered"));
    for (const e of queued)
      expect({ id: e.eventId, key: row(e)?.key, type: row(e)?.event_type }).toEqual({
        id: e.eventId,
        key: `${e.portalId}:${e.objectId}`,
        type: e.subscriptionType,
      });
    const got = await run.deliveries<{ key: string; events: Element[] }>(bobbin);
    const delivered = got.accepted.flatMap((d) => d.doc.events.map((e) => e.eventId));
    expect(delivered.sort()).toEqual(queued.map((e) => e.eventId).sort());
    expect(got.unverified).toEqual([]);
    expect(await run.stderr()).not.toContain(SECRET);
  },
);

test("the target URL the signature covers is a setting each instance must give", () => {
  expect(bobbin.manifest.settings.public_url).toMatchObject({ type: "string", required: true });
});

describe("@hubspot/api-client", () => {
  const signedCaptures = ["captures/accepted.http", "captures/batch.http"];
  const partsOf = (c: Capture) => ({
    signature: headerOf(c, "X-HubSpot-Signature-v3"),
    url: urlFor(c.request.url),
    body: textOf(c),
    ts: headerOf(c, "X-HubSpot-Request-Timestamp"),
  });

  test("getSignature v3 gives each signed capture's X-HubSpot-Signature-v3; isValid accepts it at kit.now", () => {
    for (const file of signedCaptures) {
      const c = captured(file);
      const p = partsOf(c);
      expect([file, p.url, p.ts]).toEqual([file, PUBLIC_URL, String(NOW * 1000)]);
      expect([file, v3(SECRET, c.request.method, p.url, p.body, p.ts)]).toEqual([file, p.signature]);
      expect([file, isValidAt(NOW * 1000, p)]).toEqual([file, true]);
    }
  });

  test("isValid refuses the rejected capture, and throws on a capture more than 300000 ms old", () => {
    const rejected = partsOf(captured("captures/rejected.http"));
    expect(isValidAt(NOW * 1000, rejected)).toBe(false);
    expect(
      isValidAt(NOW * 1000, { ...rejected, signature: v3(SECRET, "POST", rejected.url, rejected.body, rejected.ts) }),
    ).toBe(true);
    const accepted = partsOf(captured("captures/accepted.http"));
    expect(isValidAt(NOW * 1000 + 300_000, accepted)).toBe(true);
    expect(() => isValidAt(NOW * 1000 + 300_001, accepted)).toThrow("Timestamp is invalid");
  });
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await startIntake(
      `[bobbins.hubspot]
bobbin = "hubspot.webhooks"
secrets.secret = { file = "{{secret:hubspot}}" }
settings = { public_url = "${PUBLIC_URL}" }
outputs = { "*" = "kit" }

${KIT_DESTINATION}`,
      { secrets: { hubspot: SECRET }, clockAt: NOW },
    );
  });
  afterAll(async () => {
    await t.stop();
  });

  const rows = () =>
    t.db.db
      .query(
        "SELECT b.key, e.event_type, e.dedup_id FROM events e JOIN batches b ON b.id = e.batch_id " +
          "WHERE e.source = 'hubspot' ORDER BY e.id",
      )
      .all() as { key: string; event_type: string; dedup_id: string }[];

  test("a delivery's elements are queued one by one under their record; HubSpot's retry is a duplicate", async () => {
    const c = captured("captures/batch.http");
    const first = await t.post("/hooks/hubspot", textOf(c), headersOf(c));
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows()).toEqual([
      { key: "21436587:65059681032", event_type: "contact.creation", dedup_id: "1957613830" },
      { key: "21436587:65059681032", event_type: "contact.propertyChange", dedup_id: "1957613831" },
    ]);
    // A retry is signed anew, a minute later, with the same eventIds and a higher attemptNumber.
    const retry = textOf(c).replaceAll('"attemptNumber":0', '"attemptNumber":1');
    const again = await t.post("/hooks/hubspot", retry, signed(retry, { ts: NOW * 1000 + 60_000 }));
    expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
    expect(rows()).toHaveLength(2);
  });

  test("a delivery @hubspot/api-client signs, and its isValid accepts, is queued under its record", async () => {
    const deal = (eventId: number) =>
      JSON.stringify([
        {
          eventId,
          subscriptionId: 2417602,
          portalId: 21436587,
          appId: 4150931,
          occurredAt: NOW * 1000 - 1_500,
          subscriptionType: "deal.propertyChange",
          attemptNumber: 0,
          objectId: 18805547213,
          propertyName: "dealstage",
          propertyValue: "closedwon",
          changeSource: "CRM_UI",
        },
      ]);
    for (const [path, eventId] of [
      ["/hooks/hubspot", 1957614301],
      ["/hooks/hubspot?portal=eu1&app=crm", 1957614302],
    ] as const) {
      const body = deal(eventId);
      const headers = signed(body, { url: urlFor(path) });
      const parts = { signature: headers["X-HubSpot-Signature-v3"], url: urlFor(path), body, ts: String(NOW * 1000) };
      expect([path, isValidAt(NOW * 1000, parts)]).toEqual([path, true]);
      const res = await t.post(path, body, headers);
      expect([path, res.status, await res.text()]).toEqual([path, 202, '{"status":"queued"}']);
      expect(rows().filter((r) => r.dedup_id === String(eventId))).toEqual([
        { key: "21436587:18805547213", event_type: "deal.propertyChange", dedup_id: String(eventId) },
      ]);
    }
  });

  test("isValid and the intake find a timestamp stale from the same ms; one ahead, only the intake", async () => {
    const sdkSays = (body: string, ts: number) => {
      const parts = {
        signature: v3(SECRET, "POST", PUBLIC_URL, body, String(ts)),
        url: PUBLIC_URL,
        body,
        ts: String(ts),
      };
      try {
        return isValidAt(NOW * 1000, parts) ? "valid" : "invalid";
      } catch {
        return "throws";
      }
    };
    for (const [eventId, ts, sdk, status] of [
      [1957614401, NOW * 1000 - 300_000, "valid", 202],
      [1957614402, NOW * 1000 - 300_001, "throws", 401],
      [1957614403, NOW * 1000 + 300_001, "valid", 401],
    ] as const) {
      const body = JSON.stringify([
        { eventId, portalId: 21436587, objectId: 9401, subscriptionType: "ticket.creation" },
      ]);
      const res = await t.post("/hooks/hubspot", body, signed(body, { ts }));
      expect([ts, sdkSays(body, ts), res.status]).toEqual([ts, sdk, status]);
    }
  });

  test("HubSpot signs a query's listed escapes decoded, the template as received: README's limit", async () => {
    const body = JSON.stringify([
      { eventId: 1957614501, portalId: 21436587, objectId: 9501, subscriptionType: "company.propertyChange" },
    ]);
    const path = "/hooks/hubspot?next=crm%3Adeals";
    // HubSpot's validation page: %3A (and 11 other escapes) in the URI are decoded before signing.
    const asHubSpot = await t.post(path, body, signed(body, { url: `${PUBLIC_URL}?next=crm:deals` }));
    expect([asHubSpot.status, await asHubSpot.text()]).toEqual([401, ""]);
    const asReceived = await t.post(path, body, signed(body, { url: urlFor(path) }));
    expect([asReceived.status, await asReceived.text()]).toEqual([202, '{"status":"queued"}']);
  });

  test("a timestamp more than five minutes off, in milliseconds, is refused; within them it is not", async () => {
    const body = JSON.stringify([
      { eventId: 1957614001, portalId: 21436587, objectId: 9001, subscriptionType: "contact.deletion" },
    ]);
    for (const ts of [NOW * 1000 - 301_000, NOW * 1000 + 301_000]) {
      const res = await t.post("/hooks/hubspot", body, signed(body, { ts }));
      expect([ts, res.status, await res.text()]).toEqual([ts, 401, ""]);
    }
    const ok = await t.post("/hooks/hubspot", body, signed(body, { ts: NOW * 1000 - 299_000 }));
    expect(ok.status).toBe(202);
  });

  test("the signature covers the method, the URL with its query as received, the body and the timestamp", async () => {
    const body = JSON.stringify([
      { eventId: 1957614101, portalId: 21436587, objectId: 9101, subscriptionType: "company.creation" },
    ]);
    const withQuery = await t.post("/hooks/hubspot?app=crm", body, signed(body, { url: `${PUBLIC_URL}?app=crm` }));
    expect(withQuery.status).toBe(202);
    const h = signed(body);
    for (const [path, headers] of [
      ["/hooks/hubspot?app=crm", h],
      ["/hooks/hubspot", signed(body, { url: `${PUBLIC_URL}/` })],
      ["/hooks/hubspot", { ...h, "X-HubSpot-Request-Timestamp": String(NOW * 1000 + 1) }],
      ["/hooks/hubspot", signed(body, { secret: "kit-test-other-client-secret-hubspot" })],
      ["/hooks/hubspot", { ...h, "X-HubSpot-Signature-v3": v3(SECRET, "PUT", PUBLIC_URL, body, String(NOW * 1000)) }],
    ] as const) {
      const res = await t.post(path, body, headers);
      expect([path, res.status, await res.text()]).toEqual([path, 401, ""]);
    }
  });

  test("an element without an objectId quarantines the post whole", async () => {
    const body = JSON.stringify([
      { eventId: 1957614201, portalId: 21436587, objectId: 9201, subscriptionType: "deal.creation" },
      { eventId: 1957614202, portalId: 21436587, subscriptionType: "app.install" },
    ]);
    const res = await t.post("/hooks/hubspot", body, signed(body));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    expect(rows().filter((r) => r.dedup_id === "1957614201")).toEqual([]);
  });
});
