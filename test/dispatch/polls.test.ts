// The poll clock in the dispatcher's loop: a new instance is scheduled at a jittered first tick;
// a due one gets one tick event (never a burst after a long stop); a due one whose last tick is
// unfinished is skipped; the tick's delivery is recorded as the instance's last delivered tick;
// a shortened every_s reschedules.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { seededRng } from "../../src/clock.ts";
import { type ConfigError, parseConfig } from "../../src/config/load.ts";
import { outcome } from "../../src/delivery.ts";
import { stepPolls } from "../../src/dispatch/polls.ts";
import { manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { fakeDestination, rigOn } from "../helpers/dispatch.ts";
import { tempDir } from "../helpers/tmp.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const POLL = `
[poll]
every_s = 600
jitter_s = 60
module = "poller"
`;

async function pollRig(open: OpenWorld) {
  const root = tempDir("hookspool-polls-");
  const manifest = manifestText("acme.feed", `${POLL}\n[outputs.filing]\ndescription = "a new filing"\n`)
    .replace(/\[source\][\s\S]*?\n\n/, "")
    .replace(/\[outputs\."\*"\]\ndescription = "every accepted event"\n/, "");
  writeBobbin(root, "acme/feed", manifest, { "poller.ts": "export default { poll: () => [] };\n" });
  const script = fakeDestination("script:feed", { type: "script" });
  const r = await rigOn(
    open,
    `[spool]\nbobbin_path = ["${root}"]\n\n[bobbins.feed]\nbobbin = "acme.feed"\n` +
      'secrets.secret = { file = "/etc/hookspool/secrets/feed" }\noutputs = { filing = "hermes:filings" }\n',
    [script, fakeDestination("hermes:filings")],
  );
  const row = async () =>
    (await r.world.rows.get("SELECT * FROM polls WHERE instance = 'feed'")) as {
      next_at: number;
      last_tick_at: number | null;
      last_batch_id: number | null;
      delivered_at: number | null;
      delivered_tick_at: number | null;
      skipped: number;
      created_at: number;
    } | null;
  const ticks = async () =>
    (await r.world.rows.all(
      "SELECT e.dedup_id, e.payload, b.route, b.destination, b.state FROM events e " +
        "JOIN batches b ON b.id = e.batch_id WHERE e.source = 'feed' ORDER BY e.id",
    )) as { dedup_id: string; payload: string; route: string; destination: string; state: string }[];
  return { r, script, row, ticks };
}

onBothWorlds((open) => {
  describe("the poll clock", () => {
    test("a new instance is first scheduled within its jitter, not at once", async () => {
      const { r, row, ticks } = await pollRig(open);
      expect(r.config.sources.feed).toMatchObject({
        kind: "poll",
        every_s: 600,
        jitter_s: 60,
        span: "immediate",
        action: "script:feed",
      });
      await r.step();
      const p = await row();
      expect(p?.created_at).toBe(r.t0);
      expect(p?.next_at).toBeGreaterThanOrEqual(r.t0);
      expect(p?.next_at).toBeLessThanOrEqual(r.t0 + 60);
      expect(await ticks()).toEqual([]);
    });

    test(
      "a due instance gets one tick event, delivered to its" + " processor, recorded as its last delivered tick",
      async () => {
        const { r, row, ticks } = await pollRig(open);
        await r.step();
        const first = (await row())?.next_at ?? 0;
        r.clock.set(first + 1);
        await r.step();
        expect(await ticks()).toEqual([
          {
            dedup_id: `poll:feed:${first}`,
            payload: JSON.stringify({ tick: Math.floor(first), instance: "feed" }),
            route: "feed",
            destination: "script:feed",
            state: "delivered",
          },
        ]);
        const p = await row();
        expect(p).toMatchObject({ last_tick_at: first, delivered_tick_at: first, delivered_at: first + 1, skipped: 0 });
        expect(p?.next_at).toBeGreaterThanOrEqual(first + 1 + 600);
        expect(p?.next_at).toBeLessThanOrEqual(first + 1 + 660);
      },
    );

    test("after a long stop, one tick, never a burst", async () => {
      const { r, row, ticks } = await pollRig(open);
      await r.step();
      r.clock.set(((await row())?.next_at ?? 0) + 10 * 600);
      await r.step();
      await r.step();
      expect((await ticks()).length).toBe(1);
    });

    test("while the last tick's batch is unfinished, a due instance is skipped: only next_at moves", async () => {
      const { r, script, row, ticks } = await pollRig(open);
      script.answer = () => outcome({ kind: "retry", klass: "batch", reason: "exit 75", status: 75 });
      await r.step();
      r.clock.set(((await row())?.next_at ?? 0) + 1);
      await r.step();
      expect((await ticks()).map((t) => t.state)).toEqual(["retry"]);
      const before = await row();
      r.clock.set((before?.next_at ?? 0) + 1);
      await r.step();
      expect((await ticks()).length).toBe(1);
      expect(await row()).toMatchObject({ skipped: 1, last_batch_id: before?.last_batch_id });
      expect((await row())?.next_at).toBeGreaterThan(before?.next_at ?? 0);
    });

    test("a shortened every_s reschedules an instance scheduled further out", async () => {
      const { r, row } = await pollRig(open);
      await r.step();
      await r.world.rows.run("UPDATE polls SET next_at = ? WHERE instance = 'feed'", r.t0 + 86400);
      const steps = await stepPolls(r.store, r.config, r.t0, seededRng(1), () => {});
      expect(steps.get("feed")).toBe("rescheduled");
      expect((await row())?.next_at).toBeLessThanOrEqual(r.t0 + 660);
    });

    test("a poll instance takes no window, expect or body key, and its every_s is at least 60", () => {
      const root = tempDir("hookspool-polls-");
      writeBobbin(
        root,
        "acme/feed",
        manifestText("acme.feed", `${POLL}\n[outputs.filing]\ndescription = "f"\n`)
          .replace(/\[source\][\s\S]*?\n\n/, "")
          .replace(/\[outputs\."\*"\]\ndescription = "every accepted event"\n/, ""),
        { "poller.ts": "export default { poll: () => [] };\n" },
      );
      let problems: { key: string; level: string }[] = [];
      try {
        parseConfig(
          `[spool]\nbobbin_path = ["${root}"]\n\n[bobbins.feed]\nbobbin = "acme.feed"\n` +
            'secrets.secret = { file = "/etc/hookspool/secrets/feed" }\noutputs = { filing = "hermes:f" }\n' +
            "quiet_s = 5\nexpect = true\nevery_s = 30\n",
          join(root, "c.toml"),
        );
      } catch (e) {
        problems = (e as ConfigError).problems;
      }
      expect(
        problems
          .filter((p) => p.level === "error")
          .map((p) => p.key)
          .sort(),
      ).toEqual(["bobbins.feed.every_s", "bobbins.feed.expect", "bobbins.feed.quiet_s"]);
    });
  });
});

test("a hand-written poll source is a warning at run time and an error for check", () => {
  const text = '[sources.feed]\nkind = "poll"\nevery_s = 600\naction = "hermes:x"\n';
  const { problems } = parseConfig(text, "/etc/hookspool/config.toml");
  expect(problems.map((p) => [p.level, p.key])).toEqual([
    ["warning", "sources.feed.kind"],
    ["warning", "sources.feed.every_s"],
  ]);
  let keys: string[] = [];
  try {
    parseConfig(text, "/etc/hookspool/config.toml", { strict: true });
  } catch (e) {
    keys = (e as ConfigError).problems.map((p) => p.key);
  }
  expect(keys).toEqual(["sources.feed.kind", "sources.feed.every_s"]);
});
