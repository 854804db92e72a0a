// The source kit on every template scheme and on a code source. SQLite only, by design and not
// by omission: the kit (src/check/kit/, `hookspool bobbin check`'s) replays into a throwaway
// SQLite home of its own (src/store/kit.ts: hermetic, one process, one file) and takes no store,
// so there is no PostgreSQL half to run without changing src/.
import { createHash, createHmac, randomUUID } from "node:crypto";
import { expect } from "bun:test";
import { join } from "node:path";
import { PAYLOAD_SENTINEL, runSourceKit, SECRET_SENTINEL } from "./source.case.ts";

// Signatures here are made with node:crypto directly, independently of src/plugin/verify.ts.
const mac = (alg: string, key: string | Buffer, data: Uint8Array | string, enc: "hex" | "base64") =>
  createHmac(alg, key).update(data).digest(enc);
const id = (body: Uint8Array) => createHash("sha256").update(body).digest("hex").slice(0, 32);
const payload = (extra: Record<string, unknown> = {}) => ({ note: PAYLOAD_SENTINEL, n: randomUUID(), ...extra });

const GH = `gh-${SECRET_SENTINEL}-key`;
runSourceKit({
  title: "template hmac-sha256-hex (GitHub-shaped)",
  source: "gh",
  authHeaders: ["X-Hub-Signature-256"],
  config: `[sources.gh]
${
  'template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", ' +
  'prefix = "sha256=", key = ["repository.full_name", "header:X-GitHub-Event"], ' +
  'dedup = "header:X-GitHub-Delivery", event_type = "header:X-GitHub-Event", ' +
  'ignore = "ping" }'
}
secrets.secret = { file = "{{secret:gh}}" }
keep_headers = ["X-GitHub-Event", "X-GitHub-Delivery"]
action = "hermes:gh"
`,
  secrets: { gh: `${GH}\n` },
  payload: () => payload({ repository: { full_name: "o/r" } }),
  sign: (body) => ({
    headers: {
      "X-Hub-Signature-256": `sha256=${mac("sha256", GH, body, "hex")}`,
      "X-GitHub-Event": "push",
      "X-GitHub-Delivery": id(body),
    },
  }),
  dedup: true,
  broken: () => payload({ no_repository: true }),
  stored(row) {
    expect(row.key).toBe("o/r:push");
    expect(row.event_type).toBe("push");
    expect(Object.keys(JSON.parse(row.headers)).sort()).toEqual(["X-GitHub-Delivery", "X-GitHub-Event"]);
    expect(row.dedup_id).toMatch(/^[0-9a-f]{32}$/);
  },
});

const TRELLO = `trello-${SECRET_SENTINEL}`;
const CALLBACK = "https://hooks.example.com/trello";
runSourceKit({
  title: "template hmac-sha1-base64-url with a HEAD handshake (Trello-shaped)",
  source: "trello",
  authHeaders: ["X-Trello-Webhook"],
  config: `[sources.trello]
${
  'template = { scheme = "hmac-sha1-base64-url", header = "X-Trello-Webhook", ' +
  'callback_url = "' +
  CALLBACK +
  '", head_handshake = true, key = "model.id", ' +
  'dedup = "action.id", event_type = "action.type" }'
}
secrets.secret = { file = "{{secret:trello}}" }
action = "hermes:trello"
`,
  secrets: { trello: TRELLO },
  payload: () => payload({ model: { id: "board1" }, action: { id: randomUUID(), type: "updateCard" } }),
  sign: (body) => ({
    headers: {
      "X-Trello-Webhook": mac("sha1", TRELLO, Buffer.concat([Buffer.from(body), Buffer.from(CALLBACK)]), "base64"),
    },
  }),
  dedup: true,
  broken: () => payload({ action: { id: randomUUID() } }),
  headHandshake: true,
  stored: (row) => expect([row.key, row.event_type]).toEqual(["board1", "updateCard"]),
});

const SW = `whsec_${Buffer.from(`standard-${SECRET_SENTINEL}`).toString("base64")}`;
runSourceKit({
  title: "template standard-webhooks",
  source: "sw",
  authHeaders: ["webhook-signature"],
  config: `[sources.sw]
template = { scheme = "standard-webhooks", key = "type", dedup = "header:webhook-id", event_type = "type" }
secrets.secret = { file = "{{secret:sw}}" }
action = "hermes:sw"
`,
  secrets: { sw: SW },
  payload: () => payload({ type: "invoice.paid" }),
  sign(body, now) {
    const msgId = `msg_${id(body)}`;
    const ts = String(Math.floor(now));
    const key = Buffer.from(SW.slice(6), "base64");
    return {
      headers: {
        "webhook-id": msgId,
        "webhook-timestamp": ts,
        "webhook-signature": `v1,${mac("sha256", key, `${msgId}.${ts}.${Buffer.from(body)}`, "base64")}`,
      },
    };
  },
  timestamped: true,
  dedup: true,
  broken: () => payload({ notype: 1 }),
});

