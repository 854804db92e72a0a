// A pull source against a real upstream intake over loopback (SQLite both sides): every leased
// batch's events committed here with their source names, keys, types, dedup ids and payload
// bytes, then acked; an ack that is lost until the lease ends leases the batch again, and its
// events are duplicates here, never second events; an upstream that does not answer opens an
// issue past expect_every_s, resolved when it answers again.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { sqliteStores } from "../../src/store/open.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";

setDefaultTimeout(60_000);

const TOKEN = "pull-source-token-0123456789";

const UPSTREAM = `[dispatch]
lease_grace_s = 5

[sources.gh]
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "{{secret:laptop}}" }
timeout_s = 10
`;

/** The private side: github's events routed by its own source here, anything else by the pull source's action. */
const downstream = (url: string) => `[sources.office]
action = "http:other"
expect_every_s = 5

[sources.office.pull]
url = "${url}"
destination = "laptop"
token = { file = "{{secret:tok}}" }
wait_s = 1
allow_insecure = true
consumer = "box"

[sources.gh]
action = "http:agent"

[destinations."http:agent"]
type = "http"
url = "https://agent.invalid/"
unsigned = true

[destinations."http:other"]
type = "http"
url = "https://other.invalid/"
unsigned = true
`;

const BIG = "12345678901234567890123";

async function upstream(): Promise<TestIntake> {
  return startIntake(UPSTREAM, { secrets: { laptop: TOKEN } });
}

/** `n` events over `keys` keys upstream, then sealed as its dispatcher would. */
async function burst(up: TestIntake, n: number, keys: number, source = "gh"): Promise<void> {
  const stores = sqliteStores(up.db, () => {});
  for (let i = 0; i < n; i++)
    await stores.intake().enqueueAll(
      [
        ev({
          source,
          key: `k${i % keys}`,
          eventType: "push",
          dedupId: i % 2 === 0 ? `gh-${i}` : null,
          payload: `{"i":${i},"big":${BIG}}`,
          copies: [copy("gh", "pull:laptop", { quiet_s: 0, max_s: 0, max_events: 2 })],
        }),
      ],
      up.clock.now(),
    );
  await seal(up);
}

async function seal(up: TestIntake): Promise<void> {
  const d = await sqliteStores(up.db, () => {}).dispatch("test");
  await d.sealReady(await d.effectiveNow());
}

/** A proxy before the upstream that answers 503 to leases or acks while they are closed. */
function gate(up: TestIntake, closed: { leases?: false; acks?: false }) {
  const open = { leases: closed.leases ?? true, acks: closed.acks ?? true };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (!(url.pathname.endsWith("/ack") ? open.acks : open.leases)) return new Response("", { status: 503 });
      return fetch(`${up.url}${url.pathname}${url.search}`, {
        method: "POST",
        headers: req.headers,
        body: await req.text(),
      });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, open, stop: () => server.stop(true) };
}

const rows = (t: TestIntake, sql: string) => t.db.db.query(sql).all() as Record<string, unknown>[];

describe("a pull source", () => {
  test("every leased event committed here as it was upstream, then acked; FIFO per key kept", async () => {
    const up = await upstream();
    const down = await startIntake(downstream(up.url), { secrets: { tok: TOKEN } });
    try {
      await burst(up, 20, 4);
      await waitFor(
        "12 batches delivered upstream (3 a key)",
        () => up.count("batches", "state = 'delivered'") === 12,
        20_000,
      );
      const got = rows(
        down,
        "SELECT e.source, b.key, e.event_type, e.dedup_id, e.payload FROM events e " +
          "JOIN batches b ON b.id = e.batch_id ORDER BY e.id",
      );
      expect(got.length).toBe(20);
      expect(new Set(got.map((r) => r.source))).toEqual(new Set(["gh"]));
      // The payload's bytes as stored upstream: the large number is not re-encoded.
      expect(got.every((r) => String(r.payload).includes(`"big":${BIG}`))).toBe(true);
      // Upstream's dedup ids kept; an event without one has an id that names it upstream.
      expect(got.filter((r) => String(r.dedup_id).startsWith("gh-")).length).toBe(10);
      expect(got.filter((r) => /^hs_[0-9A-Za-z]+_e\d+$/.test(String(r.dedup_id))).length).toBe(10);
      // Per key, the order they had upstream.
      for (let k = 0; k < 4; k++) {
        const order = got.filter((r) => r.key === `k${k}`).map((r) => JSON.parse(String(r.payload)).i);
        expect(order).toEqual([...order].sort((a, b) => a - b));
        expect(order.length).toBe(5);
      }
      // Routed here by github's own source (its action), not the pull source's.
      expect(rows(down, "SELECT DISTINCT destination FROM batches")).toEqual([{ destination: "http:agent" }]);
      expect(up.count("batches", "state <> 'delivered'")).toBe(0);
    } finally {
      await down.stop();
      await up.stop();
    }
  });

  test("a source this side does not have is routed by the pull source's own routes", async () => {
    const up = await upstream();
    const down = await startIntake(downstream(up.url), { secrets: { tok: TOKEN } });
    try {
      await burst(up, 2, 1, "zoom");
      await waitFor("2 events here", () => down.count("events") === 2, 20_000);
      expect(rows(down, "SELECT DISTINCT source FROM events")).toEqual([{ source: "zoom" }]);
      expect(rows(down, "SELECT DISTINCT destination FROM batches")).toEqual([{ destination: "http:other" }]);
    } finally {
      await down.stop();
      await up.stop();
    }
  });

  test("an ack lost until its lease ends: the batch comes again, a duplicate here", async () => {
    const up = await upstream();
    const proxy = gate(up, { acks: false });
    const down = await startIntake(downstream(proxy.url), { secrets: { tok: TOKEN } });
    try {
      await burst(up, 3, 3);
      await waitFor("3 events here", () => down.count("events") === 3, 20_000);
      expect(up.count("batches", "state = 'leased'")).toBe(3);
      // The leases end upstream and the batches are ready again.
      up.clock.advance(10 + 5 + 1);
      const d = await sqliteStores(up.db, () => {}).dispatch("test");
      expect((await d.recoverLeases({ now: await d.effectiveNow(), startup: false })).length).toBe(3);
      proxy.open.acks = true;
      await waitFor("3 batches delivered upstream", () => up.count("batches", "state = 'delivered'") === 3, 20_000);
      // Leased twice, committed here once.
      expect(down.count("events")).toBe(3);
      expect(up.count("attempts")).toBe(6);
    } finally {
      await down.stop();
      proxy.stop();
      await up.stop();
    }
  });

  test("an upstream that does not answer opens an issue past expect_every_s; its answer resolves it", async () => {
    const up = await upstream();
    const proxy = gate(up, { leases: false });
    const down = await startIntake(downstream(proxy.url), { secrets: { tok: TOKEN } });
    try {
      down.clock.advance(6);
      await waitFor(
        "the unreachable issue",
        () => down.count("issues", "fingerprint = 'pull_unreachable:office' AND state = 'open'") === 1,
        20_000,
      );
      const [issue] = rows(down, "SELECT kind, last_error FROM issues");
      expect(issue.kind).toBe("source_silent");
      expect(String(issue.last_error)).toContain("has not answered");
      expect(String(issue.last_error)).not.toContain(TOKEN);
      proxy.open.leases = true;
      await waitFor(
        "the issue resolved",
        () => down.count("issues", "fingerprint = 'pull_unreachable:office' AND state = 'resolved'") === 1,
        20_000,
      );
    } finally {
      await down.stop();
      proxy.stop();
      await up.stop();
    }
  });
});
