// sec.edgar: a poll bobbin for a company's EDGAR Atom feed. End to end through a real
// `hookspool run` whose feed is a stub EDGAR on 127.0.0.1 (base_url): three ticks, a clock moved
// an hour between restarts; then the poller's own decisions (the baseline, the forms filter, the
// seen-list, the refused settings) with a small fake context.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { type PollCapture, pollCapturesOf } from "../../src/bobbin/captures.ts";
import type { Context, Item } from "../../src/plugin/processor.ts";
import { Permanent, Retryable } from "../../src/plugin/types.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import poller, {
  baseOf,
  cikOf,
  type EdgarSettings,
  feedUrl,
  SEEN,
  userAgentProblem,
} from "../../bobbins/sec/edgar/poller.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, kitOf } from "./catalogue.ts";

const bobbin = builtin("sec.edgar");
const kit = kitOf(bobbin);
const UA = String(kit.instance.settings.user_agent);
const captures = new Map(
  pollCapturesOf(bobbin.files()).map((c) => [c.file.replace(/^captures\/poll-|\.json$/g, ""), c]),
);
const capture = (name: string): PollCapture => {
  const c = captures.get(name);
  if (!c) throw new Error(`no captures/poll-${name}.json`);
  return c;
};
const stubOf = (name: string) => {
  const h = capture(name).http[0];
  if (!h) throw new Error(`poll-${name}.json has no http answer`);
  return { status: h.status ?? 200, body: h.body ?? "", headers: h.headers ?? {} };
};
const NEW_10Q = "0000320193-25-000008";
/** The items a capture says its tick returns. */
const itemsOf = (name: string): Item[] => (capture(name).items ?? []) as Item[];

