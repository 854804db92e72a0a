// Coalescing: 1,000 events over 10 keys, sent as fast as 16 senders go, through `hookspool run`
// to a receiver that answers 200 at once, become exactly the deliveries the bounds dictate:
//
// - by size: max_events = 25 seals each key's 100 events into 4 batches of 25 (40 deliveries);
// - by quiet: max_events = 500 and quiet_s = 1 leave one batch per key, delivered once the key
//   has been quiet for a second (10 deliveries), as long as no sender pauses for a second.
//
// For each: deliveries and events per delivery against the bound, whether every key's events
// arrived in the order they were sent, and the dispatcher's wake-ups per event (its ticks, from
// /metrics), with the batches per claim and per outcome transaction.
//
//   bun scripts/bench/coalesce.ts     BENCH_BINARY=1
import { load } from "./lib/load.ts";
import { SENDER_SECRET } from "./lib/payload.ts";
import { listeningPort, main, startHookspool } from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, table } from "./lib/report.ts";
import { BENCH_TEMPLATE, makeHome } from "./lib/homes.ts";

const EVENTS = 1000;
const KEYS = 10;

const BODY = JSON.stringify({ id: "{{SEQ}}", key: "k{{KEY}}", type: "card.updated", text: "lorem ipsum ".repeat(20) });

interface Case {
  name: string;
  windows: string;
  expected: number;
  perDelivery: number;
}

const CASES: Case[] = [
  {
    name: "by size (max_events 25)",
    windows: "max_events = 25\nquiet_s = 30\nmax_s = 300",
    expected: (EVENTS / 25) | 0,
    perDelivery: 25,
  },
  {
    name: "by quiet (quiet_s 1)",
    windows: "max_events = 500\nquiet_s = 1\nmax_s = 300",
    expected: KEYS,
    perDelivery: EVENTS / KEYS,
  },
];

/** One counter of /metrics, summed over its label sets. */
async function counter(port: number, name: string, label?: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    if (label && !line.includes(label)) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

await main("coalesce", 120, async () => {
  const rows: (string | number)[][] = [];
  for (const c of CASES) {
    const rx = receiver();
    const home = await makeHome("coalesce", {
      receiverPort: rx.port,
      noGithub: true,
      extra: `[sources.burst]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
${c.windows}
action = "receiver"
`,
    });
    const run = await startHookspool("coalesce-run", home, ["run"]);
    const port = await listeningPort(run);
    const before = { wakeups: await counter(port, "hookspool_dispatcher_wakeups_total") };
    const r = await load(
      {
        url: `http://127.0.0.1:${port}/hooks/burst`,
        concurrency: 16,
        n: EVENTS,
        maxSeconds: 30,
        body: BODY,
        keys: KEYS,
        headers: {},
        sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
      },
      home,
    );
    if (r.ok !== EVENTS) throw new Error(`coalesce: ${r.ok} of ${EVENTS} accepted (${JSON.stringify(r.statuses)})`);
    const until = performance.now() + 20_000;
    while (rx.arrivals.reduce((n, a) => n + a.count, 0) < EVENTS && performance.now() < until) await Bun.sleep(10);
    // A second of nothing more, so an extra delivery (a split batch) would show.
    await Bun.sleep(c.name.startsWith("by quiet") ? 1500 : 500);
    const wakeups = (await counter(port, "hookspool_dispatcher_wakeups_total")) - before.wakeups;
    const claimCommits = await counter(port, "hookspool_dispatcher_commits_total", 'kind="claim"');
    const claims = await counter(port, "hookspool_dispatcher_batches_total", 'kind="claim"');
    const outcomeCommits = await counter(port, "hookspool_dispatcher_commits_total", 'kind="outcome"');
    const outcomes = await counter(port, "hookspool_dispatcher_batches_total", 'kind="outcome"');
    await run.stop();
    rx.stop();

    const deliveries = rx.arrivals.length;
    const events = rx.arrivals.reduce((n, a) => n + a.count, 0);
    const sizes = rx.arrivals.map((a) => a.count);
    const exact = deliveries === c.expected && sizes.every((n) => n === c.perDelivery) && events === EVENTS;
    // Per key, batch ids must rise in arrival order (FIFO per group).
    const lastByKey = new Map<string, number>();
    let inOrder = true;
    for (const a of rx.arrivals) {
      if ((lastByKey.get(a.key) ?? -1) > a.batchId) inOrder = false;
      lastByKey.set(a.key, a.batchId);
    }
    const config = { case: c.name, events: EVENTS, keys: KEYS, senders: 16, process: "hookspool run" };
    emit("coalesce", "deliveries", deliveries, "deliveries", { ...config, expected: c.expected });
    emit("coalesce", "events_per_delivery", events / Math.max(1, deliveries), "events", {
      ...config,
      expected: c.perDelivery,
    });
    emit("coalesce", "as_the_bounds_dictate", exact ? 1 : 0, "bool", config);
    emit("coalesce", "fifo_per_key", inOrder ? 1 : 0, "bool", config);
    emit("coalesce", "wakeups_per_event", wakeups / EVENTS, "wakeups", config);
    emit("coalesce", "batches_per_claim_commit", claims / Math.max(1, claimCommits), "batches", config);
    emit("coalesce", "batches_per_outcome_commit", outcomes / Math.max(1, outcomeCommits), "batches", config);
    rows.push([
      c.name,
      deliveries,
      c.expected,
      `${Math.min(...sizes)}-${Math.max(...sizes)}`,
      exact ? "yes" : "NO",
      inOrder ? "yes" : "NO",
      wakeups / EVENTS,
      claims / Math.max(1, claimCommits),
      outcomes / Math.max(1, outcomeCommits),
    ]);
  }
  table(
    `coalesce: ${EVENTS} events over ${KEYS} keys at 16 senders, hookspool run`,
    [
      "case",
      "deliveries",
      "expected",
      "events each",
      "exact",
      "FIFO per key",
      "wake-ups/event",
      "batches/claim tx",
      "batches/outcome tx",
    ],
    rows,
  );
});
