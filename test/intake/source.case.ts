// The source kit: one matrix, run the same way on every source over real HTTP:
// signed, unsigned, tampered, future-dated and stale, oversized, chunked, duplicate, handshake
// with a good and a bad signature, constant-ness of an unauthenticated handshake, plugin
// exception -> quarantine, spool unwritable -> 503, and no sentinel in any log line or column.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { quarantineIssue } from "../../src/store/enqueue.ts";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";

import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

export { PAYLOAD_SENTINEL, SECRET_SENTINEL };

export interface Signed {
  headers: Record<string, string>;
  /** A query string to append (static tokens in the URL). */
  query?: string;
}

export interface SourceKit {
  title: string;
  /** The source's name in the config (the URL is /hooks/<source>). */
  source: string;
  /** The [sources.<source>] table and anything else; {{secret:<name>}} is a secret file's path. */
  config: string;
  /** Secret files to write: name -> value. Each value should contain SECRET_SENTINEL. */
  secrets: Record<string, string>;
  /** A valid payload; the kit puts PAYLOAD_SENTINEL in it. */
  payload(): Record<string, unknown>;
  /** What makes `body` verify at `now`. */
  sign(body: Uint8Array, now: number): Signed;
  /** The headers that carry a signature or token: never stored, not even in quarantine. */
  authHeaders: string[];
  /** False for token schemes: the token does not cover the body, so tampering goes unnoticed. */
  bodySigned?: boolean;
  /** The scheme carries a timestamp: stale and future-dated requests are refused. */
  timestamped?: boolean;
  /** The source dedups: the same signed request twice is a duplicate. */
  dedup?: boolean;
  /** A signed payload that makes classification throw (a missing key field, say). */
  broken(): Record<string, unknown>;
  /** A handshake answered after verify: the body, and what a good answer looks like. */
  handshake?: { payload(): Record<string, unknown>; check(res: Response): Promise<void> };
  /** A constant handshake answered before verify (Trello's HEAD). */
  unauthenticatedHandshake?: { method: string; status: number };
  /** Extra checks on the stored event (headers kept, key, event type). */
  stored?(row: { key: string; event_type: string; headers: string; dedup_id: string | null }): void;
}

const enc = new TextEncoder();

