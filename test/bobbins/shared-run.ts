// The `hookspool run` the bobbin end-to-end tests share: one per test worker, runtime and clock,
// started when a file first needs it, whose home holds every built-in bobbin of that clock at once
// (each bobbin's kit instances, one per distinct `# settings:`), so that a test file replays its
// captures against a run already up instead of starting one of its own.
//
// One clock per run: a process runs on one clock, and a kit whose scheme carries a timestamp has
// a `now` its captures are valid at. So the bobbins whose kits have no `now` share a run on the
// wall clock, and the bobbins of each distinct `now` share one on that clock. A clocked run starts
// LEAD_S behind its kits' now and, when its clock reaches it, is sent the captures of all its
// bobbins (but those with a processor, whose code may call its vendor's API) at once: a window
// as short as paddle.billing's 5 s, which a capture signed 4 s before the kit's now leaves one
// second of, holds however late a bobbin's file asks. A wall-clock run is sent a bobbin's captures
// when its file first asks. Either way a bobbin's captures are sent once per run, and every later
// ask gets the same answers.
//
// Names: an instance is named as its kit says (a signature may cover the URL, as Twilio's does);
// two kits naming the same instance fail the run's start. Each bobbin delivers to a destination
// of its own, kit-<vendor>-<product>, at the receiver's /in/<bobbin>, and reads its secrets from
// secret-<bobbin>-<name>. What a test reads back, events() and deliveries(), is its own bobbin's
// instances and destination only: files cannot see each other's events.
//
// The runs, and the receiver they deliver to, live in a host process (shared-host.ts, one per
// worker and runtime), not in the test file's own process: `bun test --parallel` (what `make test`
// runs) gives each file a fresh module registry and, when the file ends, kills the child processes
// and closes the servers it started, and a test process's "exit" event never fires (so neither an
// exit hook nor a preload's afterAll, which --parallel runs after each file, can stop a run at the
// worker's end). The host is started in a session of its own (setsid), so a file's end does not
// take it along; the files of a worker find it again through a state file named by the worker's
// pid; and it stops its runs, and itself, within 100 ms of the worker being gone, however the
// worker ended.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { type Capture, capturesOf, type Kit, parseKit } from "../../src/bobbin/captures.ts";
import { type Bobbin, findBobbins } from "../../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../src/config/schema.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { type Runtime, waitFor } from "../helpers/proc.ts";
import type { Delivery } from "../helpers/receiver.ts";

const HOST = join(import.meta.dir, "shared-host.ts");

let registry: ReadonlyMap<string, Bobbin> | null = null;

function builtins(): ReadonlyMap<string, Bobbin> {
  registry ??= findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins;
  return registry;
}

export function builtin(name: string): Bobbin {
  const b = builtins().get(name);
  if (!b) throw new Error(`no built-in bobbin ${name}`);
  return b;
}

export function kitOf(b: Bobbin): Kit {
  const text = b.files().get("captures/kit.toml");
  if (text === undefined) throw new Error(`${b.name} has no captures/kit.toml`);
  return parseKit(text);
}

export interface Instance {
  name: string;
  settings: Record<string, unknown>;
  captures: Capture[];
}

/** One instance per distinct settings: the kit's, and each capture's own `# settings:`. */
export function instancesFor(b: Bobbin): Instance[] {
  const kit = kitOf(b);
  const out = new Map<string, Instance>();
  for (const c of capturesOf(b.files())) {
    const settings = c.settings ?? kit.instance.settings;
    const id = JSON.stringify(settings);
    if (!out.has(id))
      out.set(id, {
        name: out.size === 0 ? kit.instance.name : `${kit.instance.name}-${out.size}`,
        settings,
        captures: [],
      });
    out.get(id)?.captures.push(c);
  }
  return [...out.values()];
}

const members = new Map<number | undefined, Bobbin[]>();

/**
 * The built-in bobbins a run on `clock` serves: those with captures whose kit's now it is (no poll: it would tick out
 * to the vendor).
 */
export function membersOf(clock: number | undefined): Bobbin[] {
  let m = members.get(clock);
  if (!m) {
    m = [...builtins().values()]
      .filter(
        (b) =>
          b.files().has("captures/kit.toml") &&
          !b.manifest.poll &&
          capturesOf(b.files()).length > 0 &&
          kitOf(b).now === clock,
      )
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    members.set(clock, m);
  }
  return m;
}

export const destinationOf = (b: Bobbin) => `kit-${b.name.replaceAll(".", "-")}`;
export const receiverPathOf = (b: Bobbin) => `/in/${b.name}`;
const secretFileOf = (b: Bobbin, name: string) => `secret-${b.name}-${name}`;

