// `hookspool __processor <instance>`: the runtime a bobbin's processor runs in, started by the
// script destination with the batch document on stdin. It loads the processor, holds the state
// lock for the whole batch, and either replays the batch's journal (a retry of a batch already
// processed) or calls process(), turns its items into emits through the instance's output
// routes, journals emits and staged state, applies the state and prints the emits. Exit 0 done,
// 75 retry, 65 permanent (with the reason on a last stderr line the destination keeps). Nothing
// but emit lines ever reaches stdout.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { codePathProblem } from "../bobbin/code-path.ts";
import { BUILTIN_PREFIX, builtinModule, readBobbinManifest } from "../bobbin/registry.ts";
import type { Clock } from "../clock.ts";
import type { EmitRequest } from "../delivery.ts";
import { isHookspoolError } from "../errors.ts";
import { registerPluginApi } from "../bobbin/plugin-api.ts";
import type { Batch, Item, PollerPlugin, ProcessorPlugin } from "../plugin/processor.ts";
import { Permanent } from "../plugin/types.ts";
import { acquireLock, type FileLock } from "../lock.ts";
import { testHook } from "../testhook.ts";
import { buildContext, cleanReason } from "./context.ts";
import { type ProcessorEnv, readProcessorEnv } from "./env.ts";
import { applyState, pruneJournals, readJournal, writeJournal } from "./files.ts";
import { type HttpStub, stubFetch } from "../net/stubs.ts";

export const EXIT_OK = 0;
export const EXIT_PERMANENT = 65;
export const EXIT_RETRY = 75;
/** The last stderr line of a permanent failure; the script destination keeps its reason. */
export const PERMANENT_PREFIX = "hookspool-permanent: ";

export interface RuntimeIo {
  stdin(): Promise<Uint8Array>;
  stdout(text: string): void;
  stderr(text: string): void;
  env: Record<string, string | undefined>;
  clock: Clock;
  /** The user the runtime runs as: code loaded by path must be root's or this user's. */
  uid: number;
  /** How long to wait for the state lock a previous attempt may still hold (ms). */
  lockWaitMs?: number;
}

/** A module's default export, or the module itself. */
function exported(mod: unknown): unknown {
  return (mod as { default?: unknown } | null)?.default ?? mod;
}

/** The module a bobbin's manifest names, and whether it is a poll bobbin's poller. */
function moduleOf(dir: string): { module: string; poll: boolean } {
  const doc = readBobbinManifest(dir);
  if (!doc) throw new Permanent(`no readable bobbin.toml for ${dir}`);
  if (doc.poll) return { module: doc.poll.module ?? "poller", poll: true };
  return { module: doc.processor?.module ?? "processor", poll: false };
}

async function loadByPath(path: string, uid: number): Promise<unknown> {
  const bad = codePathProblem(path, "file", uid);
  if (bad) throw new Permanent(bad.message);
  registerPluginApi();
  return import(pathToFileURL(path).href);
}

/** The processor (or a poller, as one: poll() called where process() would be). */
async function loadProcessor(env: ProcessorEnv, uid: number): Promise<ProcessorPlugin> {
  const { module, poll } = moduleOf(env.dir);
  const mod = env.dir.startsWith(BUILTIN_PREFIX)
    ? builtinModule(`${env.dir}/${module}`)
    : await loadByPath(join(env.dir, `${module}.ts`), uid);
  const p = exported(mod) as Partial<ProcessorPlugin & PollerPlugin> | null;
  const fn = poll ? p?.poll : p?.process;
  if (typeof fn !== "function")
    throw new Permanent(`the ${poll ? "poller" : "processor"} module exports no ${poll ? "poll" : "process"}()`);
  return { process: (batch, ctx) => fn.call(p, batch, ctx) };
}

/** The deployment's hooks module, when the instance names one (a `hooks` path setting). */
async function loadHooks(env: ProcessorEnv, uid: number): Promise<Record<string, unknown> | null> {
  const path = env.settings.hooks;
  if (typeof path !== "string" || path === "") return null;
  return (await loadByPath(path, uid)) as Record<string, unknown>;
}

function batchOf(env: ProcessorEnv, stdin: Uint8Array): Batch {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(new TextDecoder().decode(stdin)) as Record<string, unknown>;
  } catch {
    throw new Permanent("the batch document on stdin is not JSON");
  }
  if (doc === null || typeof doc !== "object" || !Array.isArray(doc.events))
    throw new Permanent("the batch document on stdin has no events");
  return {
    id: env.batchId,
    deliveryId: env.deliveryId,
    source: String(doc.source ?? ""),
    key: String(doc.key ?? ""),
    events: doc.events,
    doc,
  };
}

/**
 * Items to emits: each to the destination its event type is mapped to (or "*"), under the
 * instance as source, with a dedup id made of the batch id and the item's index, so a replay of
 * the same batch is a duplicate downstream.
 */
