// An unverified request gets 401 with an empty body and one log line with source, remote address
// and size; nothing else. A spread of wrong, missing, malformed and misplaced
// credentials over every template scheme and a code source.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

const S = {
  gh: `gh-${SECRET_SENTINEL}`,
  sw: `whsec_${Buffer.from(`sw-${SECRET_SENTINEL}`).toString("base64")}`,
  ts: `ts-${SECRET_SENTINEL}`,
  tok: `tok-${SECRET_SENTINEL}`,
  push: `push-${SECRET_SENTINEL}`,
  zoom: `zoom-${SECRET_SENTINEL}`,
};
const hex = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest("hex");

let t: TestIntake;

beforeAll(async () => {
  t = await startIntake(
    `[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", prefix = "sha256=", key = "k" }
secrets.secret = { file = "{{secret:gh}}" }
action = "hermes:x"

[sources.sw]
template = { scheme = "standard-webhooks", key = "k" }
secrets.secret = { file = "{{secret:sw}}" }
action = "hermes:x"

[sources.ts]
template = { scheme = "timestamped", header = "X-Signature", key = "k" }
secrets.secret = { file = "{{secret:ts}}" }
action = "hermes:x"

[sources.tok]
template = { scheme = "static-token", header = "Authorization", prefix = "Bearer ", key = "k" }
secrets.secret = { file = "{{secret:tok}}" }
action = "hermes:x"

[sources.push]
template = { scheme = "static-token", param = "token", key = "k" }
secrets.secret = { file = "{{secret:push}}" }
action = "hermes:x"

[sources.meetings]
module = "${join(import.meta.dir, "..", "fixtures", "zoomish.ts")}"
secrets.webhook_secret = { file = "{{secret:zoom}}" }
`,
    { secrets: S },
  );
});
afterAll(async () => {
  await t.stop();
});

interface Case {
  name: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** The class the 401 line names (a code source that answers plain false says "rejected"). */
  why?: string;
}