export function runSourceKit(kit: SourceKit): void {
  describe(`source kit: ${kit.title}`, () => {
    let t: TestIntake;
    const bodyOf = (p: Record<string, unknown>) => enc.encode(JSON.stringify(p));
    const send = async (payload: Record<string, unknown>, opts: { now?: number; tamper?: boolean; unsigned?: boolean; extra?: Record<string, string> } = {}) => {
      const body = bodyOf(payload);
      const s = kit.sign(body, opts.now ?? t.clock.now());
      const sent = opts.tamper ? bodyOf({ ...payload, tampered: true }) : body;
      const headers = { "Content-Type": "application/json", ...(opts.unsigned ? {} : s.headers), ...(opts.extra ?? {}) };
      const path = `/hooks/${kit.source}${!opts.unsigned && s.query ? `?${s.query}` : ""}`;
      return t.post(path, sent, headers);
    };

    beforeAll(async () => {
      t = await startIntake(kit.config, { secrets: kit.secrets });
    });
    afterAll(async () => {
      await t.stop();
    });

    test("signed: 202 queued, and the event is on disk when the answer arrives", async () => {
      const before = t.count("events");
      const res = await send(kit.payload());
      expect(res.status).toBe(202);
      expect(await res.json()).toEqual({ status: "queued" });
      expect(t.count("events")).toBe(before + 1);
      const row = t.db.db.query("SELECT b.key, e.event_type, e.headers, e.dedup_id, e.payload FROM events e JOIN batches b ON b.id = e.batch_id ORDER BY e.id DESC LIMIT 1").get() as {
        key: string;
        event_type: string;
        headers: string;
        dedup_id: string | null;
        payload: string;
      };
      expect(row.payload).toContain(PAYLOAD_SENTINEL);
      kit.stored?.(row);
    });

    test("unsigned: 401, empty body, nothing stored", async () => {
      const before = t.count("events");
      const res = await send(kit.payload(), { unsigned: true });
      expect(res.status).toBe(401);
      expect(await res.text()).toBe("");
      expect(t.count("events")).toBe(before);
    });

    if (kit.bodySigned !== false) {
      test("tampered body: 401", async () => {
        const before = t.count("events");
        const res = await send(kit.payload(), { tamper: true });
        expect(res.status).toBe(401);
        expect(await res.text()).toBe("");
        expect(t.count("events")).toBe(before);
      });
    }

    if (kit.timestamped) {
      test("stale and future-dated: 401 beyond the 300 s tolerance, both ways", async () => {
        const now = t.clock.now();
        expect((await send(kit.payload(), { now: now - 301 })).status).toBe(401);
        expect((await send(kit.payload(), { now: now + 301 })).status).toBe(401);
        expect((await send(kit.payload(), { now: now - 299 })).status).toBe(202);
      });
    }

    test("oversized: 413 before any plugin code, nothing stored", async () => {
      const before = t.count("events");
      const big = { ...kit.payload(), pad: "x".repeat(1024 * 1024) };
      const res = await send(big);
      expect(res.status).toBe(413);
      expect(t.count("events")).toBe(before);
    });

    test("chunked: 411", async () => {
      const body = bodyOf(kit.payload());
      const s = kit.sign(body, t.clock.now());
      const stream = new ReadableStream({
        start(c) {
          c.enqueue(body);
          c.close();
        },
      });
      const res = await fetch(`${t.url}/hooks/${kit.source}${s.query ? `?${s.query}` : ""}`, { method: "POST", body: stream, headers: s.headers });
      expect(res.status).toBe(411);
    });

    if (kit.dedup) {
      test("duplicate: the same delivery twice is 200 duplicate, stored once", async () => {
        const p = kit.payload();
        const first = await send(p);
        expect(first.status).toBe(202);
        const before = t.count("events");
        const again = await send(p);
        expect(again.status).toBe(200);
        expect(await again.json()).toEqual({ status: "duplicate" });
        expect(t.count("events")).toBe(before);
      });
    }

    if (kit.handshake) {
      const hs = kit.handshake;
      test("handshake with a good signature is answered and never enqueued", async () => {
        const before = t.count("events");
        await hs.check(await send(hs.payload()));
        expect(t.count("events")).toBe(before);
      });
      test("handshake with a bad signature: 401, no answer derived from the secret", async () => {
        const res = await send(hs.payload(), { tamper: true });
        expect(res.status).toBe(401);
        expect(await res.text()).toBe("");
      });
    }

    if (kit.unauthenticatedHandshake) {
      const uh = kit.unauthenticatedHandshake;
      test("unauthenticated handshake: a constant answer that reads no secret", async () => {
        const a = await fetch(`${t.url}/hooks/${kit.source}`, { method: uh.method });
        const b = await fetch(`${t.url}/hooks/${kit.source}`, { method: uh.method, headers: { "X-Anything": "else" } });
        // A challenge that touched the secrets would have thrown: 503, not the constant answer.
        expect(a.status).toBe(uh.status);
        expect(b.status).toBe(a.status);
        expect(await b.text()).toBe(await a.text());
      });
    }

    test("plugin exception after verify: 202 quarantined, raw kept, no auth header stored, issue opened", async () => {
      const res = await send(kit.broken());
      expect(res.status).toBe(202);
      expect(await res.json()).toEqual({ status: "quarantined" });
      const q = t.db.db.query("SELECT e.headers, e.raw, b.state, b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = 'quarantine' ORDER BY e.id DESC LIMIT 1").get() as {
        headers: string;
        raw: Uint8Array;
        state: string;
        last_error: string;
      };
      expect(q.state).toBe("dead");
      expect(new TextDecoder().decode(q.raw)).toContain(PAYLOAD_SENTINEL);
      const stored = Object.keys(JSON.parse(q.headers)).map((h) => h.toLowerCase());
      for (const h of kit.authHeaders) expect(stored).not.toContain(h.toLowerCase());
      expect(stored).toContain("content-type");
      // The sender's fault (no key, not JSON) is filed under the source; the plugin's own error as config.
      expect(q.last_error).toMatch(/^(not_json|not_utf8|key_missing|key_too_long|bad_payload|no_destination|plugin_error:\w+)$/);
      expect(t.count("issues", `fingerprint = '${quarantineIssue(kit.source, q.last_error).fingerprint}' AND state = 'open'`)).toBe(1);
    });

    test("spool unwritable: 503 and nothing acknowledged", async () => {
      // The intake's own connection may not grow the file: SQLite answers SQLITE_FULL.
      const conn = (t.intake as unknown as { spool: { db: { run(sql: string): void; query(sql: string): { get(): unknown } } } }).spool.db;
      const pages = (conn.query("PRAGMA page_count").get() as { page_count: number }).page_count;
      conn.run(`PRAGMA max_page_count = ${pages}`);
      try {
        const big = { ...kit.payload(), pad: "y".repeat(200_000) };
        const res = await send(big);
        expect(res.status).toBe(503);
      } finally {
        conn.run("PRAGMA max_page_count = 1073741823");
      }
      expect((await send(kit.payload())).status).toBe(202);
    });

    test("no sentinel in any log line, no secret in any column", () => {
      expect(LOG_LINES.length).toBeGreaterThan(0);
      for (const line of LOG_LINES) {
        expect(line).not.toContain(SECRET_SENTINEL);
        expect(line).not.toContain(PAYLOAD_SENTINEL);
      }
      const tables = (t.db.db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name);
      for (const table of tables) {
        const rows = t.db.db.query(`SELECT * FROM ${table}`).all() as Record<string, unknown>[];
        for (const row of rows) {
          for (const v of Object.values(row)) {
            const text = v instanceof Uint8Array ? new TextDecoder().decode(v) : String(v);
            expect(text).not.toContain(SECRET_SENTINEL);
          }
        }
      }
    });
  });
}
