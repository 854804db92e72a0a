// The host of a test worker's shared bobbin runs (shared-run.ts says why it is a process of its
// own): one receiver, and for each clock a test file asks for, a home of every built-in bobbin on
// that clock and its `hookspool run`. It sends captures when asked (a clocked run's all at once,
// at its kits' now), answers the test files of its worker over loopback, and stops its runs and
// exits as soon as that worker is gone.
//
//   bun shared-host.ts <state file> <worker pid> <bun|binary>
//
// The state file appears once the host answers; <state file>.error says why it could not start.
import { readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Bobbin } from "../../src/bobbin/registry.ts";
import { builtBinary, type Hookspool, type Runtime, startHookspool } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { type Answer, builtin, kitOf, membersOf, receiverPathOf, sendCaptures, writeSharedHome } from "./shared-run.ts";

/**
 * A clocked run starts behind its kits' now by the last one's start-up time and LEAD_S more;
 * its captures go when its clock reads now - SEND_EARLY_S, and no later than now + SEND_LATE_S
 * (else it is started again). So they arrive within a second of the kits' now, inside the
 * narrowest window a kit leaves: paddle.billing's, a capture signed 4 s before now and one 6 s
 * before, against a 5 s tolerance.
 */
const LEAD_S = 0.5;
const SEND_EARLY_S = 0.5;
const SEND_LATE_S = 0.4;

const [statePath, workerArg, runtimeArg] = process.argv.slice(2);
const worker = Number(workerArg);
const runtime = runtimeArg as Runtime;

/** The worker is there (a zombie is not: nothing of it runs). */
function workerAlive(): boolean {
  try {
    const stat = readFileSync(`/proc/${worker}/stat`, "utf8");
    return stat[stat.lastIndexOf(")") + 2] !== "Z";
  } catch {
    try {
      process.kill(worker, 0);
      return true;
    } catch {
      return false;
    }
  }
}

interface Run {
  port: number;
  home: string;
  hs: Hookspool;
  /** Each member's captures, sent once. */
  send(b: Bobbin): Promise<Answer[]>;
}

const receiver = new Receiver({});
/** The runs by clock ("wall" for the wall clock), each started on the first ask. */
const runs = new Map<string, Promise<Run>>();
/** Every hookspool process started, so that none is left behind. */
const started: Promise<Hookspool>[] = [];
let control: ReturnType<typeof Bun.serve> | null = null;
let stopping: Promise<void> | null = null;

function stop(code: number, why?: string): Promise<void> {
  stopping ??= (async () => {
    clearInterval(watch);
    rmSync(statePath, { force: true });
    if (why !== undefined) writeFileSync(`${statePath}.error`, why);
    // Runs still starting are waited for, so that none is left behind; all are stopped at once.
    const all = (await Promise.all(started.map((p) => p.catch(() => null)))).filter((hs) => hs !== null);
    for (const hs of all) hs.kill("SIGTERM");
    const late = setTimeout(() => {
      for (const hs of all) hs.kill("SIGKILL");
    }, 10_000);
    await Promise.all(all.map((hs) => hs.exited));
    clearTimeout(late);
    receiver.stop();
    control?.stop(true);
    // The worker's directory of state files goes with the last of its hosts.
    try {
      rmdirSync(dirname(statePath));
    } catch {
      // another host's state file, or an error file its worker has not read
    }
    // tempDir's exit hook removes the homes (and a built binary).
    process.exit(code);
  })();
  return stopping;
}

const watch = setInterval(() => {
  if (!workerAlive()) void stop(0);
}, 100);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => void stop(0));
// A failure of the host's own stops its runs with it: nothing is left running behind a dead host.
process.on("uncaughtException", (e) => void stop(1, `the host failed: ${e.stack ?? e}`));
process.on("unhandledRejection", (e) => void stop(1, `the host failed: ${(e as Error)?.stack ?? e}`));

/** How long the last clocked run took to listen (seconds): what the next one's lead is made from. */
let bootS = 0.75;