describe("through a real hookspool run", () => {
  test("a baseline tick, a tick with one new filing, a 304: one filing delivered, every request " +
    "declared and conditional", async () => {
    const first = stubOf("first");
    const later = stubOf("new");
    type Asked = {
      path: string;
      query: Record<string, string>;
      ua: string | null;
      ifNoneMatch: string | null;
      ifModifiedSince: string | null;
      answered?: number;
    };
    const seen: Asked[] = [];
    const stub = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const u = new URL(req.url);
        const r: Asked = {
          path: u.pathname,
          query: Object.fromEntries(u.searchParams),
          ua: req.headers.get("user-agent"),
          ifNoneMatch: req.headers.get("if-none-match"),
          ifModifiedSince: req.headers.get("if-modified-since"),
        };
        seen.push(r);
        const answer = seen.length === 1 ? first : seen.length === 2 ? later : null;
        // After the second answer nothing changes: SEC's 304 to a conditional GET with its ETag.
        const notModified = !answer && r.ifNoneMatch === later.headers.etag;
        r.answered = notModified ? 304 : 200;
        if (notModified) return new Response(null, { status: 304, headers: { etag: later.headers.etag ?? "" } });
        const a = answer ?? later;
        return new Response(a.body, { status: 200, headers: a.headers });
      },
    });
    const receiver = new Receiver<{
      route: string;
      key: string;
      events: {
        key: string;
        cik: string;
        accession: string;
        form: string;
        filed: string;
        title: string;
        link: string;
      }[];
    }>({});
    // A home of its own, not the shared run (catalogue.ts), which serves no poll bobbin: this one
    // is started three times on clocks an hour apart, its base_url names this test's stub EDGAR.
    const home = tempDir("hookspool-edgar-");
    writeFileSync(
      join(home, "config.toml"),
      stringify({
        intake: { listen: "127.0.0.1:0" },
        dispatch: { poll_s: 0.05, heartbeat_s: 1 },
        bobbins: {
          edgar: {
            bobbin: "sec.edgar",
            settings: {
              cik: "320193",
              user_agent: UA,
              forms: ["8-K", "10-K", "10-Q"],
              base_url: `http://127.0.0.1:${stub.port}`,
            },
            outputs: { filing: "receiver" },
            // The first tick at once; the next ones an hour apart, reached by moving the clock.
            jitter_s: 0,
          },
        },
        destinations: {
          receiver: {
            type: "http",
            url: `http://127.0.0.1:${receiver.port}/in`,
            allow_insecure: true,
            unsigned: true,
            timeout_s: 5,
          },
        },
      }),
    );
    const finishedTicks = () => {
      const db = openSpool(join(home, "spool.db"));
      try {
        const row = db.db.query("SELECT last_tick_at, delivered_tick_at FROM polls WHERE instance = 'edgar'").get() as {
          last_tick_at: number | null;
          delivered_tick_at: number | null;
        } | null;
        return row?.last_tick_at != null && row.delivered_tick_at === row.last_tick_at ? row.last_tick_at : null;
      } finally {
        db.close();
      }
    };
    /** One run of hookspool on a clock `offset` seconds ahead: until its tick made request `n` and finished. */
    const tick = async (offset: number, n: number, filings: number) => {
      // Read before the process starts: its tick may finish before it is looked at.
      const before = n === 1 ? null : finishedTicks();
      const hs = await startHookspool(home, ["run"], { env: { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(offset) } });
      try {
        await hs.port();
        await waitFor(`request ${n} to the stub`, () => seen.length >= n, 20_000);
        await waitFor(
          `tick ${n} finished`,
          () => {
            const t = finishedTicks();
            return t !== null && t !== before;
          },
          20_000,
        );
        await waitFor(`${filings} filing(s) delivered`, () => receiver.accepted().length === filings, 20_000);
      } finally {
        hs.kill("SIGTERM");
        await hs.exited;
      }
    };
    try {
      await tick(0, 1, 0); // the baseline: the feed's four filings recorded, none delivered
      await tick(3700, 2, 1); // an hour on: the new 10-Q
      await tick(7400, 3, 1); // an hour more: 304, nothing new
    } finally {
      stub.stop(true);
      receiver.stop();
    }
    expect(seen.length).toBe(3);
    for (const r of seen) {
      expect(r.path).toBe("/cgi-bin/browse-edgar");
      expect(r.query).toEqual({
        action: "getcompany",
        CIK: "0000320193",
        type: "",
        dateb: "",
        owner: "include",
        count: "40",
        output: "atom",
      });
      expect(r.ua).toBe(UA);
    }
    expect([seen[0]?.ifNoneMatch, seen[0]?.ifModifiedSince]).toEqual([null, null]);
    expect([seen[1]?.ifNoneMatch, seen[1]?.ifModifiedSince]).toEqual([
      first.headers.etag ?? null,
      first.headers["last-modified"] ?? null,
    ]);
    expect(seen[2]?.ifNoneMatch).toBe(later.headers.etag ?? null);
    expect(seen.map((r) => r.answered)).toEqual([200, 200, 304]);
    const got = receiver.accepted().map((d) => d.doc);
    expect(got.map((d) => [d.route, d.key, d.events.length])).toEqual([["edgar-filing", "0000320193", 1]]);
    expect(got[0]?.events[0]).toEqual({
      key: "0000320193",
      cik: "0000320193",
      accession: NEW_10Q,
      form: "10-Q",
      filed: "2025-01-31",
      title: "10-Q - Quarterly report [Sections 13 or 15(d)]",
      link: `https://www.sec.gov/Archives/edgar/data/320193/000032019325000008/${NEW_10Q}-index.htm`,
    });
  }, 90_000);
});

// ---------------------------------------------------------------------------------------------
// The poller's decisions, with a fake context.

interface Answer {
  status: 200 | 304;
  text: string;
  headers: Record<string, string>;
}

const answerOf = (name: string): Answer => {
  const s = stubOf(name);
  return { status: s.status === 304 ? 304 : 200, text: s.body, headers: s.headers };
};