/** Write the home of a shared run: config.toml with every member's instances, and their secrets. */
export function writeSharedHome(home: string, members: Bobbin[], receiverPort: number): void {
  const bobbins: Record<string, unknown> = {};
  const owner = new Map<string, string>();
  const destinations: Record<string, unknown> = {};
  for (const b of members) {
    const kit = kitOf(b);
    const secrets: Record<string, { file: string }> = {};
    for (const [name, value] of Object.entries(kit.secrets)) {
      secrets[name] = { file: join(home, secretFileOf(b, name)) };
      writeFileSync(secrets[name].file, value, { mode: 0o600 });
    }
    for (const i of instancesFor(b)) {
      const other = owner.get(i.name);
      if (other !== undefined)
        throw new Error(
          `the kits of ${other} and ${b.name} both name the instance ${i.name}: one shared run cannot ` +
            `serve both (rename one in its captures/kit.toml)`,
        );
      owner.set(i.name, b.name);
      bobbins[i.name] = {
        bobbin: b.name,
        secrets,
        ...(Object.keys(i.settings).length ? { settings: i.settings } : {}),
        // Everything to the bobbin's destination: a processor's every output, a source's "*".
        outputs: b.manifest.processor
          ? Object.fromEntries(Object.keys(b.manifest.outputs).map((o) => [o, destinationOf(b)]))
          : { "*": destinationOf(b) },
        // Deliver at once: the proof is the path, not the window.
        span: "immediate",
      };
    }
    // Unsigned deliveries: the process may run on the kit's clock, months behind the receiver's,
    // and the outbound signature is not what this proves (the destination suites prove it).
    destinations[destinationOf(b)] = {
      type: "http",
      url: `http://127.0.0.1:${receiverPort}${receiverPathOf(b)}`,
      allow_insecure: true,
      unsigned: true,
      timeout_s: 5,
    };
  }
  writeFileSync(
    join(home, "config.toml"),
    stringify({ intake: { listen: "127.0.0.1:0" }, dispatch: { poll_s: 0.05, heartbeat_s: 1 }, bobbins, destinations }),
  );
}

/** What one capture got, as the host sends it back. */
export interface Answer {
  file: string;
  instance: string;
  status: number;
  body: string;
  /** The X-Hookspool-Status header: the word beside a source's own ack body. */
  word?: string;
  /** The answer's headers, names lower-cased. */
  headers: Record<string, string>;
}

