// A quarantined request through the intake's role: a dead batch for the reserved destination
// quarantine, its one event with the request's non-credential headers, its URL and trace, the
// content hash over it, and the source's quarantine issue. Credentials (Authorization, the
// source's auth headers) are never stored. Every backend must leave these rows.
import { expect, test } from "bun:test";
import { T0 } from "../helpers/spool.ts";
import type { Suite } from "./suite.ts";

/** The quarantine cases, on whatever store fresh() opens. */
export function quarantineCases({ fresh }: Suite): void {
  test("the dead batch, its event, content hash and issue; credentials never stored", async () => {
    const s = await fresh();
    const q = {
      source: "gh",
      raw: new TextEncoder().encode("{not json"),
      headers: {
        "X-GitHub-Event": "push",
        Authorization: "Bearer SECRETSENTINEL9c1f",
        "X-Hub-Signature-256": "sha256=abc",
      },
      authHeaders: ["X-Hub-Signature-256"],
      url: "/hooks/gh",
      reason: "not_json",
    };
    expect(await s.intake.quarantine(q, T0)).toEqual({ eventId: 1, batchId: 1, reason: "not_json" });
    expect(
      await s.rows("batches", {
        cols: ["state", "destination", "key", "dead_reason", "content_hash", "last_error", "count", "bytes"],
      }),
    ).toEqual([
      {
        state: "dead",
        destination: "quarantine",
        key: "quarantine",
        dead_reason: "quarantined",
        content_hash: "sha256:4d2ec738dce539372ec9ea1e5449eb97a8c1e368f3a8a15c7ddecb9a4182a710",
        last_error: "not_json",
        count: 1,
        bytes: 9,
      },
    ]);
    expect(await s.rows("events", { cols: ["headers", "url", "trace", "payload", "raw"] })).toEqual([
      {
        headers: '{"X-GitHub-Event":"push"}',
        url: "/hooks/gh",
        trace: '{"stage":"quarantined","reason":"not_json"}',
        payload: null,
        raw: new TextEncoder().encode("{not json"),
      },
    ]);
    const issue = await s.maintenance.issueByFingerprint("source:quarantine:gh");
    expect(issue && { ...issue, id: 0 }).toEqual({
      id: 0,
      fingerprint: "source:quarantine:gh",
      kind: "source",
      destination: null,
      route: "gh",
      state: "open",
      first_at: T0,
      last_at: T0,
      count: 1,
      sample_batch_id: 1,
      last_error: "quarantined: not_json",
      alerted_at: null,
    });
    expect(await s.rows("issues", { cols: ["fingerprint"] })).toEqual([{ fingerprint: "source:quarantine:gh" }]);
  });
}
