// resend.emails: Resend's webhooks, sent through Svix (svix-id, svix-timestamp, svix-signature:
// "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" under the whsec_ key), one batch
// per email, deduplicated on svix-id for two days.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("resend.emails");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const DAY = 86_400;

/** Svix's headers for one attempt: its own timestamp, signed with the key the whsec_ secret encodes. */
function svix(id: string, ts: number, body: string, secret = SECRET): Record<string, string> {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const sig = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
  return {
    "Content-Type": "application/json",
    "svix-id": id,
    "svix-timestamp": String(ts),
    "svix-signature": `v1,${sig}`,
  };
}

bobbinTest(
  "resend.emails",
  "an email event is queued and delivered, Svix's second attempt at it is a duplicate, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/duplicate.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

test("the manifest remembers a message id for two days, past Svix's last retry", () => {
  expect(bobbin.manifest.source?.dedup_window_s).toBe(2 * DAY);
  expect(bobbin.manifest.source?.sender_retries).toBe(true);
});

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("resend.emails");
  });
  afterAll(() => t.stop());

  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const post = async (body: string, headers: Record<string, string>) => {
    const res = await t.post("/hooks/resend", body, headers);
    return [res.status, await res.text()];
  };

  test("the accepted capture is stored under its email_id and type, its svix-id the dedup id", async () => {
    const { body, headers } = capturedRequest(bobbin);
    expect(await post(body, headers)).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual({
      key: "4e1f5c0d-7a2b-4c9e-8f10-0000000d1e11",
      event_type: "email.delivered",
      dedup_id: "msg_2kitTestResendDelivered0001",
    });
  });

  test("contact, domain and inbox events, which carry no email, are keyed by their own data.id or inbox", async () => {
    const contact = JSON.stringify({
      type: "contact.created",
      created_at: "2026-11-12T14:29:59.100Z",
      data: {
        id: "c0a7e5d1-0000-4000-8000-00000000c001",
        audience_id: "a0d1e2c3-0000-4000-8000-00000000a001",
        segment_ids: [],
        created_at: "2026-11-12T14:29:59.100Z",
        updated_at: "2026-11-12T14:29:59.100Z",
        email: "new.contact@example.com",
        first_name: "New",
        last_name: "Contact",
        unsubscribed: false,
      },
    });
    const domain = JSON.stringify({
      type: "domain.updated",
      created_at: "2026-11-12T14:29:59.200Z",
      data: {
        id: "d0a1b2c3-0000-4000-8000-00000000d001",
        name: "mail.example.com",
        status: "verified",
        created_at: "2026-11-01T09:00:00.000000+00:00",
        region: "eu-west-1",
        records: [],
      },
    });
    const inbox = JSON.stringify({
      type: "inbox.created",
      created_at: "2026-11-12T14:29:59.300Z",
      data: { source: "dashboard", inbox_id: "i0b0c0d0-0000-4000-8000-00000000e001" },
    });
    expect(await post(contact, svix("msg_2kitTestResendContact00001", NOW, contact))).toEqual([
      202,
      '{"status":"queued"}',
    ]);
    expect(await post(domain, svix("msg_2kitTestResendDomain000001", NOW, domain))).toEqual([
      202,
      '{"status":"queued"}',
    ]);
    expect(await post(inbox, svix("msg_2kitTestResendInbox0000001", NOW, inbox))).toEqual([202, '{"status":"queued"}']);
    expect(stored(contact)).toEqual({
      key: "c0a7e5d1-0000-4000-8000-00000000c001",
      event_type: "contact.created",
      dedup_id: "msg_2kitTestResendContact00001",
    });
    expect(stored(domain)).toEqual({
      key: "d0a1b2c3-0000-4000-8000-00000000d001",
      event_type: "domain.updated",
      dedup_id: "msg_2kitTestResendDomain000001",
    });
    expect(stored(inbox)?.key).toBe("i0b0c0d0-0000-4000-8000-00000000e001");
  });

  test("a retry signed anew within Svix's schedule is a duplicate for two days; after them the id is new", async () => {
    const body = JSON.stringify({
      type: "email.opened",
      created_at: "2026-11-12T14:29:59.500Z",
      data: {
        created_at: "2026-11-12T14:20:00.000000+00:00",
        email_id: "4e1f5c0d-7a2b-4c9e-8f10-0000000d1e12",
        from: "Example Shop <orders@example.com>",
        to: ["customer@example.com"],
        subject: "Welcome",
      },
    });
    const id = "msg_2kitTestResendOpened000001";
    try {
      expect(await post(body, svix(id, NOW, body))).toEqual([202, '{"status":"queued"}']);
      // Svix's last attempts come 28 to 33 hours after the first, each with the time it is made.
      for (const after of [5, 300, 28 * 3600, 33 * 3600, 2 * DAY - 60]) {
        t.clock.set(NOW + after);
        expect([after, ...(await post(body, svix(id, NOW + after, body)))]).toEqual([
          after,
          200,
          '{"status":"duplicate"}',
        ]);
      }
      t.clock.set(NOW + 2 * DAY + 60);
      expect(await post(body, svix(id, NOW + 2 * DAY + 60, body))).toEqual([202, '{"status":"queued"}']);
    } finally {
      t.clock.set(NOW);
    }
  });

  test(
    "refused with 401 and nothing stored: 301 s stale or ahead, another secret, the body changed, " +
      "no svix-signature",
    async () => {
      const body = JSON.stringify({
        type: "email.bounced",
        created_at: "2026-11-12T14:29:59.700Z",
        data: {
          created_at: "2026-11-12T14:29:50.000000+00:00",
          email_id: "4e1f5c0d-7a2b-4c9e-8f10-0000000d1e13",
          from: "Example Shop <orders@example.com>",
          to: ["gone@example.com"],
          subject: "Welcome",
          bounce: { message: "mailbox unavailable", subType: "General", type: "Permanent" },
        },
      });
      const id = "msg_2kitTestResendBounced00001";
      const { "svix-signature": _, ...unsigned } = svix(id, NOW, body);
      const cases: [string, string, Record<string, string>][] = [
        ["stale", body, svix(id, NOW - 301, body)],
        ["future", body, svix(id, NOW + 301, body)],
        [
          "another secret",
          body,
          svix(id, NOW, body, `whsec_${Buffer.from("not-the-kit-secret-resend").toString("base64")}`),
        ],
        ["the body changed", body.replace("Permanent", "Transient"), svix(id, NOW, body)],
        ["no svix-signature", body, unsigned],
      ];
      const events = t.count("events");
      for (const [name, b, h] of cases) expect([name, ...(await post(b, h))]).toEqual([name, 401, ""]);
      expect(t.count("events")).toBe(events);
      // The control: the same message, correctly signed 299 s late, is queued.
      expect(await post(body, svix(id, NOW - 299, body))).toEqual([202, '{"status":"queued"}']);
    },
  );
});