export function emitsOf(
  env: ProcessorEnv,
  batch: Batch,
  items: readonly Item[],
): { emits: EmitRequest[]; unmapped: string[] } {
  const emits: EmitRequest[] = [];
  const unmapped = new Set<string>();
  items.forEach((item, i) => {
    const destination = env.routes[item.event_type] ?? env.routes["*"];
    if (destination === undefined) {
      unmapped.add(item.event_type);
      return;
    }
    const { event_type, ...payload } = item;
    const key = typeof item.key === "string" && item.key !== "" ? item.key : batch.key;
    emits.push({
      source: env.instance,
      key,
      event_type,
      dedup_id: `${env.instance}:${batch.id}:${i}`,
      destination,
      payload,
    });
  });
  return { emits, unmapped: [...unmapped].sort() };
}

function checkItems(items: unknown): Item[] {
  if (!Array.isArray(items)) throw new Permanent("process() returned something other than a list of items");
  for (const it of items) {
    if (
      it === null ||
      typeof it !== "object" ||
      Array.isArray(it) ||
      typeof (it as Item).event_type !== "string" ||
      (it as Item).event_type === ""
    ) {
      throw new Permanent("an item has no event_type");
    }
  }
  return items as Item[];
}

/** Call process() with stdout and console closed to it: a processor that prints is refused. */
async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  let printed = false;
  const out = process.stdout.write;
  const saved = {
    log: console.log,
    info: console.info,
    warn: console.warn,
    error: console.error,
    debug: console.debug,
  };
  const refuse = () => {
    printed = true;
  };
  process.stdout.write = ((..._args: unknown[]) => {
    refuse();
    return true;
  }) as typeof process.stdout.write;
  Object.assign(console, { log: refuse, info: refuse, warn: refuse, error: refuse, debug: refuse });
  try {
    const r = await fn();
    if (printed) throw new Permanent("the processor printed: only the runtime writes to stdout (use ctx.log)");
    return r;
  } finally {
    process.stdout.write = out;
    Object.assign(console, saved);
  }
}

async function lockState(stateDir: string, waitMs: number): Promise<FileLock> {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  // A previous attempt killed at its deadline may hold it a moment longer; wait for it, a while.
  for (let waited = 0; ; waited += 100) {
    try {
      return acquireLock(join(stateDir, "processor.lock"), "another attempt of this processor");
    } catch (e) {
      if (!isHookspoolError(e) || e.code !== "E_LOCKED" || waited >= waitMs) throw e;
      await Bun.sleep(100);
    }
  }
}

/** Under `bobbin check`, the kit's stub answers stand in for the network. */
function kitFetch(env: Record<string, string | undefined>): typeof fetch | undefined {
  const file = env.HOOKSPOOL_KIT_HTTP;
  if (!file) return undefined;
  return stubFetch(JSON.parse(readFileSync(file, "utf8")) as HttpStub[]);
}

/** Run one batch; the exit code. */
export async function runProcessor(instance: string, io: RuntimeIo): Promise<number> {
  const log = (line: string) => io.stderr(`hookspool-processor: ${instance}: ${cleanReason(line)}\n`);
  let lock: FileLock | null = null;
  try {
    const env = readProcessorEnv(instance, io.env);
    const batch = batchOf(env, await io.stdin());
    if (env.stateDir) lock = await lockState(env.stateDir, io.lockWaitMs ?? 30_000);
    let emits: EmitRequest[];
    const journaled = env.stateDir ? readJournal(env.stateDir, env.batchId) : null;
    if (journaled && env.stateDir) {
      // A retry of a batch already processed: the same emits, and the state again (idempotent).
      applyState(env.stateDir, journaled.state);
      emits = journaled.emits;
      log(`batch ${env.batchId}: replayed its journal (${emits.length} emit(s))`);
    } else {
      const plugin = await loadProcessor(env, io.uid);
      const hooks = await loadHooks(env, io.uid);
      const { ctx, staged } = buildContext({
        env,
        clock: io.clock,
        log,
        hooks,
        processEnv: io.env,
        fetch: kitFetch(io.env),
      });
      const items = checkItems(await guarded(async () => plugin.process(batch, ctx)));
      const made = emitsOf(env, batch, items);
      if (made.unmapped.length)
        log(`batch ${env.batchId}: dropped the items of unmapped event types ${made.unmapped.join(", ")}`);
      emits = made.emits;
      if (env.stateDir) {
        writeJournal(env.stateDir, {
          batch_id: env.batchId,
          emits,
          state: Object.fromEntries(staged),
          written_at: io.clock.now(),
        });
        testHook("processor.after_journal");
        applyState(env.stateDir, Object.fromEntries(staged));
        pruneJournals(env.stateDir, env.journalKeepS, io.clock.now() * 1000);
      }
      log(`batch ${env.batchId}: ${batch.events.length} event(s) -> ${emits.length} emit(s)`);
    }
    io.stdout(emits.map((e) => `${JSON.stringify({ enqueue: e })}\n`).join(""));
    return EXIT_OK;
  } catch (e) {
    if (e instanceof Permanent) {
      const reason = cleanReason((e as Error).message || "permanent");
      log(`permanent: ${reason}`);
      io.stderr(`${PERMANENT_PREFIX}${reason}\n`);
      return EXIT_PERMANENT;
    }
    // Any other failure is retried; only its class is said (a message may hold a value).
    log(`retry: ${(e as Error | null)?.name ?? typeof e}`);
    return EXIT_RETRY;
  } finally {
    lock?.release();
  }
}