// A Svix sender without white-labelling (Resend, Clerk) sends the same scheme under svix-* names.
const SVIX = `whsec_${Buffer.from(`svix-${SECRET_SENTINEL}`).toString("base64")}`;
runSourceKit({
  title: "template standard-webhooks with Svix's header names",
  source: "svix",
  authHeaders: ["svix-signature"],
  config: `[sources.svix]
template = { scheme = "standard-webhooks", key = "type", event_type = "type" }
secrets.secret = { file = "{{secret:svix}}" }
action = "hermes:svix"
`,
  secrets: { svix: SVIX },
  payload: () => payload({ type: "email.delivered" }),
  sign(body, now) {
    const msgId = `msg_${id(body)}`;
    const ts = String(Math.floor(now));
    const key = Buffer.from(SVIX.slice(6), "base64");
    return {
      headers: {
        "svix-id": msgId,
        "svix-timestamp": ts,
        "svix-signature": `v1,${mac("sha256", key, `${msgId}.${ts}.${Buffer.from(body)}`, "base64")}`,
      },
    };
  },
  timestamped: true,
  // With dedup unset the source dedups on the message id: svix-id here.
  dedup: true,
  broken: () => payload({ notype: 1 }),
});

const STRIPE = `stripe-${SECRET_SENTINEL}`;
runSourceKit({
  title: "template timestamped (t=,v1=)",
  source: "ts",
  authHeaders: ["X-Signature"],
  config: `[sources.ts]
template = { scheme = "timestamped", header = "X-Signature", key = "object.id", event_type = "type" }
secrets.secret = { file = "{{secret:ts}}" }
action = "hermes:ts"
`,
  secrets: { ts: STRIPE },
  payload: () => payload({ type: "charge.succeeded", object: { id: "ch_1" } }),
  sign(body, now) {
    const t = Math.floor(now);
    return { headers: { "X-Signature": `t=${t},v1=${mac("sha256", STRIPE, `${t}.${Buffer.from(body)}`, "hex")}` } };
  },
  timestamped: true,
  broken: () => payload({ type: "x" }),
});

const TOKEN = `token-${SECRET_SENTINEL}`;
runSourceKit({
  title: "template static-token in a header",
  source: "tok",
  authHeaders: ["Authorization"],
  config: `[sources.tok]
template = { scheme = "static-token", header = "Authorization", prefix = "Bearer ", key = "project" }
secrets.secret = { file = "{{secret:tok}}" }
action = "hermes:tok"
`,
  secrets: { tok: TOKEN },
  payload: () => payload({ project: "p1" }),
  sign: () => ({ headers: { Authorization: `Bearer ${TOKEN}` } }),
  bodySigned: false,
  broken: () => payload({}),
});

runSourceKit({
  title: "template static-token in the query string (Pub/Sub push)",
  source: "push",
  authHeaders: [],
  config: `[sources.push]
template = { scheme = "static-token", param = "token", key = "subscription", dedup = "message.messageId" }
secrets.secret = { file = "{{secret:push}}" }
action = "script:mail"

[destinations."script:mail"]
argv = ["/bin/true"]
`,
  secrets: { push: TOKEN },
  payload: () => payload({ subscription: "projects/p/subscriptions/s", message: { messageId: randomUUID() } }),
  sign: () => ({ headers: {}, query: `token=${encodeURIComponent(TOKEN)}` }),
  bodySigned: false,
  dedup: true,
  broken: () => payload({ message: {} }),
});

const SHOP = `shop-${SECRET_SENTINEL}`;
runSourceKit({
  title: "template hmac-sha256-base64",
  source: "shop",
  authHeaders: ["X-Shop-Hmac-Sha256"],
  config: `[sources.shop]
template = { scheme = "hmac-sha256-base64", header = "X-Shop-Hmac-Sha256", key = "shop" }
secrets.secret = { file = "{{secret:shop}}" }
action = "hermes:shop"
`,
  secrets: { shop: SHOP },
  payload: () => payload({ shop: "s1" }),
  sign: (body) => ({ headers: { "X-Shop-Hmac-Sha256": mac("sha256", SHOP, body, "base64") } }),
  broken: () => payload({}),
});

const ZOOM = `zoom-${SECRET_SENTINEL}`;
runSourceKit({
  title: "code source with a handshake answered after verify (Zoom-shaped)",
  source: "meetings",
  authHeaders: ["x-zm-signature"],
  config: `[sources.meetings]
module = "${join(import.meta.dir, "..", "fixtures", "zoomish.ts")}"
secrets.webhook_secret = { file = "{{secret:zoom}}" }
`,
  secrets: { zoom: ZOOM },
  payload: () =>
    payload({ event: "meeting.started", event_ts: Date.now() + Math.random(), payload: { object: { id: "m1" } } }),
  sign(body, now) {
    const ts = String(Math.floor(now));
    return {
      headers: {
        "x-zm-request-timestamp": ts,
        "x-zm-signature": `v0=${mac("sha256", ZOOM, `v0:${ts}:${Buffer.from(body)}`, "hex")}`,
      },
    };
  },
  timestamped: true,
  dedup: true,
  broken: () => payload({ event: "meeting.started", payload: {} }),
  handshake: {
    payload: () => ({ event: "endpoint.url_validation", payload: { plainToken: "plain-123" } }),
    check(r) {
      const want = JSON.stringify({ plainToken: "plain-123", encryptedToken: mac("sha256", ZOOM, "plain-123", "hex") });
      return r.status === 200 && r.text === want ? null : `answered ${r.status} ${r.text.slice(0, 80)}`;
    },
  },
  stored: (row) => expect([row.key, row.event_type]).toEqual(["m1", "meeting.started"]),
});
