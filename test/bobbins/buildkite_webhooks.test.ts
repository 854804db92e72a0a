// buildkite.webhooks: Buildkite Pipelines webhooks (X-Buildkite-Signature,
// timestamp=<unix>,signature=<hex HMAC-SHA256 of "<timestamp>.<body>">), through a real `hookspool
// run`, and against an intake on the kit's clock for what is Buildkite's own: one batch per build
// with its jobs, agents by agent, the ping ignored, the plain token refused, the 300 s window.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("buildkite.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const hmac = (message: string) => createHmac("sha256", SECRET).update(message).digest("hex");
const signed = (body: string, event: string, ts = NOW) => ({
  "Content-Type": "application/json",
  "X-Buildkite-Event": event,
  "X-Buildkite-Signature": `timestamp=${ts},signature=${hmac(`${ts}.${body}`)}`,
});

bobbinTest("buildkite.webhooks", "a build event is queued and delivered, the ping ignored, a bad signature 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
    "captures/ping.http": 200,
  },
});

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("buildkite.webhooks");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; batch: number }>(t, "b.key, e.event_type, b.id AS batch", body);

  test("the accepted capture is stored under the build id and its event; the same request is a duplicate", async () => {
    const first = await t.post("/hooks/buildkite", BODY, HEADERS);
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(BODY).map(({ batch: _, ...r }) => r)).toEqual([
      { key: "0190f3a4-5b6c-4d7e-8f90-a1b2c3d4e5f6", event_type: "build.finished" },
    ]);
    const again = await t.post("/hooks/buildkite", BODY, HEADERS);
    expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a job event joins its build's batch; an agent event is keyed by the agent", async () => {
    const payload = JSON.parse(BODY);
    const job = JSON.stringify({
      event: "job.finished",
      job: { id: "0190f3a5-1111-4222-8333-944455566677", type: "script", name: ":test_tube: test", state: "failed" },
      build: payload.build,
      pipeline: payload.pipeline,
      sender: payload.sender,
    });
    const res = await t.post("/hooks/buildkite", job, signed(job, "job.finished"));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    const [row] = rowOf(job);
    expect(row.event_type).toBe("job.finished");
    expect(row.batch).toBe(rowOf(BODY)[0].batch);
    const agent = JSON.stringify({
      event: "agent.disconnected",
      agent: { id: "0188aa11-2233-4455-8677-8899aabbccdd", name: "builder-1", connection_state: "disconnected" },
      sender: payload.sender,
    });
    const a = await t.post("/hooks/buildkite", agent, signed(agent, "agent.disconnected"));
    expect([a.status, await a.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(agent).map((r) => r.key)).toEqual(["0188aa11-2233-4455-8677-8899aabbccdd"]);
  });

  test("the plain X-Buildkite-Token is refused, even with the right token", async () => {
    const res = await t.post("/hooks/buildkite", BODY, {
      "Content-Type": "application/json",
      "X-Buildkite-Event": "build.finished",
      "X-Buildkite-Token": SECRET,
    });
    expect([res.status, await res.text()]).toEqual([401, ""]);
  });

  test("a timestamp more than 300 s off is 401, and so is a signature of the body alone", async () => {
    const other = BODY.replace('"number":2214', '"number":2215');
    for (const at of [NOW - 301, NOW + 301]) {
      const res = await t.post("/hooks/buildkite", other, signed(other, "build.finished", at));
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    const bodyOnly = hmac(other);
    const res = await t.post("/hooks/buildkite", other, {
      ...HEADERS,
      "X-Buildkite-Signature": `timestamp=${NOW},signature=${bodyOnly}`,
    });
    expect([res.status, await res.text()]).toEqual([401, ""]);
  });
});
