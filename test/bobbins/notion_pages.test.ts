// notion.pages: Notion's integration webhooks (X-Notion-Signature, "sha256=" and the hex
// HMAC-SHA256 of the body under the subscription's verification_token), through a real
// `hookspool run`, and against an intake for what is Notion's own: the unsigned
// verification_token handshake kept as the secret only while the instance is armed, one batch per
// page (a comment joins its page's), the event id as the dedup id across Notion's attempts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";
import { armSource, withArm } from "../helpers/arm.ts";
import { bobbinTest, eventByPayload, KIT_DESTINATION } from "./catalogue.ts";

const hex = (key: string, body: string) => createHmac("sha256", key).update(body).digest("hex");

bobbinTest(
  "notion.pages",
  "an event is queued and delivered, a bad signature is 401, the handshake repeating the kept token is 200",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
      "captures/verification.http": { status: 200, body: "" },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  let file: string;
  // Made up, in the shape Notion's are: "secret_" and 43 letters and digits.
  const TOKEN = "secret_kitTestToken0notion0a1b2c3d4e5f6g7h8i9j0k1";
  const PAGE = "0ef104cd-477e-80e1-8571-c0ffee0a1b02";
  const WORKSPACE = "1a2b3c4d-0e0f-4a1b-8c2d-3e4f5a6b7c8d";

  beforeAll(async () => {
    t = await startIntake(`[bobbins.notion]
bobbin = "notion.pages"
secrets.secret = { file = "{{home}}/notion.secret" }
outputs = { "*" = "kit" }

[[routes]]
name = "notion-bots"
source = "notion"
match = { author_type = "bot" }
destination = "kit"

${KIT_DESTINATION}`);
    file = join(t.home, "notion.secret");
  });
  afterAll(async () => {
    await t.stop();
  });

  let armToken = "";
  const arm = () => {
    armToken = armSource(file, t.clock.now() + 600);
  };
  const handshake = (token: string) =>
    t.post(
      withArm("/hooks/notion", armToken || "no-arm-token-given-0"),
      JSON.stringify({ verification_token: token }),
      { "Content-Type": "application/json" },
    );
  const post = (body: string, signature = `sha256=${hex(TOKEN, body)}`) =>
    t.post("/hooks/notion", body, { "Content-Type": "application/json", "X-Notion-Signature": signature });
  const stored = (body: string) =>
    eventByPayload<{ batch: number; key: string; event_type: string; dedup_id: string; route: string }>(
      t,
      "b.id AS batch, b.key, e.event_type, e.dedup_id, e.route",
      body,
    );
  const event = (
    id: string,
    type: string,
    entity: { id: string; type: string },
    data: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ) =>
    JSON.stringify({
      id,
      timestamp: "2026-09-14T08:30:00.000Z",
      workspace_id: WORKSPACE,
      workspace_name: "Example Workspace",
      subscription_id: "2b3c4d5e-1f20-4b2c-9d3e-4f5a6b7c8d9e",
      integration_id: "3c4d5e6f-2031-4c3d-8e4f-5a6b7c8d9eaf",
      type,
      authors: [{ id: "4d5e6f70-3142-4d4e-9f50-6b7c8d9eafb0", type: "person" }],
      attempt_number: 1,
      api_version: "2025-09-03",
      entity,
      data,
      ...extra,
    });

  test(
    "not armed: the handshake is 403 and nothing is kept; an event cannot be verified yet (503, " + "Notion retries)",
    async () => {
      const r = await handshake(TOKEN);
      expect([r.status, await r.text()]).toEqual([403, ""]);
      expect(existsSync(file)).toBe(false);
      const body = event(
        "9a0b1c2d-0000-4e6f-9a7b-000000000001",
        "page.created",
        { id: PAGE, type: "page" },
        { parent: { id: WORKSPACE, type: "space" } },
      );
      expect((await post(body)).status).toBe(503);
      expect(t.count("events")).toBe(0);
    },
  );

  test(
    "armed: the unsigned verification_token is kept (0600), answered 200 and never queued; the arm " +
      "is used up and the token never logged",
    async () => {
      arm();
      const before = LOG_LINES.length;
      const r = await handshake(TOKEN);
      expect([r.status, await r.text()]).toEqual([200, ""]);
      expect(readFileSync(file, "utf8")).toBe(`${TOKEN}\n`);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(existsSync(`${file}.armed`)).toBe(false);
      expect(t.count("events")).toBe(0);
      const logged = LOG_LINES.slice(before);
      expect(logged.some((l) => l.includes("secret learned"))).toBe(true);
      expect(logged.some((l) => l.includes(TOKEN))).toBe(false);
    },
  );

  test(
    "signed with the token: queued under the page's id with the event id as dedup id; a comment on " +
      "the page joins its batch",
    async () => {
      const edit = event(
        "9a0b1c2d-0000-4e6f-9a7b-000000000002",
        "page.content_updated",
        { id: PAGE, type: "page" },
        {
          updated_blocks: [{ id: "153104cd-477e-80ec-a87d-f7ff0236d35c", type: "block" }],
          parent: { id: WORKSPACE, type: "space" },
        },
      );
      const comment = event(
        "9a0b1c2d-0000-4e6f-9a7b-000000000003",
        "comment.created",
        { id: "153104cd-477e-80ca-8f75-001d9e2b6839", type: "comment" },
        { page_id: PAGE, parent: { id: "153104cd-477e-803a-88dc-caececf26478", type: "block" } },
      );
      const other = event(
        "9a0b1c2d-0000-4e6f-9a7b-000000000004",
        "page.properties_updated",
        { id: "0ef104cd-477e-80e1-8571-c0ffee0a1b03", type: "page" },
        { updated_properties: ["XGe%40"], parent: { id: "263104cd-477e-804b-8c32-000b2fcd241a", type: "data_source" } },
      );
      for (const body of [edit, comment, other]) expect((await post(body)).status).toBe(202);
      expect(stored(edit)).toMatchObject({
        key: PAGE,
        event_type: "page.content_updated",
        dedup_id: "9a0b1c2d-0000-4e6f-9a7b-000000000002",
      });
      expect(stored(comment)).toMatchObject({ key: PAGE, event_type: "comment.created" });
      expect(stored(comment)?.batch).toBe(stored(edit)?.batch);
      expect(stored(other)?.key).toBe("0ef104cd-477e-80e1-8571-c0ffee0a1b03");
      expect(stored(other)?.batch).not.toBe(stored(edit)?.batch);
    },
  );

  test("Notion's next attempt of an event (the same id, attempt_number 2, signed again) is a duplicate", async () => {
    const data = { parent: { id: WORKSPACE, type: "space" } };
    const first = event("9a0b1c2d-0000-4e6f-9a7b-000000000005", "page.moved", { id: PAGE, type: "page" }, data);
    const retry = event("9a0b1c2d-0000-4e6f-9a7b-000000000005", "page.moved", { id: PAGE, type: "page" }, data, {
      attempt_number: 2,
    });
    const a = await post(first);
    expect([a.status, await a.text()]).toEqual([202, '{"status":"queued"}']);
    const b = await post(retry);
    expect([b.status, await b.text()]).toEqual([200, '{"status":"duplicate"}']);
    expect(stored(retry)).toBeNull();
  });

  test("an edit made through the API by a bot takes a route on author_type", async () => {
    const body = event(
      "9a0b1c2d-0000-4e6f-9a7b-000000000006",
      "page.content_updated",
      { id: PAGE, type: "page" },
      { updated_blocks: [], parent: { id: WORKSPACE, type: "space" } },
      { authors: [{ id: "1edc05f6-2702-81b5-8408-00279347f034", type: "bot" }] },
    );
    expect((await post(body)).status).toBe(202);
    expect(stored(body)?.route).toBe("notion-bots");
  });

  test("the signature is hex after sha256=: a wrong key, no prefix, or base64 is 401 with an empty body", async () => {
    const body = event(
      "9a0b1c2d-0000-4e6f-9a7b-000000000007",
      "page.locked",
      { id: PAGE, type: "page" },
      { parent: { id: WORKSPACE, type: "space" } },
    );
    const events = t.count("events");
    const b64 = createHmac("sha256", TOKEN).update(body).digest("base64");
    for (const signature of [`sha256=${hex("secret_notTheToken", body)}`, hex(TOKEN, body), `sha256=${b64}`]) {
      const r = await post(body, signature);
      expect([signature.slice(0, 7), r.status, await r.text()]).toEqual([signature.slice(0, 7), 401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });

  test(
    "once a token is kept: the same handshake again is 200, another token is 409 even when armed, " +
      "and the kept token stays",
    async () => {
      expect((await handshake(TOKEN)).status).toBe(200);
      arm();
      const other = await handshake("secret_kitTestOtherToken0b2c3d4e5f6g7h8i9j0k1l2m");
      expect([other.status, await other.text()]).toEqual([409, ""]);
      expect(readFileSync(file, "utf8")).toBe(`${TOKEN}\n`);
      rmSync(`${file}.armed`, { force: true });
      // A token offered under a signature is an event like any other, and this one does not verify.
      const forged = JSON.stringify({ verification_token: "secret_kitTestForged" });
      expect((await post(forged, "sha256=00")).status).toBe(401);
    },
  );
});
