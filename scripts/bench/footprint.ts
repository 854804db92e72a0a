// Footprint: the idle RSS of `hookspool run` once it has settled, its RSS (now and peak) at the
// end of a short intake load, the compiled binary's size (dist/hookspool, built with
// `bun run scripts/build.ts` when missing), and the cold start of `run` to its first 2xx
// (spawn, then POST a signed push every 5 ms until one is answered 2xx), on a migrated home;
// and the CPU seconds `run` spends per 10,000 pushes from the first byte to the last delivery.
//
//   bun scripts/bench/footprint.ts     BENCH_BINARY=1 for the compiled binary's RSS and start
import { createHmac, randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { load } from "./lib/load.ts";
import { SENDER_SECRET, githubPush } from "./lib/payload.ts";
import {
  BINARY,
  fileSize,
  freePort,
  listeningPort,
  main,
  procCpuS,
  hookspoolEnv,
  procKb,
  ROOT,
  RUNNER,
  spawnChild,
  startHookspool,
  USE_BINARY,
} from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, percentile, table } from "./lib/report.ts";
import { makeHome } from "./lib/homes.ts";

const LOAD_N = 2000;
const CPU_N = 5000;
const LOAD_C = 16;
const STARTS = 5;

/** Sample VmRSS every 250 ms (after at least `minMs`) until three samples agree within 2%, or `maxMs`. */
async function settledRss(pid: number, minMs = 2000, maxMs = 8000): Promise<number> {
  const t0 = performance.now();
  const samples: number[] = [];
  for (;;) {
    await Bun.sleep(250);
    samples.push(procKb(pid, "VmRSS"));
    const last = samples.slice(-3);
    const settled = last.length === 3 && Math.max(...last) - Math.min(...last) <= 0.02 * Math.max(...last);
    if ((settled && performance.now() - t0 >= minMs) || performance.now() - t0 >= maxMs)
      return samples[samples.length - 1];
  }
}

/**
 * Idle RSS in its two parts: the process's own memory (RssAnon: heaps, JIT code, SQLite's
 * caches) and the pages of the executable it maps (RssFile: shared, given back under pressure,
 * and more of them resident the fresher the file is in the page cache, so it varies from run to run).
 */
function idleParts(pid: number, runner: string, rows: (string | number)[][]): void {
  const anon = procKb(pid, "RssAnon") / 1024;
  const file = procKb(pid, "RssFile") / 1024;
  emit("footprint", "idle_rss_anon", anon, "MiB", { process: "hookspool run", runner });
  emit("footprint", "idle_rss_file", file, "MiB", { process: "hookspool run", runner });
  rows.push([`  of which its own memory (RssAnon, ${runner})`, anon, "MiB"]);
  rows.push([`  of which executable pages mapped (RssFile, ${runner})`, file, "MiB"]);
}

