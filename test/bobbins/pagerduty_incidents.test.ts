// pagerduty.incidents: a PagerDuty V3 webhook subscription (X-PagerDuty-Signature, one or more
// comma-separated v1=<hex HMAC-SHA256 of the body>), through a real `hookspool run`, and against an
// intake for what is PagerDuty's own: the incident as the key wherever the event carries it,
// event.event_type, event.id as the dedup id across attempts, the rotation's second signature and
// the test ping.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("pagerduty.incidents");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const v1 = (key: string, body: string) => `v1=${createHmac("sha256", key).update(body).digest("hex")}`;

bobbinTest(
  "pagerduty.incidents",
  "incident events are queued and delivered, the test ping is acked and ignored, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/annotated-rotation.http": 202,
      "captures/ping.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("pagerduty.incidents");
  });
  afterAll(() => t.stop());

  const post = (body: string, headers: Record<string, string>) => t.post("/hooks/pagerduty", body, headers);
  const stored = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test(
    "the accepted capture is stored under the incident id, its event type and event.id; another " +
      "attempt is a duplicate",
    async () => {
      const { body, headers } = capturedRequest(bobbin, "captures/accepted.http");
      const first = await post(body, headers);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(stored(body)).toEqual([
        { key: "Q3EXAMPLEINC42", event_type: "incident.triggered", dedup_id: "01EXAMPLETRIGGERED0000001" },
      ]);
      // PagerDuty's next attempt repeats the body, event.id and X-Webhook-Id.
      const again = await post(body, headers);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(stored(body)).toHaveLength(1);
    },
  );

  test(
    "a note carries its incident in event.data.incident, a role assignment in its first " +
      "assignment: both join the incident's batch",
    async () => {
      const { body: note } = capturedRequest(bobbin, "captures/annotated-rotation.http");
      const role = JSON.stringify({
        event: {
          id: "01EXAMPLEROLEASSIGNED0001",
          event_type: "incident.role.assigned",
          resource_type: "incident",
          occurred_at: "2026-09-14T08:21:40.002Z",
          agent: null,
          client: null,
          data: {
            type: "incident_role_assignment",
            incident_role_assignments: [
              {
                assignee: { id: "PEXUSR1", type: "user_reference" },
                id: "af64b84c-137e-40c6-875c-5dd30a2afaaa",
                incident: { id: "Q3EXAMPLEINC42", type: "incident_reference" },
                old_assignee: null,
                role: { id: "PEXROL1", summary: "Incident Commander", type: "role_reference" },
                status: "active",
                type: "role_assignment_reference",
              },
            ],
          },
        },
      });
      for (const body of [note, role])
        expect((await post(body, { "X-PagerDuty-Signature": v1(SECRET, body) })).status).toBe(202);
      expect(stored(note)).toEqual([
        { key: "Q3EXAMPLEINC42", event_type: "incident.annotated", dedup_id: "01EXAMPLEANNOTATED0000001" },
      ]);
      expect(stored(role)).toEqual([
        { key: "Q3EXAMPLEINC42", event_type: "incident.role.assigned", dedup_id: "01EXAMPLEROLEASSIGNED0001" },
      ]);
      const batches = t.db.db
        .query(
          "SELECT COUNT(DISTINCT e.batch_id) AS n FROM events e JOIN batches b ON b.id = e.batch_id " +
            "WHERE b.key = 'Q3EXAMPLEINC42'",
        )
        .get() as { n: number };
      expect(batches.n).toBe(1);
    },
  );

  test("a service event is keyed by the service, a service's custom fields by event.data.service", async () => {
    const updated = JSON.stringify({
      event: {
        id: "01EXAMPLESERVICEUPDATED01",
        event_type: "service.updated",
        resource_type: "service",
        occurred_at: "2026-09-14T09:00:00.000Z",
        agent: null,
        client: null,
        data: { id: "PEXMPL1", summary: "checkout-api", type: "service", teams: [] },
      },
    });
    const fields = JSON.stringify({
      event: {
        id: "01EXAMPLESERVICEFIELDS001",
        event_type: "service.custom_field_values.updated",
        resource_type: "service",
        occurred_at: "2026-09-14T09:01:00.000Z",
        agent: null,
        client: null,
        data: {
          service: { id: "PEXMPL1", type: "service_reference" },
          custom_fields: [],
          changed_custom_fields: [],
          type: "service_field_values",
        },
      },
    });
    for (const body of [updated, fields])
      expect((await post(body, { "X-PagerDuty-Signature": v1(SECRET, body) })).status).toBe(202);
    expect(stored(updated)[0]?.key).toBe("PEXMPL1");
    expect(stored(fields)[0]?.key).toBe("PEXMPL1");
  });

  test("during a rotation either secret's v1= verifies; a header with only a retired secret's does not", async () => {
    const body = JSON.stringify({
      event: {
        id: "01EXAMPLERESOLVED00000001",
        event_type: "incident.resolved",
        resource_type: "incident",
        occurred_at: "2026-09-14T08:40:00.000Z",
        agent: null,
        client: null,
        data: { id: "Q3EXAMPLEINC42", type: "incident", status: "resolved" },
      },
    });
    const retired = v1("kit-test-retired-secret-pagerduty", body);
    const forged = await post(body, { "X-PagerDuty-Signature": retired });
    expect([forged.status, await forged.text()]).toEqual([401, ""]);
    const rotated = await post(body, { "X-PagerDuty-Signature": `${v1(SECRET, body)},${retired}` });
    expect([rotated.status, await rotated.text()]).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual([
      { key: "Q3EXAMPLEINC42", event_type: "incident.resolved", dedup_id: "01EXAMPLERESOLVED00000001" },
    ]);
  });

  test("the test ping is acked and not stored; signed with another secret it is refused", async () => {
    const { body, headers } = capturedRequest(bobbin, "captures/ping.http");
    const events = t.count("events");
    const bad = await post(body, { ...headers, "X-PagerDuty-Signature": v1("kit-test-other-secret-pagerduty", body) });
    expect([bad.status, await bad.text()]).toEqual([401, ""]);
    const good = await post(body, headers);
    expect([good.status, await good.text()]).toEqual([200, '{"status":"ignored"}']);
    expect(t.count("events")).toBe(events);
  });
});