function fake(settings: Partial<EdgarSettings>, state = new Map<string, unknown>()) {
  const calls: { url: string; headers: Record<string, string>; etag?: string; lastModified?: string }[] = [];
  const answers: Answer[] = [];
  const paced: number[] = [];
  const logs: string[] = [];
  const refuse = async (): Promise<never> => {
    throw new Error("the poller makes only conditional GETs");
  };
  const ctx: Context<EdgarSettings> = {
    settings: {
      cik: "320193",
      user_agent: UA,
      forms: [],
      announce_existing: false,
      base_url: "https://www.sec.gov",
      ...settings,
    },
    secret: refuse,
    http: {
      request: refuse,
      getJson: refuse,
      postJson: refuse,
      postForm: refuse,
      async getText(url, opts = {}) {
        calls.push({
          url,
          headers: opts.headers ?? {},
          ...(opts.etag !== undefined ? { etag: opts.etag } : {}),
          ...(opts.lastModified !== undefined ? { lastModified: opts.lastModified } : {}),
        });
        const a = answers.shift();
        if (!a) throw new Error("no answer left");
        return a;
      },
    },
    oauth: () => {
      throw new Error("no oauth");
    },
    loadState: <T>(name: string, fallback: T): T =>
      state.has(name) ? (structuredClone(state.get(name)) as T) : fallback,
    saveState: (name, value) => {
      state.set(name, JSON.parse(JSON.stringify(value)));
    },
    hooks: null,
    log: (line) => {
      logs.push(line);
    },
    now: () => kit.now ?? 0,
    failPermanent: (reason): never => {
      throw new Permanent(reason);
    },
    pace: (perSec) => {
      paced.push(perSec);
      return { wait: async () => {} };
    },
  };
  const tick = async (a: Answer): Promise<Item[]> => {
    answers.push(a);
    return poller.poll(
      { id: 1, deliveryId: "d", source: "edgar", key: "poll", events: [{ tick: 0, instance: "edgar" }], doc: {} },
      ctx,
    );
  };
  return { ctx, tick, calls, paced, logs, state };
}

const accessionsOf = (items: Item[]) => items.map((i) => i.accession);
const KEPT = ["8-K", "10-K", "10-Q"];

/** A feed of the given entries, in EDGAR's shape (id, category, summary, title, link, updated). */
function feedOf(entries: { acc: string; form: string; filed?: string; id?: string }[]): Answer {
  const body = entries
    .map((e) => {
      const link = `https://www.sec.gov/Archives/edgar/data/320193/${e.acc.replaceAll("-", "")}/${e.acc}-index.htm`;
      const filed = e.filed ?? "2025-02-03";
      return (
        `<entry><category label="form type" scheme="https://www.sec.gov/" term="${e.form}" ` +
        `/><id>${e.id ?? `urn:tag:sec.gov,2008:accession-number=${e.acc}`}</id><link href="${link}" ` +
        `rel="alternate" type="text/html" /><summary type="html"> ` +
        `&lt;b&gt;Filed:&lt;/b&gt; ${filed} &lt;b&gt;AccNo:&lt;/b&gt; ${e.acc}</summary>` +
        `<title>${e.form}  - A filing</title><updated>${filed}T16:05:00-05:00</updated></entry>`
      );
    })
    .join("\n");
  return {
    status: 200,
    text:
      `<?xml version="1.0" encoding="ISO-8859-1" ?>\n<feed ` +
      `xmlns="http://www.w3.org/2005/Atom">\n${body}\n<title>Apple Inc.  (0000320193)</title>\n` +
      `</feed>\n`,
    headers: { "content-type": "application/atom+xml" },
  };
}

describe("the first tick", () => {
  test(
    "is a baseline by default: every listed filing recorded, none emitted; the next tick emits " + "only the new one",
    async () => {
      const f = fake({ forms: KEPT });
      expect(await f.tick(answerOf("first"))).toEqual([]);
      const seen = f.state.get("seen") as { accessions: string[] };
      // The Form 4 the forms filter drops is recorded too.
      expect(seen.accessions).toEqual([
        "0000320193-24-000135",
        "0001140361-24-049822",
        "0000320193-24-000123",
        "0000320193-24-000120",
      ]);
      expect(f.logs.at(-1)).toContain("recorded as the baseline");
      const items = await f.tick(answerOf("new"));
      expect(items).toEqual(itemsOf("new").filter((i) => i.accession === NEW_10Q));
      expect(items).toHaveLength(1);
      expect((f.state.get("seen") as { accessions: string[] }).accessions[0]).toBe(NEW_10Q);
    },
  );

  test(
    "with announce_existing emits the kept filings, newest first, as poll-first.json says; then " + "only what is new",
    async () => {
      const f = fake({ forms: KEPT, announce_existing: true });
      const items = await f.tick(answerOf("first"));
      expect(items).toEqual(itemsOf("first"));
      expect(accessionsOf(items)).toEqual(["0000320193-24-000135", "0000320193-24-000123", "0000320193-24-000120"]);
      expect(accessionsOf(await f.tick(answerOf("new")))).toEqual([NEW_10Q]);
    },
  );

  test("each poll capture alone, with the kit's settings, gives its items", async () => {
    for (const name of captures.keys()) {
      const f = fake(kit.instance.settings as Partial<EdgarSettings>);
      expect({ name, items: await f.tick(answerOf(name)) }).toEqual({ name, items: itemsOf(name) });
    }
  });

  test("a changed cik is a new feed: a new baseline, not 40 old filings announced", async () => {
    const f = fake({});
    await f.tick(answerOf("first"));
    const other = fake({ cik: "789019" }, f.state);
    expect(
      await other.tick(
        feedOf([
          { acc: "0000950170-25-010101", form: "10-Q" },
          { acc: "0000950170-25-000202", form: "8-K" },
        ]),
      ),
    ).toEqual([]);
    expect(other.calls[0]?.url).toContain("CIK=0000789019");
    // The ETag of another URL is not sent.
    expect(other.calls[0]?.etag).toBeUndefined();
    expect(other.logs.at(-1)).toContain("recorded as the baseline");
  });
});