test("every unverified request: 401, an empty body, no hint in the headers, one log line, nothing stored", async () => {
  const body = JSON.stringify({ k: "key", note: PAYLOAD_SENTINEL });
  const now = Math.floor(t.clock.now());
  const ghSig = `sha256=${hex(S.gh, body)}`;
  const swKey = Buffer.from(S.sw.slice(6), "base64");
  const swSig = (id: string, ts: number, b = body) =>
    `v1,${createHmac("sha256", swKey).update(`${id}.${ts}.${b}`).digest("base64")}`;
  const cases: Case[] = [
    { name: "gh: no signature", path: "/hooks/gh", why: "missing_signature" },
    { name: "gh: empty signature", path: "/hooks/gh", headers: { "X-Hub-Signature-256": "" }, why: "malformed" },
    {
      name: "gh: the secret itself as the signature",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": S.gh },
      why: "malformed",
    },
    {
      name: "gh: right hex, wrong prefix",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": ghSig.replace("sha256=", "sha1=") },
      why: "malformed",
    },
    {
      name: "gh: right hex, no prefix",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": ghSig.slice(7) },
      why: "malformed",
    },
    {
      name: "gh: one hex digit off",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": ghSig.slice(0, -1) + (ghSig.endsWith("0") ? "1" : "0") },
      why: "mismatch",
    },
    {
      name: "gh: truncated",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": ghSig.slice(0, 20) },
      why: "malformed",
    },
    {
      name: "gh: not hex",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": `sha256=${"zz".repeat(32)}` },
      why: "malformed",
    },
    {
      name: "gh: 8 KB of signature",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": `sha256=${"ab".repeat(4096)}` },
      why: "mismatch",
    },
    {
      name: "gh: signature of another body",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": `sha256=${hex(S.gh, "{}")}` },
      why: "mismatch",
    },
    {
      name: "gh: an empty body",
      path: "/hooks/gh",
      headers: { "X-Hub-Signature-256": ghSig },
      body: "",
      why: "mismatch",
    },
    { name: "sw: no headers", path: "/hooks/sw", why: "missing_signature" },
    {
      name: "sw: no id",
      path: "/hooks/sw",
      headers: { "webhook-timestamp": String(now), "webhook-signature": swSig("", now) },
      why: "missing_signature",
    },
    {
      name: "sw: another id than signed",
      path: "/hooks/sw",
      headers: { "webhook-id": "msg_b", "webhook-timestamp": String(now), "webhook-signature": swSig("msg_a", now) },
      why: "mismatch",
    },
    {
      name: "sw: stale",
      path: "/hooks/sw",
      headers: {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(now - 400),
        "webhook-signature": swSig("msg_1", now - 400),
      },
      why: "stale",
    },
    {
      name: "sw: v2 only",
      path: "/hooks/sw",
      headers: {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(now),
        "webhook-signature": swSig("msg_1", now).replace("v1,", "v2,"),
      },
      why: "malformed",
    },
    {
      name: "ts: no t",
      path: "/hooks/ts",
      headers: { "X-Signature": `v1=${hex(S.ts, `${now}.${body}`)}` },
      why: "malformed",
    },
    {
      name: "ts: two t",
      path: "/hooks/ts",
      headers: { "X-Signature": `t=${now},t=${now},v1=${hex(S.ts, `${now}.${body}`)}` },
      why: "malformed",
    },
    {
      name: "ts: future",
      path: "/hooks/ts",
      headers: { "X-Signature": `t=${now + 400},v1=${hex(S.ts, `${now + 400}.${body}`)}` },
      why: "future",
    },
    { name: "tok: missing", path: "/hooks/tok", why: "missing_signature" },
    { name: "tok: wrong", path: "/hooks/tok", headers: { Authorization: `Bearer ${S.tok}x` }, why: "mismatch" },
    { name: "tok: no Bearer", path: "/hooks/tok", headers: { Authorization: S.tok }, why: "malformed" },
    {
      name: "tok: in the query instead",
      path: `/hooks/tok?token=${encodeURIComponent(S.tok)}`,
      why: "missing_signature",
    },
    { name: "push: missing", path: "/hooks/push", why: "missing_signature" },
    { name: "push: wrong", path: `/hooks/push?token=${encodeURIComponent(`${S.push}-wrong`)}`, why: "mismatch" },
    {
      name: "push: in a header instead",
      path: "/hooks/push",
      headers: { token: S.push, Authorization: `Bearer ${S.push}` },
      why: "missing_signature",
    },
    {
      name: "push: another parameter name",
      path: `/hooks/push?tok=${encodeURIComponent(S.push)}`,
      why: "missing_signature",
    },
    {
      name: "push: the token twice, the wrong one first",
      path: `/hooks/push?token=nope&token=${encodeURIComponent(S.push)}`,
      why: "mismatch",
    },
    { name: "meetings: unsigned", path: "/hooks/meetings", why: "rejected" },
    {
      name: "meetings: signed for another secret",
      path: "/hooks/meetings",
      headers: { "x-zm-request-timestamp": String(now), "x-zm-signature": `v0=${hex("other", `v0:${now}:${body}`)}` },
      why: "rejected",
    },
  ];
  const events = t.count("events");
  for (const c of cases) {
    const lines = LOG_LINES.length;
    const res = await t.post(c.path, c.body ?? body, { "Content-Type": "application/json", ...(c.headers ?? {}) });
    expect([c.name, res.status, await res.text()]).toEqual([c.name, 401, ""]);
    expect([c.name, res.headers.get("content-type"), res.headers.get("www-authenticate")]).toEqual([
      c.name,
      null,
      null,
    ]);
    const fresh = LOG_LINES.slice(lines);
    const source = c.path.split("/")[2].split("?")[0];
    expect([c.name, fresh.length]).toEqual([c.name, 1]);
    // Exactly these fields: no header, no query string, no body, no secret; the reason is a class.
    expect([c.name, fresh[0]]).toEqual([
      c.name,
      expect.stringMatching(
        new RegExp(
          `^\\S+ warn +intake: unverified source=${source} bytes=\\d+ reason=${c.why} remote=127\\.0\\.0\\.1$`,
        ),
      ),
    ]);
  }
  expect(t.count("events")).toBe(events);
});

test("the same bodies, correctly signed, are accepted (the cases above fail for the reason they name)", async () => {
  const body = JSON.stringify({ k: "key", note: PAYLOAD_SENTINEL });
  const now = Math.floor(t.clock.now());
  const swKey = Buffer.from(S.sw.slice(6), "base64");
  const ok: Case[] = [
    { name: "gh", path: "/hooks/gh", headers: { "X-Hub-Signature-256": `sha256=${hex(S.gh, body)}` } },
    {
      name: "sw",
      path: "/hooks/sw",
      headers: {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(now),
        "webhook-signature": `v1,${createHmac("sha256", swKey).update(`msg_1.${now}.${body}`).digest("base64")}`,
      },
    },
    { name: "ts", path: "/hooks/ts", headers: { "X-Signature": `t=${now},v1=${hex(S.ts, `${now}.${body}`)}` } },
    { name: "tok", path: "/hooks/tok", headers: { Authorization: `Bearer ${S.tok}` } },
    { name: "push", path: `/hooks/push?token=${encodeURIComponent(S.push)}` },
    {
      name: "meetings",
      path: "/hooks/meetings",
      headers: { "x-zm-request-timestamp": String(now), "x-zm-signature": `v0=${hex(S.zoom, `v0:${now}:${body}`)}` },
    },
  ];
  for (const c of ok) {
    const res = await t.post(c.path, body, { "Content-Type": "application/json", ...(c.headers ?? {}) });
    // meetings has no payload.object.id: verified, then quarantined; the rest are queued.
    expect([c.name, res.status]).toEqual([c.name, 202]);
  }
});
