// Awaited outcomes at drain speed: a backlog of N single-event batches on N keys (posted through
// a real `hookspool intake`, each batch sealed in its enqueue), then `hookspool run` drains it to
// a local receiver, twice in the same run:
//
// - answer: the destination as today; the receiver answers 200 and the batch is delivered;
// - await: outcome = "await"; the receiver answers 202 and at once reports the run's outcome ok
//   on the intake's POST /outcomes/<webhook-id>, signed with the destination's secret, so every
//   batch costs a 2xx, an awaiting mark, a signed report and its settling transaction.
//
// Figures: each mode's drain time (run's spawn to the last batch delivered: the last 2xx, or the
// last outcome answered 200) and the ratio await / answer (the target is within 2x), the medians
// of ROUNDS interleaved pairs (a drain of a few seconds is at the mercy of a shared machine).
//
//   bun scripts/bench/outcomes.ts     BENCH_OUTCOMES_N (1000), BENCH_OUTCOMES_ROUNDS (3)
import { Webhook } from "standardwebhooks";
import { load } from "./lib/load.ts";
import { BENCH_TEMPLATE, makeHome } from "./lib/homes.ts";
import { DEST_SECRET, SENDER_SECRET } from "./lib/payload.ts";
import { hookspoolVerb, listeningPort, main, startHookspool } from "./lib/procs.ts";
import { emit, table } from "./lib/report.ts";

const N = Number(process.env.BENCH_OUTCOMES_N ?? 1000);
const ROUNDS = Number(process.env.BENCH_OUTCOMES_ROUNDS ?? 3);

const SOURCE = `[sources.backlog]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
max_events = 1
action = "receiver"
`;

const BODY = JSON.stringify({
  id: "{{SEQ}}",
  key: "k{{KEY}}",
  type: "ticket.updated",
  text: "lorem ipsum ".repeat(40),
});

/** The receiver: answers each delivery and, in await mode, reports its outcome to the intake. */
function agentReceiver(mode: "answer" | "await") {
  const wh = new Webhook(DEST_SECRET);
  const state = { intakePort: 0, done: 0, lastMs: 0, refused: 0 };
  const report = async (id: string) => {
    const body = JSON.stringify({ status: "ok" });
    const at = new Date();
    const res = await fetch(`http://127.0.0.1:${state.intakePort}/outcomes/${id}`, {
      method: "POST",
      body,
      headers: {
        "Content-Type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
        "webhook-signature": wh.sign(id, at, body),
      },
    });
    await res.arrayBuffer();
    if (res.status === 200) {
      state.done++;
      state.lastMs = performance.now();
    } else state.refused++;
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      await req.arrayBuffer();
      const id = req.headers.get("webhook-id") ?? "";
      if (mode === "answer") {
        state.done++;
        state.lastMs = performance.now();
        return new Response("ok");
      }
      // The run "ends" at once: its outcome goes after the 202.
      setTimeout(() => void report(id), 0);
      return new Response('{"status":"accepted"}', { status: 202 });
    },
  });
  return { state, port: server.port as number, stop: () => server.stop(true) };
}

async function drain(mode: "answer" | "await"): Promise<{ drainS: number; refused: number }> {
  const rx = agentReceiver(mode);
  try {
    const home = await makeHome(`outcomes-${mode}`, { receiverPort: rx.port, noGithub: true, extra: SOURCE });
    if (mode === "await") {
      // The destination table makeHome wrote, told to await outcomes.
      const file = `${home}/config.toml`;
      const text = await Bun.file(file).text();
      await Bun.write(
        file,
        text.replace(
          'secret = { file = "secrets/receiver" }',
          'secret = { file = "secrets/receiver" }\noutcome = "await"',
        ),
      );
    }
    const intake = await startHookspool(`outcomes-${mode}-intake`, home, ["intake"]);
    const r = await load(
      {
        url: `http://127.0.0.1:${await listeningPort(intake)}/hooks/backlog`,
        concurrency: 16,
        n: N,
        maxSeconds: 60,
        body: BODY,
        keys: N,
        headers: {},
        sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
      },
      home,
    );
    await intake.stop();
    if (r.ok !== N) throw new Error(`backlog: ${r.ok} of ${N} events accepted`);
    const sealed = (
      JSON.parse(
        await hookspoolVerb(home, ["--json", "list", "--state", "sealed", "--limit", String(N + 10)]),
      ) as unknown[]
    ).length;
    if (sealed !== N) throw new Error(`backlog: ${sealed} sealed batches, expected ${N}`);
    const t0 = performance.now();
    const run = await startHookspool(`outcomes-${mode}-run`, home, ["run"]);
    rx.state.intakePort = await listeningPort(run);
    const until = performance.now() + 120_000;
    while (rx.state.done < N) {
      if (performance.now() > until) throw new Error(`${mode}: ${rx.state.done} of ${N} delivered in 120 s`);
      await Bun.sleep(5);
    }
    const drainS = (rx.state.lastMs - t0) / 1000;
    await run.stop();
    return { drainS, refused: rx.state.refused };
  } finally {
    rx.stop();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

await main("outcomes", 900, async () => {
  // Rounds interleaved, so a slow moment of a shared machine falls on both modes alike; each
  // round's ratio is one pair's, and the figure is the median pair.
  const pairs: { answer: number; awaited: number; refused: number }[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const answer = await drain("answer");
    const awaited = await drain("await");
    pairs.push({ answer: answer.drainS, awaited: awaited.drainS, refused: awaited.refused });
  }
  const answerS = median(pairs.map((p) => p.answer));
  const awaitS = median(pairs.map((p) => p.awaited));
  const ratio = median(pairs.map((p) => p.awaited / p.answer));
  emit("outcomes", "drain_s", answerS, "s", { n: N, outcome: "answer", rounds: ROUNDS });
  emit("outcomes", "drain_s", awaitS, "s", { n: N, outcome: "await", rounds: ROUNDS });
  emit("outcomes", "await_vs_answer", ratio, "x", {
    n: N,
    target: 2,
    rounds: ROUNDS,
    pairs: pairs.map((p) => (p.awaited / p.answer).toFixed(2)).join(" "),
  });
  emit(
    "outcomes",
    "refused_reports",
    pairs.reduce((a, p) => a + p.refused, 0),
    "count",
    { n: N, rounds: ROUNDS },
  );
  table(
    `awaited outcomes: ${N} batches drained by hookspool run (median of ${ROUNDS} rounds)`,
    ["mode", "drain s", "batches/s"],
    [
      ["answer (200 ends the batch)", answerS.toFixed(2), (N / answerS).toFixed(0)],
      ["await (202, then a signed outcome)", awaitS.toFixed(2), (N / awaitS).toFixed(0)],
      ["await / answer (median pair)", ratio.toFixed(2), ""],
    ],
  );
});