/** Start `hookspool run` over a fresh home of the members on `clock`; its port once it listens. */
async function launch(
  clock: number | undefined,
  aligned: number | null,
): Promise<{ hs: Hookspool; port: number; home: string }> {
  const home = tempDir("hookspool-shared-run-");
  writeSharedHome(home, membersOf(clock), receiver.port);
  const env = clock === undefined || aligned === null ? {} : { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(clock - aligned) };
  const t0 = performance.now();
  const starting = startHookspool(home, ["run"], { env, runtime, listenTimeoutMs: 30_000 });
  started.push(starting);
  const hs = await starting;
  try {
    const port = await hs.port();
    if (aligned !== null) bootS = (performance.now() - t0) / 1000;
    return { hs, port, home };
  } catch (e) {
    hs.kill("SIGKILL");
    throw e;
  }
}

async function startRun(clock: number | undefined): Promise<Run> {
  // The binary first: its build is not the run's start-up.
  if (runtime === "binary") await builtBinary();
  let up: { hs: Hookspool; port: number; home: string };
  if (clock === undefined) up = await launch(undefined, null);
  else {
    // `aligned` is the wall-clock second at which the process's clock reads the kits' now. Its
    // captures go once the clock reads now - 0.5 s, so that they arrive within a second of now;
    // a run that took longer to listen than its lead allowed is started again with a longer one.
    for (let attempt = 1; ; attempt++) {
      const aligned = Date.now() / 1000 + bootS + LEAD_S;
      up = await launch(clock, aligned);
      const wait = (aligned - SEND_EARLY_S) * 1000 - Date.now();
      if (wait > 0) await Bun.sleep(wait);
      if (Date.now() / 1000 - aligned <= SEND_LATE_S) break;
      const late = up.hs;
      late.kill("SIGTERM");
      await late.exited;
      if (attempt === 3)
        throw new Error(
          `the run on the clock at ${clock} took too long to listen, three times (the last ${bootS.toFixed(1)} s)`,
        );
    }
  }
  const { hs, port, home } = up;
  const sent = new Map<string, Promise<Answer[]>>();
  const run: Run = {
    port,
    home,
    hs,
    send(b) {
      let p = sent.get(b.name);
      if (!p) {
        p = sendCaptures(port, b);
        sent.set(b.name, p);
      }
      return p;
    },
  };
  // On a clocked run every member's captures at once, while its clock is at the kits' now; not a
  // processor's, whose code may call out.
  if (clock !== undefined) for (const b of membersOf(clock)) if (!b.manifest.processor) await run.send(b);
  return run;
}

/** The run that serves `b`: its clock's, started if it is not up (again, if it ended). */
function runOf(b: Bobbin): Promise<Run> {
  const clock = kitOf(b).now;
  if (!membersOf(clock).includes(b)) throw new Error(`${b.name} is not served by a shared run`);
  const id = String(clock ?? "wall");
  let p = runs.get(id);
  if (!p) {
    p = startRun(clock);
    runs.set(id, p);
    // A run that failed to start, or ended, is started afresh for the next ask.
    const forget = () => {
      if (runs.get(id) === p) runs.delete(id);
    };
    p.then((r) => r.hs.exited.then(forget), forget);
  }
  return p;
}

try {
  control = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      try {
        const b = builtin(url.searchParams.get("bobbin") ?? "");
        if (url.pathname === "/run") {
          const r = await runOf(b);
          return Response.json({ port: r.port, home: r.home });
        }
        if (url.pathname === "/replay") return Response.json(await (await runOf(b)).send(b));
        if (url.pathname === "/stderr") return new Response((await runOf(b)).hs.stderr());
        if (url.pathname === "/deliveries") {
          const path = receiverPathOf(b);
          return Response.json({
            accepted: receiver.accepted().filter((d) => d.path === path),
            unverified: receiver.unverified.filter((u) => u.startsWith(`${path} `)),
          });
        }
        return new Response("not found", { status: 404 });
      } catch (e) {
        return new Response((e as Error).stack ?? String(e), { status: 500 });
      }
    },
  });
  writeFileSync(`${statePath}.tmp`, JSON.stringify({ pid: process.pid, worker, control: control.port }));
  renameSync(`${statePath}.tmp`, statePath);
} catch (e) {
  await stop(1, `${(e as Error).stack ?? e}`);
}
