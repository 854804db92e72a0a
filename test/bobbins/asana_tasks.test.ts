// asana.tasks: Asana's webhooks (X-Hook-Signature, the hex HMAC-SHA256 of the body under the
// secret Asana hands over in the X-Hook-Secret handshake), through a real `hookspool run`, and
// against an intake for what is Asana's own: the handshake learned into the secret file only
// while the instance is armed, echoed, repeated and refused; one event per element of `events`,
// keyed by the parent or else the resource; the empty heartbeat acked as ignored.
//
// The catalogue's runner finds a capture's event by its payload, which a split request does not
// keep whole (each event's payload is its element), so this file makes the same proof itself on
// the shared run, as sendgrid_events.test.ts does: every capture sent over loopback, each queued
// element delivered under its key and type.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Capture } from "../../src/bobbin/captures.ts";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";
import { armSource, withArm } from "../helpers/arm.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, expectAnswers, expectAsCaptured, KIT_DESTINATION, kitOf, sharedRun } from "./catalogue.ts";

const bobbin = builtin("asana.tasks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const textOf = (c: Capture) => new TextDecoder().decode(c.request.body);
type Ev = {
  action: string;
  resource: { gid: string; resource_type: string; resource_subtype?: string };
  parent: { gid: string; resource_type: string } | null;
};
const eventsOf = (c: Capture) => (JSON.parse(textOf(c)) as { events: Ev[] }).events;
const hex = (key: string, body: string) => createHmac("sha256", key).update(body).digest("hex");

test(
  "every capture gets what it says; each event of a queued delivery is delivered under its " +
    "parent's or its own gid",
  async () => {
    const run = await sharedRun(bobbin);
    const results = await run.results(bobbin);
    // The kit's secret again is a repeat: echoed. Another webhook's is refused, and nothing is echoed.
    const echoed = (file: string) => results.find((r) => r.capture.file === file)?.headers?.["x-hook-secret"] ?? null;
    expect(echoed("captures/handshake.http")).toBe(SECRET);
    expect(echoed("captures/handshake-conflict.http")).toBeNull();
    expectAsCaptured(results);
    expectAnswers(results, {
      "captures/accepted.http": 202,
      "captures/batch.http": 202,
      "captures/handshake-conflict.http": { status: 409, body: "" },
      "captures/handshake.http": 200,
      "captures/heartbeat.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    });
    // Neither handshake changed the kept secret.
    expect(readFileSync(run.secretFile(bobbin, "secret"), "utf8")).toBe(SECRET);

    const queued = results.filter((r) => r.capture.expect.word === "queued").flatMap((r) => eventsOf(r.capture));
    expect(queued.map((e) => `${e.resource.resource_type} ${e.action}`)).toEqual([
      "task changed",
      "task changed",
      "story added",
    ]);
    await waitFor(`${queued.length} events delivered`, () => {
      const rows = run.events(bobbin);
      return rows.length === queued.length && rows.every((r) => r.state === "delivered");
    });
    // Each event's payload is its own element; its key is its parent's gid, or its own.
    expect(
      run.events(bobbin).map((r) => ({ key: r.key, type: r.event_type, payload: JSON.parse(r.payload ?? "null") })),
    ).toEqual(
      queued.map((e) => ({ key: e.parent?.gid ?? e.resource.gid, type: e.resource.resource_type, payload: e })),
    );
    const got = await run.deliveries<{ key: string; events: unknown[] }>(bobbin);
    expect(got.accepted.flatMap((d) => d.doc.events)).toHaveLength(queued.length);
    expect(got.unverified).toEqual([]);
    expect(await run.stderr()).not.toContain(SECRET);
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  // A fresh secret, as Asana makes one per webhook (64 hex characters), never the kit's.
  const HOOK_SECRET = "7e5f0c3a9b1d2e4f6a8c0b2d4e6f8a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b9d2f";
  const SECRET_FILE = () => join(t.home, "asana.secret");
  beforeAll(async () => {
    const instance = (name: string) => `[bobbins.${name}]
bobbin = "asana.tasks"
secrets.secret = { file = "{{home}}/${name}.secret" }
outputs = { "*" = "kit" }
`;
    t = await startIntake(
      `${instance("asana")}
${instance("unarmed")}
[[routes]]
name = "asana-comments"
source = "asana"
match = { event_type = "story", subtype = "comment_added" }
destination = "comments"

${KIT_DESTINATION}
[destinations.comments]
type = "http"
url = "http://127.0.0.1:9/comments"
allow_insecure = true
unsigned = true
`,
    );
  });
  afterAll(async () => {
    await t.stop();
  });

  const post = (body: string, signature = hex(HOOK_SECRET, body), path = "/hooks/asana") =>
    t.post(path, body, { "Content-Type": "application/json", "X-Hook-Signature": signature });
  const rows = (source = "asana") =>
    t.db.db
      .query(
        "SELECT b.key, b.destination, e.event_type FROM events e JOIN batches b ON b.id = e.batch_id " +
          "WHERE e.source = ? ORDER BY e.id",
      )
      .all(source) as { key: string; destination: string; event_type: string }[];

  test(
    "armed: the handshake's secret is kept (0600), echoed in a 200, the arm used up, nothing " + "queued or logged",
    async () => {
      const token = armSource(SECRET_FILE(), t.clock.now() + 600);
      // Without the arm token in the URL (a stranger who only knows the hook URL): refused, nothing kept.
      expect((await t.post("/hooks/asana", "", { "X-Hook-Secret": "0e".repeat(32) })).status).toBe(403);
      expect(
        (await t.post(withArm("/hooks/asana", "not-the-token-000000"), "", { "X-Hook-Secret": "0e".repeat(32) }))
          .status,
      ).toBe(403);
      expect(existsSync(SECRET_FILE())).toBe(false);
      const before = LOG_LINES.length;
      const r = await t.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": HOOK_SECRET });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-hook-secret")).toBe(HOOK_SECRET);
      expect(readFileSync(SECRET_FILE(), "utf8")).toBe(`${HOOK_SECRET}\n`);
      expect(statSync(SECRET_FILE()).mode & 0o777).toBe(0o600);
      expect(existsSync(`${SECRET_FILE()}.armed`)).toBe(false);
      expect(t.count("events")).toBe(0);
      const lines = LOG_LINES.slice(before);
      expect(lines.some((l) => l.includes("secret learned"))).toBe(true);
      expect(lines.some((l) => l.includes(HOOK_SECRET))).toBe(false);
    },
  );

  test(
    "the same handshake again is echoed; another webhook's is refused 409 even when armed, the " + "kept secret stays",
    async () => {
      const again = await t.post("/hooks/asana", "", { "X-Hook-Secret": HOOK_SECRET });
      expect([again.status, again.headers.get("x-hook-secret")]).toEqual([200, HOOK_SECRET]);
      const token = armSource(SECRET_FILE(), t.clock.now() + 600);
      const other = await t.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": "0f".repeat(32) });
      expect([other.status, other.headers.get("x-hook-secret"), await other.text()]).toEqual([409, null, ""]);
      expect(readFileSync(SECRET_FILE(), "utf8")).toBe(`${HOOK_SECRET}\n`);
    },
  );

  test(
    "a signed delivery of two events is two events: a change keyed by its task, an addition by its " + "parent project",
    async () => {
      const body = JSON.stringify({
        events: [
          {
            user: { gid: "1208000000000101", resource_type: "user" },
            created_at: "2026-08-24T10:02:11.104Z",
            action: "changed",
            resource: { gid: "1208000000000302", resource_type: "task", resource_subtype: "milestone" },
            parent: null,
            change: { field: "due_on", action: "changed" },
          },
          {
            user: { gid: "1208000000000101", resource_type: "user" },
            created_at: "2026-08-24T10:02:12.998Z",
            action: "added",
            resource: { gid: "1208000000000303", resource_type: "task", resource_subtype: "default_task" },
            parent: { gid: "1208000000000201", resource_type: "project" },
          },
        ],
      });
      const res = await post(body);
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rows()).toEqual([
        { key: "1208000000000302", destination: "kit", event_type: "task" },
        { key: "1208000000000201", destination: "kit", event_type: "task" },
      ]);
    },
  );

  test(
    "a comment is keyed by its task and routed by its subtype; the heartbeat is ignored; a bad " + "signature is 401",
    async () => {
      const comment = JSON.stringify({
        events: [
          {
            user: { gid: "1208000000000101", resource_type: "user" },
            created_at: "2026-08-24T10:05:00.000Z",
            action: "added",
            resource: { gid: "1208000000000402", resource_type: "story", resource_subtype: "comment_added" },
            parent: { gid: "1208000000000302", resource_type: "task", resource_subtype: "milestone" },
          },
        ],
      });
      expect((await post(comment)).status).toBe(202);
      expect(rows().at(-1)).toEqual({ key: "1208000000000302", destination: "comments", event_type: "story" });

      const events = t.count("events");
      const beat = JSON.stringify({ events: [] });
      const hb = await post(beat);
      expect([hb.status, await hb.text()]).toEqual([200, '{"status":"ignored"}']);
      const bad = await post(comment, hex(SECRET, comment));
      expect([bad.status, await bad.text()]).toEqual([401, ""]);
      // An empty signature header is no signature.
      expect((await post(comment, "")).status).toBe(401);
      expect(t.count("events")).toBe(events);
    },
  );

  test(
    "not armed: the handshake is refused 403 and nothing is kept; until a secret is, events cannot " +
      "be verified (503)",
    async () => {
      const r = await t.post("/hooks/unarmed", "", { "X-Hook-Secret": HOOK_SECRET });
      expect([r.status, r.headers.get("x-hook-secret")]).toEqual([403, null]);
      expect(existsSync(join(t.home, "unarmed.secret"))).toBe(false);
      // Armed, but the window has passed.
      const late = armSource(join(t.home, "unarmed.secret"), t.clock.now() - 1);
      expect((await t.post(withArm("/hooks/unarmed", late), "", { "X-Hook-Secret": HOOK_SECRET })).status).toBe(403);
      expect(existsSync(join(t.home, "unarmed.secret"))).toBe(false);
      const body = JSON.stringify({
        events: [{ action: "changed", resource: { gid: "1208000000000302", resource_type: "task" }, parent: null }],
      });
      expect((await post(body, hex(HOOK_SECRET, body), "/hooks/unarmed")).status).toBe(503);
      expect(rows("unarmed")).toEqual([]);
    },
  );
});