await main("footprint", 150, async () => {
  const rows: (string | number)[][] = [];

  // The compiled binary.
  if (!existsSync(BINARY)) {
    const p = Bun.spawn([process.execPath, "run", "scripts/build.ts"], {
      cwd: ROOT,
      stdout: "inherit",
      stderr: "inherit",
    });
    if ((await p.exited) !== 0) throw new Error("bun run scripts/build.ts failed");
  }
  const size = fileSize(BINARY) / (1024 * 1024);
  emit("footprint", "binary_size", size, "MiB", { path: "dist/hookspool" });
  rows.push(["binary size (dist/hookspool)", size, "MiB"]);

  const rx = receiver();
  const body = githubPush();

  // Idle, then after a short load.
  const home = await makeHome("footprint-run", { receiverPort: rx.port });
  const run = await startHookspool("footprint-run", home, ["run"]);
  const port = await listeningPort(run);
  const idle = (await settledRss(run.proc.pid)) / 1024;
  emit("footprint", "idle_rss", idle, "MiB", { process: "hookspool run", runner: RUNNER });
  rows.push([`idle RSS of run (settled, ${RUNNER})`, idle, "MiB"]);
  idleParts(run.proc.pid, RUNNER, rows);
  // What a user runs: the compiled binary, beside `bun src/main.ts` when that is the runner.
  if (!USE_BINARY) {
    const binHome = await makeHome("footprint-binary", { receiverPort: rx.port });
    const bin = spawnChild("footprint-binary", [BINARY, "--home", binHome, "run"], {
      env: hookspoolEnv(binHome),
      logDir: binHome,
    });
    await listeningPort(bin);
    const binIdle = (await settledRss(bin.proc.pid)) / 1024;
    emit("footprint", "idle_rss", binIdle, "MiB", { process: "hookspool run", runner: "binary" });
    rows.push(["idle RSS of run (settled, binary)", binIdle, "MiB"]);
    idleParts(bin.proc.pid, "binary", rows);
    await bin.stop();
  }
  const r = await load(
    {
      url: `http://127.0.0.1:${port}/hooks/github`,
      concurrency: LOAD_C,
      n: LOAD_N,
      maxSeconds: 20,
      body,
      headers: { "X-GitHub-Event": "push" },
      deliveryHeader: "X-GitHub-Delivery",
      sign: { header: "X-Hub-Signature-256", prefix: "sha256=", secret: SENDER_SECRET },
    },
    home,
  );
  const after = procKb(run.proc.pid, "VmRSS") / 1024;
  const peak = procKb(run.proc.pid, "VmHWM") / 1024;
  const loadConfig = {
    process: "hookspool run",
    requests: r.sent,
    concurrency: LOAD_C,
    body_bytes: body.replaceAll("{{SEQ}}", "0".repeat(40)).length,
    non_2xx: r.failed,
  };
  emit("footprint", "rss_after_load", after, "MiB", loadConfig);
  emit("footprint", "peak_rss_after_load", peak, "MiB", loadConfig);
  rows.push([`RSS of run at the end of ${r.sent} pushes at ${LOAD_C} senders`, after, "MiB"]);
  rows.push(["peak RSS of run (VmHWM) by then", peak, "MiB"]);
  await run.stop();

  // CPU seconds per 10,000 events end to end: verified, queued, coalesced and delivered, with
  // a window short enough (quiet_s 0.2) that the last batch goes out soon after the load.
  {
    const cpuHome = await makeHome("footprint-cpu", { receiverPort: rx.port, githubExtra: "quiet_s = 0.2\nmax_s = 2" });
    const cpuRun = await startHookspool("footprint-cpu", cpuHome, ["run"]);
    const cpuPort = await listeningPort(cpuRun);
    await settledRss(cpuRun.proc.pid, 500, 3000);
    const delivered = () => rx.arrivals.reduce((n, a) => n + a.count, 0);
    const before = delivered();
    const cpu0 = procCpuS(cpuRun.proc.pid);
    const t0 = performance.now();
    const c = await load(
      {
        url: `http://127.0.0.1:${cpuPort}/hooks/github`,
        concurrency: LOAD_C,
        n: CPU_N,
        maxSeconds: 30,
        body,
        headers: { "X-GitHub-Event": "push" },
        deliveryHeader: "X-GitHub-Delivery",
        sign: { header: "X-Hub-Signature-256", prefix: "sha256=", secret: SENDER_SECRET },
        run: 7,
      },
      cpuHome,
    );
    while (delivered() - before < c.ok && performance.now() - t0 < 60_000) await Bun.sleep(20);
    const cpu = procCpuS(cpuRun.proc.pid) - cpu0;
    const got = delivered() - before;
    await cpuRun.stop();
    if (got < c.ok) throw new Error(`footprint: ${got} of ${c.ok} events delivered within 60 s`);
    const per10k = (cpu * 10_000) / c.ok;
    emit("footprint", "cpu_s_per_10k_events", per10k, "s", {
      process: "hookspool run",
      events: c.ok,
      concurrency: LOAD_C,
      body_bytes: body.replaceAll("{{SEQ}}", "0".repeat(40)).length,
      end_to_end: "verified, queued, delivered",
    });
    rows.push([`CPU of run per 10,000 pushes, received to delivered (${c.ok} sent)`, per10k, "s"]);
  }

  // Cold start to the first 2xx, on a home that is already migrated.
  const starts: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const p = freePort();
    const h = await makeHome(`footprint-cold-${i}`, { receiverPort: rx.port, listen: `127.0.0.1:${p}` });
    const filled = body.replaceAll("{{SEQ}}", `${i}`.padStart(40, "0"));
    const sig = `sha256=${createHmac("sha256", SENDER_SECRET).update(filled).digest("hex")}`;
    const t0 = performance.now();
    const c = await startHookspool(`cold-${i}`, h, ["run"]);
    let ms = Number.NaN;
    while (performance.now() - t0 < 20_000) {
      try {
        const res = await fetch(`http://127.0.0.1:${p}/hooks/github`, {
          method: "POST",
          body: filled,
          headers: {
            "Content-Type": "application/json",
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": randomUUID(),
            "X-Hub-Signature-256": sig,
          },
        });
        await res.arrayBuffer();
        if (res.ok) {
          ms = performance.now() - t0;
          break;
        }
      } catch {
        // not listening yet
      }
      if (c.proc.exitCode !== null) throw new Error(`run exited during its cold start: ${c.log().slice(-800)}`);
      await Bun.sleep(5);
    }
    await c.stop();
    starts.push(ms);
  }
  const sorted = [...starts].sort((a, b) => a - b);
  const coldConfig = { process: "hookspool run", starts: STARTS, home: "migrated" };
  emit("footprint", "cold_start_to_2xx_p50", percentile(sorted, 0.5), "ms", coldConfig);
  emit("footprint", "cold_start_to_2xx_min", sorted[0], "ms", coldConfig);
  emit("footprint", "cold_start_to_2xx_max", sorted[sorted.length - 1], "ms", coldConfig);
  rows.push([`cold start of run to the first 2xx, median of ${STARTS}`, percentile(sorted, 0.5), "ms"]);
  rows.push(["  min / max", `${sorted[0].toFixed(0)} / ${sorted[sorted.length - 1].toFixed(0)}`, "ms"]);
  rx.stop();

  table(
    `footprint (${process.env.BENCH_BINARY === "1" ? "dist/hookspool" : "bun src/main.ts"})`,
    ["figure", "value", "unit"],
    rows,
  );
});
