// No secret in the database, and no secret, payload or query string in the logs, proven
// on a real `hookspool run` process after a realistic scenario: four sources whose secrets carry
// SECRET_SENTINEL (a file ref and an env ref among them), an http destination signing with one,
// a handshake, duplicates, ignores, unverified attempts that put the secret itself in headers and
// query strings, a quarantined request carrying the secret in its auth, Authorization, Cookie
// and Proxy-Authorization headers, a failed attempt and a retry. Then every column of every
// table (text and blob, and the database files' raw bytes) is scanned for the secret, and the
// process's stderr for both sentinels and for the query-string token.
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { createHmac, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const SECRETS = {
  gh: `gh-${SECRET_SENTINEL}-hmac`,
  push: `push-${SECRET_SENTINEL}-token`,
  tok: `tok-${SECRET_SENTINEL}-token`,
  zoom: `zoom-${SECRET_SENTINEL}-hmac`,
  out: `out-${SECRET_SENTINEL}-signing`,
};
const hmacHex = (key: string, data: string) => createHmac("sha256", key).update(data).digest("hex");

/** Every form a careless store could give a secret: as is, base64, hex, URL-encoded. */
function forms(): string[] {
  const out = new Set<string>([SECRET_SENTINEL, Buffer.from(SECRET_SENTINEL).toString("hex")]);
  for (const s of Object.values(SECRETS)) {
    out.add(Buffer.from(s).toString("base64"));
    out.add(Buffer.from(s).toString("base64url"));
    out.add(Buffer.from(s).toString("hex"));
    out.add(encodeURIComponent(s));
  }
  return [...out];
}

interface Received {
  headers: Record<string, string>;
  body: string;
}

test("after a realistic run no column of any table, no database byte and no log line holds a secret", async () => {
  let failNext = 1; // the first delivery fails, so attempt rows carry an error
  const received: Received[] = [];
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.text();
      if (failNext-- > 0) return new Response("upstream hiccup", { status: 503 });
      received.push({ headers: Object.fromEntries(req.headers.entries()), body });
      return new Response("ok");
    },
  });
  const home = tempDir();
  const file = (name: string, value: string) => {
    const p = join(home, `secret-${name}`);
    writeFileSync(p, value, { mode: 0o600 });
    return p;
  };
  writeFileSync(
    join(home, "config.toml"),
    `[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
heartbeat_s = 0.2
backoff_base_s = 0.1
backoff_cap_s = 0.2

[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", prefix = "sha256=", key = ` +
      `"repository.full_name", dedup = "header:X-GitHub-Delivery", event_type = "header:X-GitHub-Event", ` +
      `ignore = "ping" }
secrets.secret = { file = "${file("gh", SECRETS.gh)}" }
keep_headers = ["X-GitHub-Event", "X-GitHub-Delivery"]
quiet_s = 0
max_s = 0
action = "out"

[sources.push]
template = { scheme = "static-token", param = "token", key = "subscription", dedup = "message.messageId" }
secrets.secret = { env = "PUSH_TOKEN" }
quiet_s = 0
max_s = 0
action = "out"

[sources.tok]
template = { scheme = "static-token", header = "X-Token", key = "project" }
secrets.secret = { file = "${file("tok", SECRETS.tok)}" }
quiet_s = 0
max_s = 0
action = "out"

[sources.meetings]
module = "${join(import.meta.dir, "..", "fixtures", "zoomish.ts")}"
secrets.webhook_secret = { file = "${file("zoom", SECRETS.zoom)}" }
quiet_s = 0
max_s = 0
action = "out"

[destinations.out]
type = "http"
url = "http://127.0.0.1:${receiver.port}/hook"
allow_insecure = true
secret = { file = "${file("out", SECRETS.out)}" }
timeout_s = 2
`,
  );
  const h = await startHookspool(home, ["run"], { env: { PUSH_TOKEN: SECRETS.push } });
  try {
    const base = `http://127.0.0.1:${await h.port()}`;
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { method: "POST", body, headers: { "Content-Type": "application/json", ...headers } });
    const expectAnswer = async (res: Promise<Response>, status: number, text?: string) => {
      const r = await res;
      const body = await r.text();
      expect(r.status).toBe(status);
      if (text !== undefined) expect(body).toBe(text);
      return body;
    };

    // gh: signed pushes on two keys, a duplicate, a ping, and the secret itself as a signature.
    const gh = (payload: Record<string, unknown>, event = "push", delivery = randomUUID()) => {
      const body = JSON.stringify({ ...payload, note: PAYLOAD_SENTINEL });
      return post("/hooks/gh", body, {
        "X-Hub-Signature-256": `sha256=${hmacHex(SECRETS.gh, body)}`,
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
      });
    };
    const d1 = randomUUID();
    await expectAnswer(gh({ repository: { full_name: "o/a" }, n: 1 }, "push", d1), 202);
    await expectAnswer(gh({ repository: { full_name: "o/a" }, n: 1 }, "push", d1), 200);
    await expectAnswer(gh({ repository: { full_name: "o/b" }, n: 2 }), 202);
    await expectAnswer(gh({ zen: "hi" }, "ping"), 200, '{"status":"ignored"}');
    await expectAnswer(
      post("/hooks/gh", JSON.stringify({ repository: { full_name: "o/c" } }), {
        "X-Hub-Signature-256": SECRETS.gh,
        "X-GitHub-Event": "push",
      }),
      401,
      "",
    );
    await expectAnswer(
      post("/hooks/gh", "{}", { "X-Hub-Signature-256": `sha256=${SECRETS.gh}`, Authorization: `Bearer ${SECRETS.gh}` }),
      401,
      "",
    );

    // push: the token in the query string, right and wrong.
    const pushBody = JSON.stringify({
      subscription: "projects/p/subscriptions/s",
      message: { messageId: randomUUID(), data: PAYLOAD_SENTINEL },
    });
    await expectAnswer(post(`/hooks/push?token=${encodeURIComponent(SECRETS.push)}&relay=q7z9`, pushBody), 202);
    await expectAnswer(post(`/hooks/push?token=${encodeURIComponent(`${SECRETS.push}-wrong`)}`, pushBody), 401, "");
    await expectAnswer(post(`/hooks/nosuchsource?token=${encodeURIComponent(SECRETS.push)}`, pushBody), 404, "");

    // tok: a verified request our classification rejects, carrying the secret in every credential header.
    const credentials = {
      "X-Token": SECRETS.tok,
      Authorization: `Bearer ${SECRETS.tok}`,
      "Proxy-Authorization": `Basic ${Buffer.from(`u:${SECRETS.tok}`).toString("base64")}`,
      Cookie: `session=${SECRETS.tok}; other=1`,
    };
    await expectAnswer(
      post("/hooks/tok", JSON.stringify({ no_project: true, note: PAYLOAD_SENTINEL }), credentials),
      202,
      '{"status":"quarantined"}',
    );
    await expectAnswer(post("/hooks/tok", JSON.stringify({ project: "p1", note: PAYLOAD_SENTINEL }), credentials), 202);

    // meetings: an event, a signed handshake (answered from the secret) and a forged one.
    const zoom = (payload: Record<string, unknown>, sign = true) => {
      const body = JSON.stringify(payload);
      const ts = String(Math.floor(Date.now() / 1000));
      return post("/hooks/meetings", body, {
        "x-zm-request-timestamp": ts,
        "x-zm-signature": `v0=${sign ? hmacHex(SECRETS.zoom, `v0:${ts}:${body}`) : SECRET_SENTINEL}`,
      });
    };
    await expectAnswer(
      zoom({
        event: "meeting.started",
        event_ts: Date.now(),
        payload: { object: { id: "m1" } },
        note: PAYLOAD_SENTINEL,
      }),
      202,
    );
    const answer = JSON.parse(
      await expectAnswer(zoom({ event: "endpoint.url_validation", payload: { plainToken: "pt" } }), 200),
    ) as { encryptedToken: string };
    expect(answer.encryptedToken).toBe(hmacHex(SECRETS.zoom, "pt"));
    await expectAnswer(zoom({ event: "endpoint.url_validation", payload: { plainToken: "pt2" } }, false), 401, "");

    // The status endpoints are part of what a secret could leak through.
    for (const path of ["/healthz", "/metrics", `/metrics?token=${encodeURIComponent(SECRETS.push)}`]) {
      const text = await (await fetch(`${base}${path}`)).text();
      for (const f of forms()) expect([path, text.includes(f)]).toEqual([path, false]);
    }

    // Five batches (o/a, o/b, push, tok p1, m1) delivered, one of them after a failed attempt.
    const db = new Database(join(home, "spool.db"), { readonly: true });
    try {
      await waitFor("every batch but the quarantine delivered", () => {
        const row = db
          .query("SELECT COUNT(*) AS n FROM batches WHERE destination = 'out' AND state = 'delivered'")
          .get() as { n: number };
        return row.n === 5;
      });
    } finally {
      db.close();
    }
    expect(received.length).toBe(5);
    for (const r of received) {
      // Signed with the destination's secret, never carrying it.
      expect(r.headers["webhook-signature"]).toMatch(/^v1,/);
      for (const f of forms()) expect(JSON.stringify(r.headers).includes(f) || r.body.includes(f)).toBe(false);
    }
  } finally {
    h.kill("SIGTERM");
    const code = await h.exited;
    receiver.stop(true);
    expect(code).toBe(0);
  }

  // Every column of every table, text and blob.
  const db = new Database(join(home, "spool.db"), { readonly: true });
  const hits: string[] = [];
  let cells = 0;
  try {
    const tables = (db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map(
      (r) => r.name,
    );
    expect(tables).toEqual(
      expect.arrayContaining(["batches", "events", "attempts", "issues", "meta", "dedup", "destinations"]),
    );
    for (const table of tables) {
      for (const row of db.query(`SELECT * FROM "${table}"`).all() as Record<string, unknown>[]) {
        for (const [column, v] of Object.entries(row)) {
          cells++;
          if (v === null) continue;
          const texts =
            v instanceof Uint8Array
              ? [Buffer.from(v).toString("utf8"), Buffer.from(v).toString("latin1")]
              : [String(v)];
          for (const f of forms()) if (texts.some((x) => x.includes(f))) hits.push(`${table}.${column}`);
        }
      }
    }
    // The scenario really filled the tables: quarantine, attempts with an error, an issue.
    expect(
      (db.query("SELECT COUNT(*) AS n FROM batches WHERE destination = 'quarantine'").get() as { n: number }).n,
    ).toBe(1);
    expect(
      (db.query("SELECT COUNT(*) AS n FROM attempts WHERE outcome = 'retry'").get() as { n: number }).n,
    ).toBeGreaterThanOrEqual(1);
    expect((db.query("SELECT COUNT(*) AS n FROM issues").get() as { n: number }).n).toBeGreaterThanOrEqual(1);
    const q = db
      .query("SELECT e.headers FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = 'quarantine'")
      .get() as { headers: string };
    const kept = Object.keys(JSON.parse(q.headers)).map((k) => k.toLowerCase());
    for (const h of ["x-token", "authorization", "proxy-authorization", "cookie"]) expect(kept).not.toContain(h);
  } finally {
    db.close();
  }
  expect(cells).toBeGreaterThan(100);
  expect(hits).toEqual([]);
  // The raw bytes too: a secret in a freed page or the WAL is still on disk.
  for (const f of ["spool.db", "spool.db-wal"].map((n) => join(home, n)).filter(existsSync)) {
    const bytes = readFileSync(f).toString("latin1");
    expect([f, bytes.includes(SECRET_SENTINEL)]).toEqual([f, false]);
  }

  // The subprocess's logs: no sentinel, no secret in any form, no query string.
  const stderr = h.stderr();
  for (const m of ["listening", "queued", "duplicate", "ignored", "unverified", "quarantined", "delivered", "retry"])
    expect(stderr).toContain(m);
  expect(stderr).not.toContain(SECRET_SENTINEL);
  expect(stderr).not.toContain(PAYLOAD_SENTINEL);
  for (const f of forms()) expect(stderr.includes(f)).toBe(false);
  expect(stderr).not.toMatch(/token=|relay=|q7z9|nosuchsource|\?/);
}, 20_000);
