// circleci.webhooks: a CircleCI project's outbound webhooks (circleci-signature, a comma-separated
// list whose v1= entry is the hex HMAC-SHA256 of the body under the secret token), through a real
// `hookspool run`, and against an intake for what is CircleCI's own: one batch per workflow, the
// body's id as dedup id, only v1 entries read, and the example vector of CircleCI's docs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("circleci.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const v1 = (body: string, secret = SECRET) => createHmac("sha256", secret).update(body).digest("hex");

bobbinTest("circleci.webhooks", "a workflow event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("circleci.webhooks", {
      config: `[bobbins.circleci-docs]
bobbin = "circleci.webhooks"
secrets.secret = { file = "{{secret:circleci-docs}}" }
outputs = { "*" = "kit" }
`,
      secrets: { "circleci-docs": "secret" },
    });
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string; batch: number }>(
      t,
      "b.key, e.event_type, e.dedup_id, b.id AS batch",
      body,
    );

  test("the accepted capture is stored under the workflow id, its type and its id; a copy is a duplicate", async () => {
    const first = await t.post("/hooks/circleci", BODY, HEADERS);
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(BODY).map(({ batch: _, ...r }) => r)).toEqual([
      {
        key: "fda08377-fe7e-46b1-8992-3a7aaecac9c3",
        event_type: "workflow-completed",
        dedup_id: "3888f21b-eaa7-38e3-8f3d-75a63bba8895",
      },
    ]);
    const again = await t.post("/hooks/circleci", BODY, HEADERS);
    expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a job of the same workflow joins its batch", async () => {
    const payload = JSON.parse(BODY);
    const job = JSON.stringify({
      ...payload,
      id: "8bd71c28-4969-3677-8940-3e3a61c46660",
      type: "job-completed",
      workflow: { ...payload.workflow, status: undefined },
      job: { id: "8b91f9a8-7975-4e60-916c-f0152ccbc937", name: "test", status: "failed", number: 4410 },
    });
    const res = await t.post("/hooks/circleci", job, {
      ...HEADERS,
      "circleci-event-type": "job-completed",
      "circleci-signature": `v1=${v1(job)}`,
    });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    const [row] = rowOf(job);
    expect(row.event_type).toBe("job-completed");
    expect(row.batch).toBe(rowOf(BODY)[0].batch);
  });

  test("only v1 entries are read: v1 beside a later version verifies, a later version alone is 401", async () => {
    const body = BODY.replace('"status":"failed"', '"status":"success"').replace(
      "3888f21b-eaa7-38e3-8f3d-75a63bba8895",
      "4999f32c-fbb8-49f4-9f4e-86b74cca9906",
    );
    const alone = await t.post("/hooks/circleci", body, { ...HEADERS, "circleci-signature": `v2=${v1(body)}` });
    expect([alone.status, await alone.text()]).toEqual([401, ""]);
    const both = await t.post("/hooks/circleci", body, {
      ...HEADERS,
      "circleci-signature": `v1=${v1(body)},v2=${"0".repeat(64)}`,
    });
    expect([both.status, await both.text()]).toEqual([202, '{"status":"queued"}']);
    const tampered = await t.post("/hooks/circleci", body.replace("main", "dev"), {
      ...HEADERS,
      "circleci-signature": `v1=${v1(body)}`,
    });
    expect([tampered.status, await tampered.text()]).toEqual([401, ""]);
  });

  test("CircleCI's example vector verifies (hello world under secret), and is quarantined as not JSON", async () => {
    const res = await t.post("/hooks/circleci-docs", "hello world", {
      "content-type": "application/json",
      "circleci-signature": "v1=734cc62f32841568f45715aeb9f4d7891324e6d948e4c6c60c0621cdac48623a",
    });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const wrong = await t.post("/hooks/circleci-docs", "lalala", {
      "content-type": "application/json",
      "circleci-signature": "v1=734cc62f32841568f45715aeb9f4d7891324e6d948e4c6c60c0621cdac48623a",
    });
    expect([wrong.status, await wrong.text()]).toEqual([401, ""]);
  });
});