/** Send each capture of `b` to its instance on the intake at `port`, in order. */
export async function sendCaptures(port: number, b: Bobbin): Promise<Answer[]> {
  const out: Answer[] = [];
  for (const i of instancesFor(b)) {
    for (const c of i.captures) {
      const r = c.request;
      const path = r.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${i.name}`);
      // fetch frames the request itself: its own Host and Content-Length.
      const headers = r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase()));
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method: r.method,
        headers,
        body: r.method === "GET" || r.method === "HEAD" ? undefined : r.body,
      });
      const word = res.headers.get("x-hookspool-status") ?? undefined;
      out.push({
        file: c.file,
        instance: i.name,
        status: res.status,
        body: await res.text(),
        ...(word !== undefined ? { word } : {}),
        headers: Object.fromEntries(res.headers.entries()),
      });
    }
  }
  return out;
}

export interface CaptureResult {
  capture: Capture;
  instance: string;
  status: number;
  body: string;
  /** The X-Hookspool-Status header: the word beside a source's own ack body. */
  word?: string;
  /** The answer's headers, names lower-cased (absent where a file's own run did not keep them). */
  headers?: Record<string, string>;
}

/** An event of a bobbin's instances, with its batch. */
export interface EventRow {
  id: number;
  source: string;
  event_type: string;
  dedup_id: string | null;
  payload: string | null;
  raw: Uint8Array | null;
  batch_id: number;
  key: string;
  state: string;
  route: string;
  destination: string;
  last_error: string | null;
  version: number | null;
}

export interface SharedRun {
  runtime: Runtime;
  /** The kits' now the run's clock was set to (undefined: the wall clock). */
  clock: number | undefined;
  /** The intake's port. */
  port: number;
  home: string;
  /** Each capture of `b` and what it got: sent once per run, the same answers to every ask. */
  results(b: Bobbin): Promise<CaptureResult[]>;
  /** The events of `b`'s instances, in the order they were stored. */
  events(b: Bobbin): EventRow[];
  /** What the receiver got at `b`'s destination. */
  deliveries<D = { key: string; events: unknown[] }>(
    b: Bobbin,
  ): Promise<{ accepted: Delivery<D>[]; unverified: string[] }>;
  /** Everything the run wrote to stderr so far. */
  stderr(): Promise<string>;
  /** The file `b`'s secret `name` is read from. */
  secretFile(b: Bobbin, name: string): string;
}

/** The host of a worker's shared runs, as its state file says. */
interface HostState {
  pid: number;
  worker: number;
  control: number;
}

/** One run of a host, as its /run answer says. */
interface RunInfo {
  port: number;
  home: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const hosts = new Map<Runtime, HostState>();

/** The shared run that serves `b` (started when none is up for this worker, runtime and clock). */
export async function sharedRun(b: Bobbin, runtime: Runtime = "bun"): Promise<SharedRun> {
  const clock = kitOf(b).now;
  if (!membersOf(clock).includes(b))
    throw new Error(`${b.name} is not served by a shared run (a poll bobbin, or no captures)`);
  let host = hosts.get(runtime);
  if (!host || !alive(host.pid)) {
    host = await hostFor(runtime);
    hosts.set(runtime, host);
  }
  const control = host.control;
  const ask = async (path: string): Promise<Response> => {
    const res = await fetch(`http://127.0.0.1:${control}${path}`);
    if (!res.ok) throw new Error(`the shared run's host answered ${path} with ${res.status}: ${await res.text()}`);
    return res;
  };
  const q = (x: Bobbin) => `bobbin=${encodeURIComponent(x.name)}`;
  // The run of b's clock: the host starts it on the first ask.
  const info = (await (await ask(`/run?${q(b)}`)).json()) as RunInfo;
  const sources = (x: Bobbin) => instancesFor(x).map((i) => i.name);
  return {
    runtime,
    clock,
    port: info.port,
    home: info.home,
    async results(x) {
      const byFile = new Map(capturesOf(x.files()).map((c) => [c.file, c]));
      const answers = (await (await ask(`/replay?${q(x)}`)).json()) as Answer[];
      return answers.map(({ file, ...a }) => {
        const capture = byFile.get(file);
        if (!capture) throw new Error(`the host answered for ${file}, which ${x.name} does not carry`);
        return { capture, ...a };
      });
    },
    events(x) {
      const names = sources(x);
      const db = openSpool(join(info.home, "spool.db"));
      try {
        return db.db
          .query(
            `SELECT e.id, e.source, e.event_type, e.dedup_id, e.payload, e.raw, b.id AS batch_id, ` +
              `b.key, b.state, b.route, b.destination, b.last_error, e.version
             FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.source ` +
              `IN (${names.map(() => "?").join(", ")}) ORDER BY e.id`,
          )
          .all(...names) as EventRow[];
      } finally {
        db.close();
      }
    },
    async deliveries<D>(x: Bobbin) {
      return (await (await ask(`/deliveries?${q(x)}`)).json()) as { accepted: Delivery<D>[]; unverified: string[] };
    },
    async stderr() {
      return (await ask(`/stderr?${q(b)}`)).text();
    },
    secretFile: (x, name) => join(info.home, secretFileOf(x, name)),
  };
}

/** This worker's host for `runtime`: the one its state file names, or a new one. */
async function hostFor(runtime: Runtime): Promise<HostState> {
  const dir = join(tmpdir(), `hookspool-bobbin-runs-${process.pid}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const statePath = join(dir, `${runtime}.json`);
  const errorPath = `${statePath}.error`;
  const read = (): HostState | null =>
    existsSync(statePath) ? (JSON.parse(readFileSync(statePath, "utf8")) as HostState) : null;
  const found = read();
  if (found && found.worker === process.pid && alive(found.pid)) return found;
  rmSync(statePath, { force: true });
  rmSync(errorPath, { force: true });
  // setsid -f: the host in a session of its own, its parent gone at once, so that the end of the
  // file that started it (which kills that file's children under --parallel) does not end it.
  const p = Bun.spawnSync(["setsid", "-f", process.execPath, HOST, statePath, String(process.pid), runtime], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  if (p.exitCode !== 0) throw new Error(`setsid could not start the shared runs' host (exit ${p.exitCode})`);
  return waitFor(`the shared ${runtime} runs' host`, () => {
    if (existsSync(errorPath)) {
      const why = readFileSync(errorPath, "utf8");
      rmSync(errorPath, { force: true });
      throw new Error(`the shared runs' host did not start: ${why}`);
    }
    return read();
  });
}
