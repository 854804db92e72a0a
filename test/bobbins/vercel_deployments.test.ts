// vercel.deployments: a Vercel team's account webhook (x-vercel-signature, the hex HMAC-SHA1 of the
// body under the webhook's secret), through a real `hookspool run`, and against an intake for what
// is Vercel's own: one batch per deployment, project events by project, the body's id as dedup id.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("vercel.deployments");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string) => ({
  "Content-Type": "application/json",
  "x-vercel-signature": createHmac("sha1", SECRET).update(body).digest("hex"),
});

bobbinTest("vercel.deployments", "a deployment event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("vercel.deployments");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;

  test(
    "the accepted capture is stored under the deployment id, its type and the delivery id; the " +
      "same delivery again is a duplicate",
    async () => {
      const first = await t.post("/hooks/vercel", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([
        {
          key: "dpl_Ex4mpleD3pl0yment0000001",
          event_type: "deployment.succeeded",
          dedup_id: "Q3mZr8Tn2vKxW5pLcE7yHd4B",
        },
      ]);
      const again = await t.post("/hooks/vercel", BODY, HEADERS);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test("the deployment's promotion joins its batch; a project event is keyed by the project", async () => {
    const promoted = BODY.replace(
      '"id":"Q3mZr8Tn2vKxW5pLcE7yHd4B","type":"deployment.succeeded"',
      '"id":"T5pWk3Xn8bQm2RzLdG6yCf9E","type":"deployment.promoted"',
    );
    const res = await t.post("/hooks/vercel", promoted, signed(promoted));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(promoted)).toEqual([
      { key: "dpl_Ex4mpleD3pl0yment0000001", event_type: "deployment.promoted", dedup_id: "T5pWk3Xn8bQm2RzLdG6yCf9E" },
    ]);
    expect(batchOf(promoted)).toBe(batchOf(BODY));
    const project = JSON.stringify({
      id: "V8cNm4Yq1dTk7SwJhB2xEa5G",
      type: "project.created",
      createdAt: 1776160000000,
      region: null,
      payload: {
        team: { id: "team_Ex4mpleT3amId000000001" },
        user: { id: "Ex4mpleUs3rId00000000001" },
        project: { id: "prj_Ex4mpleProj3ct000000002", name: "example-docs" },
      },
    });
    const created = await t.post("/hooks/vercel", project, signed(project));
    expect([created.status, await created.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(project)).toEqual([
      { key: "prj_Ex4mpleProj3ct000000002", event_type: "project.created", dedup_id: "V8cNm4Yq1dTk7SwJhB2xEa5G" },
    ]);
  });

  test("a verified event with neither a deployment nor a project is quarantined with key_missing", async () => {
    const domain = JSON.stringify({
      id: "W2fPr6Zt3gVn9UxMkC4yDb7H",
      type: "domain.created",
      createdAt: 1776160100000,
      region: null,
      payload: { team: { id: "team_Ex4mpleT3amId000000001" }, domain: { name: "shop.example.com" } },
    });
    const res = await t.post("/hooks/vercel", domain, signed(domain));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("key_missing");
  });

  test("a signature of another body, or with a sha1= prefix, is 401", async () => {
    const tampered = BODY.replace('"target":"production"', '"target":"staging"');
    const res = await t.post("/hooks/vercel", tampered, HEADERS);
    expect([res.status, await res.text()]).toEqual([401, ""]);
    const prefixed = await t.post("/hooks/vercel", BODY, {
      ...HEADERS,
      "x-vercel-signature": `sha1=${HEADERS["x-vercel-signature"]}`,
    });
    expect([prefixed.status, await prefixed.text()]).toEqual([401, ""]);
  });
});
