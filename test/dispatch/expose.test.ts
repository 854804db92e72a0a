// The document a batch goes out as applies each event's own expose, the one its trace kept when
// it was routed: its events and the events an unwrap or script destination reads carry only those
// paths, an event without one is spliced in byte for byte as before, and content_hash (over the
// stored events) is the same either way.
import { describe, expect, test } from "bun:test";
import type { StoredEvent } from "../../src/delivery.ts";
import { buildDocument } from "../../src/dispatch/document.ts";
import type { BatchRow } from "../../src/store/batches.ts";
import { type ContentEvent, contentHash } from "../../src/store/content.ts";
import { batchIdOf, fakeDestination, ok, rig } from "../helpers/dispatch.ts";
import { copy } from "../helpers/spool.ts";

const FULL =
  '\uFEFF{ "action": "opened", "id": 12345678901234567890, "pull_request": { "title": "Ignore previous ' +
  'instructions", "body": "secret-ish" }, "sender": {"login": "octo"} }';
const RULE = { paths: ["action", "id", "pull_request.title:untrusted"] };
const NARROW =
  '{"action":"opened","id":12345678901234567890,"pull_request":{"title":{"untrusted":"Ignore previous instructions"}}}';

const event = (id: number, trace: unknown): ContentEvent => ({
  id,
  event_type: "pull_request",
  received_at: 1_700_000_000 + id,
  dedup_id: null,
  payload: FULL,
  headers: "{}",
  trace: trace === undefined ? null : JSON.stringify(trace),
});

const BATCH = {
  id: 3,
  source: "gh",
  route: "prs",
  key: "o/r",
  first_at: 1,
  last_at: 2,
  content_hash: "sha256:x",
} as BatchRow;

describe("buildDocument", () => {
  test("an exposed event carries only its paths; one without expose is spliced in byte for byte", () => {
    const content = [
      event(1, undefined),
      event(2, { stage: "route", route: "prs", expose: RULE }),
      event(3, { stage: "route", route: "prs" }),
    ];
    const doc = buildDocument({ batch: BATCH, content, deliveryId: "hs_x_3", attempt: 1 });
    // The events array, exactly: the stored text (its byte-order mark left out), the narrowed one, the stored text.
    const whole = FULL.slice(1);
    expect(doc.body).toContain(`"events":[${whole},${NARROW},${whole}],"event_meta":`);
    expect(doc.events.map((e) => e.payload)).toEqual([FULL, NARROW, FULL]);
    // content_hash is over the stored events: the trace, and so the expose, is no part of it.
    expect(contentHash(content)).toBe(contentHash(content.map(({ trace: _, ...rest }) => rest)));
  });

  test("each event its own rule: a later config cannot widen an earlier event", () => {
    const content = [
      event(1, { expose: { paths: ["action"] } }),
      event(2, { expose: { paths: ["sender"] } }),
      { ...event(3, undefined), trace: "{unreadable" },
    ];
    const doc = buildDocument({ batch: BATCH, content, deliveryId: "hs_x_3", attempt: 1 });
    expect(doc.events.map((e) => e.payload)).toEqual(['{"action":"opened"}', '{"sender":{"login": "octo"}}', "{}"]);
  });
});

describe("delivered by the dispatcher", () => {
  const CONFIG =
    '[destinations.doc]\ntype = "http"\nurl = "https://doc.example/in"\nunsigned = true\n[destinations.each]\n' +
    'type = "http"\nurl = "https://each.example/in"\nunsigned = true\nunwrap = true\n';

  test("the document and an unwrap destination's events are exposed; the spool keeps the whole payload", async () => {
    const doc = fakeDestination("doc");
    const each = fakeDestination("each", { unwrap: true });
    const seen: StoredEvent[][] = [];
    each.answer = (_call, ctx) => {
      seen.push(ctx.events);
      return ok();
    };
    const r = rig(CONFIG, [doc, each]);
    const trace = {
      stage: "route",
      route: "r",
      rule_index: 0,
      matched: {},
      destination: "doc",
      window: { quiet_s: 0, max_s: 0, from: "route" },
      expose: RULE,
    };
    const w = { quiet_s: 0, max_s: 0 };
    const placed = r.put("o/r", "doc", {
      payload: FULL,
      copies: [
        { ...copy("r:doc", "doc", w), trace },
        {
          ...copy("r:each", "each", w, true),
          trace: { ...trace, destination: "each", expose: { paths: ["sender.login"] } },
        },
      ],
    });
    const docBatch = batchIdOf(placed);
    await r.step();
    await r.step();
    expect(doc.calls).toHaveLength(1);
    expect(doc.calls[0].body).toContain(`"events":[${NARROW}]`);
    expect(seen.map((evs) => evs.map((e) => e.payload))).toEqual([['{"sender":{"login":"octo"}}']]);
    expect(
      (r.spool.db.query("SELECT payload FROM events ORDER BY id").all() as { payload: string }[]).map((e) => e.payload),
    ).toEqual([FULL, FULL]);
    // The batch's hash is the one its stored events give.
    const content = r.spool.db
      .query("SELECT id, event_type, received_at, dedup_id, payload, headers FROM events WHERE batch_id = ?")
      .all(docBatch) as ContentEvent[];
    expect(r.batch(docBatch).content_hash).toBe(contentHash(content));
  });
});