describe("the request", () => {
  test(
    "one conditional GET per tick, paced at 5 a second, with the User-Agent; a 304 emits nothing " +
      "and keeps the state",
    async () => {
      const f = fake({ forms: KEPT });
      await f.tick(answerOf("first"));
      const before = structuredClone([...f.state.entries()]);
      expect(await f.tick(answerOf("unchanged"))).toEqual([]);
      expect([...f.state.entries()]).toEqual(before);
      const first = stubOf("first").headers;
      expect(f.calls).toEqual([
        {
          url:
            "https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&CIK=0000320193&type=&dateb=&" +
            "owner=include&count=40&output=atom",
          headers: { "User-Agent": UA, Accept: "application/atom+xml" },
        },
        {
          url:
            "https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&CIK=0000320193&type=&dateb=&" +
            "owner=include&count=40&output=atom",
          headers: { "User-Agent": UA, Accept: "application/atom+xml" },
          etag: first.etag ?? "",
          lastModified: first["last-modified"] ?? "",
        },
      ]);
      expect(f.paced).toEqual([5, 5]);
    },
  );

  test(
    "an answer that is not the feed (SEC's page for an undeclared tool) retries the tick and " + "changes no state",
    async () => {
      const f = fake({});
      await expect(
        f.tick({
          status: 200,
          text: "<!DOCTYPE html><html><body>Your Request Originates from an Undeclared Automated Tool</body></html>",
          headers: { "content-type": "text/html" },
        }),
      ).rejects.toBeInstanceOf(Retryable);
      expect(f.state.size).toBe(0);
    },
  );

  test("refused settings fail the tick for good, before any request", async () => {
    const cases: [Partial<EdgarSettings>, RegExp][] = [
      [{ cik: "AAPL" }, /cik is not a CIK/],
      [{ cik: "12345678901" }, /cik is not a CIK/],
      [{ user_agent: "" }, /user_agent is required/],
      [{ user_agent: "Mozilla/5.0 (compatible; hookspool)" }, /no contact e-mail/],
      [{ user_agent: "edgar-alerts@example.com" }, /no name beside/],
      [{ user_agent: "Example Desk edgar-alerts@example.com\r\nX-Injected: 1" }, /control character/],
      [{ base_url: "http://www.sec.gov" }, /base_url must be https/],
      [{ base_url: "http://10.0.0.5:8080" }, /base_url must be https/],
      [{ base_url: "ftp://127.0.0.1" }, /base_url must be https/],
      [{ base_url: "https://user:pw@www.sec.gov" }, /base_url must be https/],
      [{ base_url: "https://www.sec.gov/?x=1" }, /base_url must be https/],
    ];
    for (const [settings, why] of cases) {
      const f = fake(settings);
      let err: unknown;
      try {
        await f.tick(answerOf("first"));
      } catch (e) {
        err = e;
      }
      expect({ settings, permanent: err instanceof Permanent, message: (err as Error | undefined)?.message }).toEqual({
        settings,
        permanent: true,
        message: expect.stringMatching(why),
      });
      expect(f.calls).toEqual([]);
    }
  });

  test("what the settings accept", () => {
    expect([cikOf("320193"), cikOf(" 0000320193 "), cikOf("1")]).toEqual(["0000320193", "0000320193", "0000000001"]);
    expect(userAgentProblem("Example Research Desk edgar-alerts@example.com")).toBeNull();
    expect([
      baseOf(""),
      baseOf("https://www.sec.gov/"),
      baseOf("http://localhost:8080/"),
      baseOf("http://127.0.0.1:9/edgar/"),
      baseOf("https://edgar-mirror.example.org/sec"),
    ]).toEqual([
      "https://www.sec.gov",
      "https://www.sec.gov",
      "http://localhost:8080",
      "http://127.0.0.1:9/edgar",
      "https://edgar-mirror.example.org/sec",
    ]);
    expect(feedUrl("https://www.sec.gov", "0000320193", ["SC 13G/A"])).toContain("&type=SC%2013G%2FA&");
  });
});

