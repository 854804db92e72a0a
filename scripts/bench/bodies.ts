// Large bodies: 16 senders each POST a signed 25 MB body to `hookspool run` at once (rounds of
// 16), every body streamed to a file under <home>/bodies/ before its 202; the peak RSS of the
// process (VmHWM) must stay under 200 MB, with the acks' latency and the throughput beside it.
// The receiver takes each batch by reference (body_url), so delivery reads no body.
//
//   bun scripts/bench/bodies.ts        BENCH_BODIES_ROUNDS=n for more rounds (default 2)
import { createHmac } from "node:crypto";
import { SENDER_SECRET } from "./lib/payload.ts";
import { listeningPort, main, procKb, startHookspool } from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, percentile, table } from "./lib/report.ts";
import { BENCH_TEMPLATE, makeHome } from "./lib/homes.ts";

const SENDERS = 16;
const BODY_BYTES = 25 * 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_BODIES_ROUNDS ?? "2");
const RSS_LIMIT_MIB = 200;

/** A body of exactly BODY_BYTES (the source's cap), another id per sender and round: a new event and file each. */
function body(n: string): string {
  const head = JSON.stringify({ id: `big-${n}`, key: `k${n.length % 4}`, type: "big", pad: "" });
  return `${head.slice(0, -2)}${"z".repeat(BODY_BYTES - head.length)}"}`;
}

await main("bodies", 300, async () => {
  const rx = receiver();
  const home = await makeHome("bodies", {
    receiverPort: rx.port,
    noGithub: true,
    extra: `[sources.big]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
max_body_bytes = 26214400
action = "receiver"
`,
  });
  const run = await startHookspool("bodies-run", home, ["run"]);
  const port = await listeningPort(run);
  const lat: number[] = [];
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, procKb(run.proc.pid, "VmRSS"));
  }, 50);
  const t0 = performance.now();
  let seq = 0;
  for (let r = 0; r < ROUNDS; r++) {
    // Built and signed before the round, so the 16 requests start together.
    const texts = Array.from({ length: SENDERS }, (_, i) => body(`${i}-${r}`));
    await Promise.all(
      texts.map(async (text, i) => {
        const sig = `sha256=${createHmac("sha256", SENDER_SECRET).update(text).digest("hex")}`;
        const t = performance.now();
        const res = await fetch(`http://127.0.0.1:${port}/hooks/big`, {
          method: "POST",
          body: text,
          headers: { "X-Bench-Signature": sig },
        });
        await res.arrayBuffer();
        if (res.status !== 202) throw new Error(`body ${i} of round ${r}: ${res.status}`);
        lat.push(performance.now() - t);
        seq++;
      }),
    );
  }
  const elapsed = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const hwm = procKb(run.proc.pid, "VmHWM") / 1024;
  peak = Math.max(peak / 1024, hwm);
  lat.sort((a, b) => a - b);
  const cfg = { senders: SENDERS, body_bytes: BODY_BYTES, rounds: ROUNDS };
  emit("bodies", "peak_rss", peak, "MiB", { ...cfg, limit: RSS_LIMIT_MIB });
  emit("bodies", "ack_p50", percentile(lat, 0.5), "ms", cfg);
  emit("bodies", "ack_p99", percentile(lat, 0.99), "ms", cfg);
  emit("bodies", "throughput", (seq * BODY_BYTES) / (1024 * 1024) / elapsed, "MiB/s", cfg);
  table(
    "large bodies",
    ["figure", "value", "unit"],
    [
      ["peak RSS of run", peak, "MiB"],
      ["ack p50", percentile(lat, 0.5), "ms"],
      ["ack p99", percentile(lat, 0.99), "ms"],
      ["throughput", (seq * BODY_BYTES) / (1024 * 1024) / elapsed, "MiB/s"],
    ],
  );
  if (peak >= RSS_LIMIT_MIB) throw new Error(`peak RSS ${peak.toFixed(0)} MiB >= ${RSS_LIMIT_MIB} MiB`);
});
