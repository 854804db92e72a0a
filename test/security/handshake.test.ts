// A handshake whose answer derives from the secret is answered only after verify: for a
// Zoom-style endpoint.url_validation, encryptedToken = HMAC(secret, plainToken) with the
// plainToken chosen by the sender, so an unauthenticated answer would be a signing oracle for
// forged events. Every badly signed validation is 401, empty, and carries no token anywhere.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";

const SECRET = `zoom-${SECRET_SENTINEL}`;
const mac = (key: string, data: string) => createHmac("sha256", key).update(data).digest("hex");

let t: TestIntake;

beforeAll(async () => {
  t = await startIntake(
    `[sources.meetings]
module = "${join(import.meta.dir, "..", "fixtures", "zoomish.ts")}"
secrets.webhook_secret = { file = "{{secret:zoom}}" }
`,
    { secrets: { zoom: SECRET } },
  );
});
afterAll(async () => {
  await t.stop();
});

const validation = (plainToken: string) =>
  JSON.stringify({ event: "endpoint.url_validation", payload: { plainToken } });
const zoomHeaders = (body: string, ts: number, key = SECRET) => ({
  "Content-Type": "application/json",
  "x-zm-request-timestamp": String(ts),
  "x-zm-signature": `v0=${mac(key, `v0:${ts}:${body}`)}`,
});

test("a correctly signed validation is answered (the control)", async () => {
  const body = validation("plain-ok");
  const res = await t.post("/hooks/meetings", body, zoomHeaders(body, t.clock.now()));
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ plainToken: "plain-ok", encryptedToken: mac(SECRET, "plain-ok") });
});

test("every badly signed validation: 401, empty body, no token in body or headers, nothing stored", async () => {
  const now = Math.floor(t.clock.now());
  // The attacker's plainToken is the exact string Zoom signs for a forged event: an answer would
  // be a valid signature for that event.
  const forged = JSON.stringify({ event: "meeting.started", payload: { object: { id: "m-forged" } } });
  const oracle = `v0:${now}:${forged}`;
  const cases: { name: string; body: string; headers: Record<string, string> }[] = [];
  for (const plain of ["plain-1", oracle]) {
    const body = validation(plain);
    const good = zoomHeaders(body, now);
    cases.push(
      {
        name: "no signature",
        body,
        headers: { "Content-Type": "application/json", "x-zm-request-timestamp": String(now) },
      },
      {
        name: "no timestamp",
        body,
        headers: { "Content-Type": "application/json", "x-zm-signature": good["x-zm-signature"] },
      },
      { name: "another secret", body, headers: zoomHeaders(body, now, "some-other-secret") },
      { name: "signature of another body", body, headers: zoomHeaders(validation("plain-other"), now) },
      { name: "stale", body, headers: zoomHeaders(body, now - 301) },
      { name: "future-dated", body, headers: zoomHeaders(body, now + 301) },
      {
        name: "timestamp swapped after signing",
        body,
        headers: { ...good, "x-zm-request-timestamp": String(now - 1) },
      },
      { name: "garbage signature", body, headers: { ...good, "x-zm-signature": "v0=zzzz" } },
      {
        name: "signature without its prefix",
        body,
        headers: { ...good, "x-zm-signature": good["x-zm-signature"].slice(3) },
      },
      { name: "an empty signature", body, headers: { ...good, "x-zm-signature": "" } },
    );
  }
  const events = t.count("events");
  const issues = t.count("issues");
  for (const c of cases) {
    const res = await t.post("/hooks/meetings", c.body, c.headers);
    const text = await res.text();
    expect([c.name, res.status, text]).toEqual([c.name, 401, ""]);
    const plain = (JSON.parse(c.body) as { payload: { plainToken: string } }).payload.plainToken;
    const token = mac(SECRET, plain);
    for (const [name, value] of res.headers) {
      expect([c.name, name, value.includes(token) || value.includes(plain)]).toEqual([c.name, name, false]);
    }
  }
  expect(t.count("events")).toBe(events);
  expect(t.count("issues")).toBe(issues);
});

test("the handshake is not answered for other methods either", async () => {
  const body = validation("plain-get");
  for (const method of ["GET", "HEAD", "PUT"]) {
    const res = await fetch(`${t.url}/hooks/meetings`, {
      method,
      headers: zoomHeaders(body, t.clock.now()),
      body: method === "PUT" ? body : undefined,
    });
    expect(res.status).not.toBe(200);
    expect(await res.text()).not.toContain(mac(SECRET, "plain-get"));
  }
});