describe("forms", () => {
  const feed = feedOf([
    { acc: "0000320193-25-000031", form: "10-K/A" },
    { acc: "0000320193-25-000030", form: "8-K" },
    { acc: "0001140361-25-004411", form: "4" },
    { acc: "0000320193-25-000029", form: "10-K" },
  ]);

  test("keeps exactly the listed form types, case-insensitively; an amendment is a form of its own", async () => {
    const f = fake({ forms: ["10-k", "8-K", "4"], announce_existing: true });
    expect(accessionsOf(await f.tick(feed))).toEqual([
      "0000320193-25-000030",
      "0001140361-25-004411",
      "0000320193-25-000029",
    ]);
    expect(f.calls[0]?.url).toContain("&type=&");
  });

  test("one form narrows the feed to that type, and the exact filter still applies", async () => {
    const f = fake({ forms: ["10-K"], announce_existing: true });
    expect(accessionsOf(await f.tick(feed))).toEqual(["0000320193-25-000029"]);
    expect(f.calls[0]?.url).toContain("&type=10-K&");
  });

  test("empty keeps every form", async () => {
    const f = fake({ announce_existing: true });
    expect(accessionsOf(await f.tick(feed))).toHaveLength(4);
  });

  test("a filtered-out filing is still seen: adding its form later does not announce it", async () => {
    const state = new Map<string, unknown>();
    const f = fake({ forms: ["8-K", "10-K"] }, state);
    await f.tick(feed);
    const g = fake({ forms: ["8-K", "10-K", "4"] }, state);
    expect(await g.tick(feed)).toEqual([]);
    expect(g.logs.at(-1)).not.toContain("baseline");
  });
});

describe("the seen-list", () => {
  test("holds the newest 500 accession numbers, the new ones first", async () => {
    const old = Array.from({ length: SEEN }, (_, i) => `0000320193-20-${String(i).padStart(6, "0")}`);
    const url = feedUrl("https://www.sec.gov", "0000320193", []);
    const state = new Map<string, unknown>([["seen", { feed: url, accessions: old }]]);
    const f = fake({}, state);
    const fresh = Array.from({ length: 40 }, (_, i) => `0000320193-25-${String(100 + i).padStart(6, "0")}`);
    const items = await f.tick(feedOf(fresh.map((acc) => ({ acc, form: "8-K" }))));
    expect(accessionsOf(items)).toEqual(fresh);
    const seen = (state.get("seen") as { accessions: string[] }).accessions;
    expect(seen).toHaveLength(SEEN);
    expect(seen.slice(0, 40)).toEqual(fresh);
    expect(seen.slice(40)).toEqual(old.slice(0, SEEN - 40));
  });

  test("an entry without an accession number is skipped; one listed twice is one filing", async () => {
    const f = fake({ announce_existing: true });
    const items = await f.tick(
      feedOf([
        { acc: "0000320193-25-000040", form: "8-K" },
        { acc: "0000320193-25-000040", form: "8-K" },
        { acc: "not-an-accession", form: "8-K", id: "urn:example:entry" },
      ]),
    );
    expect(accessionsOf(items)).toEqual(["0000320193-25-000040"]);
    expect(f.logs.at(-1)).toContain("1 without an accession number");
  });

  test("the filing date comes from the summary, else from updated", async () => {
    const f = fake({ announce_existing: true });
    const [item] = await f.tick(feedOf([{ acc: "0000320193-25-000041", form: "8-K", filed: "2025-02-04" }]));
    expect(item).toMatchObject({
      filed: "2025-02-04",
      form: "8-K",
      title: "8-K - A filing",
      key: "0000320193",
      cik: "0000320193",
    });
  });
});
