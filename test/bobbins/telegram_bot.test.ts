// telegram.bot: a bot's webhook updates (X-Telegram-Bot-Api-Secret-Token, the secret_token given to
// setWebhook, compared whole), through a real `hookspool run`, and against an intake for what is
// Telegram's own: the update's kind as event type, the chat as key through the alternatives of
// every kind, update_id as the dedup id when Telegram repeats an update.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("telegram.bot");
const kit = kitOf(bobbin);
const TOKEN = kit.secrets.secret;
const accepted = capturedRequest(bobbin, "captures/accepted.http");
const HEADERS = { "Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TOKEN };

bobbinTest("telegram.bot", "a message and a button press are queued and delivered, a wrong token is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/callback.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("telegram.bot");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const send = async (update: unknown) => {
    const body = JSON.stringify(update);
    const res = await t.post("/hooks/telegram", body, HEADERS);
    return { body, status: res.status, text: await res.text() };
  };

  test(
    "the accepted message is stored under its chat id, as a message, with its update_id; " +
      "Telegram's repeat of it is a duplicate",
    async () => {
      const first = await t.post("/hooks/telegram", accepted.body, accepted.headers);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(accepted.body)).toEqual([{ key: "5550100123", event_type: "message", dedup_id: "804211337" }]);
      const again = await t.post("/hooks/telegram", accepted.body, accepted.headers);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(accepted.body)).toHaveLength(1);
    },
  );

  test("each kind finds its chat, or its user, or its poll, and is typed by its kind", async () => {
    const user = { id: 5550100123, is_bot: false, first_name: "Example" };
    const cases: [unknown, string, string][] = [
      [
        {
          update_id: 804211400,
          channel_post: {
            message_id: 77,
            chat: { id: -1005550100777, title: "Release notes", type: "channel" },
            date: 1778162500,
            text: "2026.05.07 is out",
          },
        },
        "-1005550100777",
        "channel_post",
      ],
      [
        {
          update_id: 804211401,
          inline_query: { id: "5550100123000009001", from: user, query: "checklist", offset: "" },
        },
        "5550100123",
        "inline_query",
      ],
      [
        {
          update_id: 804211402,
          my_chat_member: {
            chat: { id: -1005550100999, title: "Release crew", type: "supergroup" },
            from: user,
            date: 1778162510,
            old_chat_member: { status: "left", user: { id: 5550100001, is_bot: true, first_name: "Example Helper" } },
            new_chat_member: { status: "member", user: { id: 5550100001, is_bot: true, first_name: "Example Helper" } },
          },
        },
        "-1005550100999",
        "my_chat_member",
      ],
      [
        { update_id: 804211403, poll_answer: { poll_id: "5550100123000009100", user, option_ids: [1] } },
        "5550100123",
        "poll_answer",
      ],
      [
        {
          update_id: 804211404,
          poll: {
            id: "5550100123000009100",
            question: "Ship Friday?",
            options: [],
            total_voter_count: 3,
            is_closed: true,
            is_anonymous: false,
            type: "regular",
            allows_multiple_answers: false,
          },
        },
        "5550100123000009100",
        "poll",
      ],
    ];
    for (const [update, key, kind] of cases) {
      const r = await send(update);
      expect({ kind, status: r.status, text: r.text }).toEqual({ kind, status: 202, text: '{"status":"queued"}' });
      expect(rowOf(r.body)).toEqual([
        { key, event_type: kind, dedup_id: String((update as { update_id: number }).update_id) },
      ]);
    }
  });

  test("an update of a kind the key does not list is kept in quarantine with key_missing", async () => {
    const r = await send({ update_id: 804211500, some_future_kind: { id: 1 } });
    expect([r.status, r.text]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("key_missing");
  });

  test("the token is compared whole: missing, another case, a prefix or a suffix is an empty 401", async () => {
    const events = t.count("events");
    for (const headers of [
      { "Content-Type": "application/json" },
      { ...HEADERS, "X-Telegram-Bot-Api-Secret-Token": TOKEN.toUpperCase() },
      { ...HEADERS, "X-Telegram-Bot-Api-Secret-Token": `Bearer ${TOKEN}` },
      { ...HEADERS, "X-Telegram-Bot-Api-Secret-Token": `${TOKEN}x` },
    ]) {
      const res = await t.post("/hooks/telegram", accepted.body.replace("804211337", "804211999"), headers);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });

  test("the token does not cover the body: any body under the right token is taken, as README.md says", async () => {
    const r = await send({
      update_id: 804211600,
      message: { message_id: 1, chat: { id: 5550100124, type: "private" }, date: 1, text: "not from Telegram" },
    });
    expect([r.status, r.text]).toEqual([202, '{"status":"queued"}']);
  });

  test("the token never reaches a stored column", () => {
    const hit = t.db.db
      .query("SELECT COUNT(*) AS n FROM events WHERE payload LIKE ? OR headers LIKE ?")
      .get(`%${TOKEN}%`, `%${TOKEN}%`) as { n: number };
    expect(hit.n).toBe(0);
  });
});
