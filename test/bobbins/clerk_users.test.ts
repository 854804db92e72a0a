// clerk.users: Clerk's webhooks, sent through Svix (svix-id, svix-timestamp, svix-signature:
// "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" under the whsec_ key), one batch
// per user, deduplicated on svix-id for two days.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventByPayload, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("clerk.users");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const USER = "user_2kitTestExampleUser000001";

/** Svix's headers for one attempt, signed with the key the whsec_ secret encodes. */
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

/** A Clerk event envelope around data. */
const event = (type: string, data: Record<string, unknown>, ms = NOW * 1000) =>
  JSON.stringify({
    data,
    event_attributes: { http_request: { client_ip: "192.0.2.10", user_agent: "kit-test" } },
    instance_id: "ins_2kitTestExampleInstance001",
    object: "event",
    timestamp: ms,
    type,
  });

bobbinTest(
  "clerk.users",
  "a sign-up's user.created and session.created are queued under the user's id and delivered, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
      "captures/session.http": 202,
    },
    afterwards(results) {
      // Both queued captures name the same user as their key: one batch per user.
      expect(results.filter((r) => r.status === 202).map((r) => r.capture.expect.key)).toEqual([USER, USER]);
    },
  },
);

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("clerk.users", {
      config: `# The development instance's events go elsewhere, by the instance attribute.
[[routes]]
name = "clerk-dev"
source = "clerk"
match = { instance = "ins_2kitTestDevInstance0000001" }
destination = "dev"

[destinations.dev]
type = "http"
url = "http://127.0.0.1:9/dev"
allow_insecure = true
unsigned = true
`,
    });
  });
  afterAll(() => t.stop());

  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const post = async (body: string, headers: Record<string, string>) => {
    const res = await t.post("/hooks/clerk", body, headers);
    return [res.status, await res.text()];
  };

  test("each kind of event is keyed by the user it is about; other objects by their own id", async () => {
    const cases: [string, string, Record<string, unknown>][] = [
      [
        "user.updated",
        USER,
        { id: USER, object: "user", first_name: "Renamed", email_addresses: [], public_metadata: {} },
      ],
      ["user.deleted", USER, { deleted: true, id: USER, object: "user" }],
      [
        "session.ended",
        USER,
        {
          id: "sess_2kitTestExampleSession0002",
          object: "session",
          client_id: "client_2kitTestExampleClient001",
          user_id: USER,
          status: "ended",
        },
      ],
      [
        "email.created",
        USER,
        {
          id: "ema_2kitTestExampleEmail000001",
          object: "email",
          slug: "verification_code",
          to_email_address: "new.user@example.com",
          email_address_id: "idn_2kitTestExampleEmail00001",
          user_id: USER,
          subject: "Your code",
          status: "queued",
          delivered_by_clerk: true,
        },
      ],
      [
        "organizationMembership.created",
        USER,
        {
          id: "orgmem_2kitTestExampleMember001",
          object: "organization_membership",
          role: "org:member",
          organization: { id: "org_2kitTestExampleOrg0000001", object: "organization", name: "Example Org" },
          public_user_data: {
            identifier: "new.user@example.com",
            first_name: "New",
            last_name: "User",
            image_url: "",
            has_image: false,
            user_id: USER,
          },
        },
      ],
      [
        "organization.created",
        "org_2kitTestExampleOrg0000001",
        { id: "org_2kitTestExampleOrg0000001", object: "organization", name: "Example Org", slug: "example-org" },
      ],
      [
        "email.created",
        "ema_2kitTestExampleEmail000002",
        {
          id: "ema_2kitTestExampleEmail000002",
          object: "email",
          slug: "invitation",
          to_email_address: "invitee@example.com",
          email_address_id: null,
          user_id: null,
          delivered_by_clerk: true,
        },
      ],
    ];
    for (const [i, [type, key, data]] of cases.entries()) {
      const body = event(type, data, NOW * 1000 + i);
      const id = `msg_2kitTestClerkKeyCase0000${i}`;
      expect([type, ...(await post(body, svix(id, NOW, body)))]).toEqual([type, 202, '{"status":"queued"}']);
      expect(stored(body)).toEqual({ key, event_type: type, dedup_id: id });
    }
  });

  test("the instance_id is the instance attribute: a route sends one Clerk instance's events elsewhere", async () => {
    const prod = event("user.updated", { id: "user_2kitTestExampleUser000002", object: "user" });
    const dev = JSON.stringify({ ...JSON.parse(prod), instance_id: "ins_2kitTestDevInstance0000001" });
    expect(await post(prod, svix("msg_2kitTestClerkAttrs000000001", NOW, prod))).toEqual([202, '{"status":"queued"}']);
    expect(await post(dev, svix("msg_2kitTestClerkAttrs000000002", NOW, dev))).toEqual([202, '{"status":"queued"}']);
    const destination = (body: string) =>
      eventsByPayload<{ destination: string }>(t, "b.destination", body)[0]?.destination;
    expect([destination(prod), destination(dev)]).toEqual(["kit", "dev"]);
  });

  test(
    "Svix's retry of a message that landed is a duplicate; 301 s off or another endpoint's secret " + "is 401",
    async () => {
      const body = event("user.created", { id: "user_2kitTestExampleUser000003", object: "user" });
      const id = "msg_2kitTestClerkRetry000000001";
      expect(await post(body, svix(id, NOW, body))).toEqual([202, '{"status":"queued"}']);
      t.clock.set(NOW + 1800);
      try {
        expect(await post(body, svix(id, NOW + 1800, body))).toEqual([200, '{"status":"duplicate"}']);
      } finally {
        t.clock.set(NOW);
      }
      const other = `whsec_${Buffer.from("not-the-kit-secret-clerk").toString("base64")}`;
      const fresh = event("user.created", { id: "user_2kitTestExampleUser000004", object: "user" });
      const events = t.count("events");
      for (const [name, h] of [
        ["stale", svix("msg_2kitTestClerkRefused0000001", NOW - 301, fresh)],
        ["future", svix("msg_2kitTestClerkRefused0000001", NOW + 301, fresh)],
        ["another endpoint's secret", svix("msg_2kitTestClerkRefused0000001", NOW, fresh, other)],
      ] as const) {
        expect([name, ...(await post(fresh, h))]).toEqual([name, 401, ""]);
      }
      expect(t.count("events")).toBe(events);
    },
  );
});
