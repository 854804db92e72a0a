// The routing trace stored with each copy: why it went where it went (a route, the implicit
// route, a tee, an override, an emit, quarantined and why), naming matched attributes but never
// their values, the event type excepted. The intake's case runs on both backends.
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { resolveCopies } from "../../src/config/routes.ts";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

let running: WorldIntake | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});

const SENTINEL = "sentinel-value-4b1d";

const GH_TEMPLATE =
  'template = { scheme = "static-token", header = "X-Token", key = "repository.name", ' +
  'event_type = "header:X-Event", attrs = { repo = "repository.name" } }';

const CONFIG = `[sources.gh]
${GH_TEMPLATE}
secrets.secret = { file = "{{secret:gh}}" }
action = "hermes:gh"

[[routes]]
name = "mine"
source = "gh"
match = { repo = "${SENTINEL}", event_type = "pull_request" }
destination = "hermes:mine"
quiet_s = 7

[[routes]]
name = "audit"
source = "gh"
tee = true
destination = "hermes:audit"
`;

onBothWorlds((open) => {
  test(
    "route, implicit, tee and quarantined, each with its stage, rule," +
      " matched names and window's source; no payload value",
    async () => {
      running = await startIntakeOn(open, CONFIG, { secrets: { gh: "tok-test" } });
      const s = running;
      const post = (event: string, body: string) =>
        s.post("/hooks/gh", body, { "X-Token": "tok-test", "X-Event": event, "Content-Type": "application/json" });
      expect(
        (await post("pull_request", JSON.stringify({ repository: { name: SENTINEL }, secret_note: SENTINEL }))).status,
      ).toBe(202);
      expect((await post("push", JSON.stringify({ repository: { name: "other" } }))).status).toBe(202);
      expect((await post("push", "not json at all")).status).toBe(202);
      const rows = (await s.world.rows.all("SELECT route, trace FROM events ORDER BY id")) as {
        route: string;
        trace: string;
      }[];
      const traces = rows.map((r) => JSON.parse(r.trace));
      expect(traces).toEqual([
        {
          stage: "route",
          route: "mine",
          rule_index: 0,
          matched: { repo: "string", event_type: "pull_request" },
          destination: "hermes:mine",
          window: { quiet_s: 7, max_s: expect.any(Number), from: "route" },
        },
        {
          stage: "tee",
          route: "audit",
          rule_index: 1,
          matched: {},
          destination: "hermes:audit",
          window: expect.objectContaining({ from: expect.any(String) }),
        },
        {
          stage: "implicit",
          route: "gh",
          rule_index: null,
          matched: {},
          destination: "hermes:gh",
          window: expect.objectContaining({ from: expect.any(String) }),
        },
        {
          stage: "tee",
          route: "audit",
          rule_index: 1,
          matched: {},
          destination: "hermes:audit",
          window: expect.objectContaining({ from: expect.any(String) }),
        },
        { stage: "quarantined", reason: "not_json" },
      ]);
      // The matched value is in the payload, never in the trace.
      for (const r of rows) expect(r.trace).not.toContain(SENTINEL);
    },
  );
});

test("an override names itself and its route's window", () => {
  const config = {
    sources: { s: { action: "hermes:a" } },
    routes: [],
    spans: {},
    coalesce: { quiet_s: 1, max_s: 2, max_events: 3, max_bytes: 4 },
  } as unknown as Parameters<typeof resolveCopies>[0];
  const [c] = resolveCopies(config, "s", { event_type: "x" }, { destinationOverride: "hermes:b" });
  expect(c.trace).toEqual({
    stage: "override",
    route: "s->hermes:b",
    rule_index: null,
    matched: {},
    destination: "hermes:b",
    window: { quiet_s: 1, max_s: 2, from: "default" },
  });
});
