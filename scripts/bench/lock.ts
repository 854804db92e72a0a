// A held write lock: another process takes the spool's write lock (BEGIN IMMEDIATE) for 30 s
// while `hookspool run` takes requests, as a long `prune --vacuum` or a `sqlite3` shell would.
// Measured throughout the hold: /healthz's latency (p50, p99, max), and a signed push every
// second, each answered 503 (with Retry-After) after about busy_timeout_s; after the release,
// pushes are acked again. The baseline is the same /healthz with no lock held, in the same run.
//
//   bun scripts/bench/lock.ts     BENCH_LOCK_S (30), BENCH_BUSY_TIMEOUT_S (10)
import { createHmac, randomUUID } from "node:crypto";
import { join } from "node:path";
import { SENDER_SECRET, githubPush } from "./lib/payload.ts";
import { listeningPort, main, ROOT, startHookspool } from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, percentile, table } from "./lib/report.ts";
import { makeHome } from "./lib/homes.ts";

const HOLD_S = Number(process.env.BENCH_LOCK_S ?? 30);
const BUSY_TIMEOUT_S = Number(process.env.BENCH_BUSY_TIMEOUT_S ?? 10);
const HOLDER = join(ROOT, "test", "helpers", "children", "lock-holder.ts");

await main("lock", HOLD_S + BUSY_TIMEOUT_S + 90, async () => {
  const rx = receiver();
  const home = await makeHome("lock", { receiverPort: rx.port, extra: "" });
  // The intake's busy timeout, set in the [intake] table makeHome writes.
  const config = join(home, "config.toml");
  const text = await Bun.file(config).text();
  await Bun.write(config, text.replace("[intake]\n", `[intake]\nbusy_timeout_s = ${BUSY_TIMEOUT_S}\n`));
  const run = await startHookspool("hookspool-run", home, ["run"]);
  const base = `http://127.0.0.1:${await listeningPort(run)}`;
  const body = githubPush();
  let seq = 0;
  const push = async () => {
    const b = body.replaceAll("{{SEQ}}", String(++seq).padStart(40, "0"));
    const t0 = performance.now();
    const res = await fetch(`${base}/hooks/github`, {
      method: "POST",
      body: b,
      headers: {
        "User-Agent": "GitHub-Hookshot/bench",
        "X-GitHub-Event": "push",
        "X-GitHub-Hook-ID": "512340001",
        "X-GitHub-Delivery": randomUUID(),
        "X-Hub-Signature-256": `sha256=${createHmac("sha256", SENDER_SECRET).update(b).digest("hex")}`,
      },
      signal: AbortSignal.timeout((BUSY_TIMEOUT_S + 20) * 1000),
    });
    await res.arrayBuffer();
    return { status: res.status, retryAfter: res.headers.get("retry-after"), ms: performance.now() - t0 };
  };
  const healthz = async (until: () => boolean) => {
    const xs: number[] = [];
    while (!until()) {
      const t0 = performance.now();
      const res = await fetch(`${base}/healthz`, { keepalive: false });
      await res.arrayBuffer();
      xs.push(performance.now() - t0);
      await Bun.sleep(20);
    }
    return xs.sort((a, b) => a - b);
  };
  if ((await push()).status !== 202) throw new Error("the first push was not acked");

  // Baseline: /healthz with no lock held, for as long as a tenth of the hold.
  const freeEnd = performance.now() + (HOLD_S * 1000) / 10;
  const free = await healthz(() => performance.now() > freeEnd);

  // Its stdin stays open (a pipe): it lets go when the hold ends, or at once if this bench dies.
  const holder = Bun.spawn([process.execPath, HOLDER, join(home, "spool.db"), String(HOLD_S)], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  const first = await (holder.stdout as ReadableStream<Uint8Array>).getReader().read();
  if (!new TextDecoder().decode(first.value).includes("held")) throw new Error("the lock holder did not take the lock");
  const heldAt = performance.now();
  const released = () => holder.exitCode !== null;
  const pushes: Awaited<ReturnType<typeof push>>[] = [];
  const [locked] = await Promise.all([
    healthz(released),
    (async () => {
      // A push a second (each waiting on its own), as long as its whole wait ends inside the hold.
      const sent: Promise<Awaited<ReturnType<typeof push>>>[] = [];
      while (performance.now() - heldAt < (HOLD_S - BUSY_TIMEOUT_S - 1) * 1000) {
        sent.push(push());
        await Bun.sleep(1000);
      }
      pushes.push(...(await Promise.all(sent)));
    })(),
  ]);
  await holder.exited;
  const after = await push();
  await run.stop();

  const refused = pushes.filter((p) => p.status === 503 && p.retryAfter !== null);
  const waits = refused.map((p) => p.ms).sort((a, b) => a - b);
  const cfg = { hold_s: HOLD_S, busy_timeout_s: BUSY_TIMEOUT_S };
  emit("lock", "healthz_p50_free", percentile(free, 0.5), "ms", cfg);
  emit("lock", "healthz_p99_free", percentile(free, 0.99), "ms", cfg);
  emit("lock", "healthz_p50_held", percentile(locked, 0.5), "ms", cfg);
  emit("lock", "healthz_p99_held", percentile(locked, 0.99), "ms", cfg);
  emit("lock", "healthz_max_held", locked[locked.length - 1], "ms", cfg);
  emit("lock", "healthz_p99_ratio_held_vs_free", percentile(locked, 0.99) / percentile(free, 0.99), "ratio", cfg);
  emit("lock", "pushes_503_with_retry_after", refused.length, "requests", { ...cfg, sent: pushes.length });
  emit("lock", "push_503_after_max", waits[waits.length - 1] ?? Number.NaN, "ms", cfg);
  emit(
    "lock",
    "push_503_after_max_over_busy_timeout",
    (waits[waits.length - 1] ?? Number.NaN) / 1000 - BUSY_TIMEOUT_S,
    "s",
    cfg,
  );
  emit("lock", "push_after_release_status", after.status, "status", cfg);
  table(
    `lock: another process holds the write lock for ${HOLD_S} s (busy_timeout_s ${BUSY_TIMEOUT_S})`,
    ["figure", "value"],
    [
      [
        "/healthz p50 / p99, no lock (ms)",
        `${percentile(free, 0.5).toFixed(1)} / ${percentile(free, 0.99).toFixed(1)}`,
      ],
      [
        "/healthz p50 / p99 / max, lock held (ms)",
        [percentile(locked, 0.5), percentile(locked, 0.99), locked[locked.length - 1]]
          .map((x) => x.toFixed(1))
          .join(" / "),
      ],
      ["/healthz answers while held", locked.length],
      ["pushes 503 with Retry-After / sent", `${refused.length} / ${pushes.length}`],
      ["slowest 503 (s; target < busy_timeout_s + 1)", ((waits[waits.length - 1] ?? Number.NaN) / 1000).toFixed(2)],
      ["a push after the release", after.status],
    ],
  );
});
