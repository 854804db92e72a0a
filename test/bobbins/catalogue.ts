// The end-to-end proof every built-in bobbin gets: a real `hookspool run` over a home whose only
// source is one [bobbins.<i>] table per kit instance, each capture sent over loopback, and its
// accepted captures delivered to a receiver. The bobbin's test file adds what is its own.
import { expect } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { type Capture, capturesOf, type Kit, parseKit } from "../../src/bobbin/captures.ts";
import { type Bobbin, findBobbins } from "../../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../src/config/schema.ts";
import { openSpool } from "../../src/store/db.ts";
import { type Runtime, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

/** The destination a bobbin's "against an intake" tests route to: never reached (the intake only queues). */
export const KIT_DESTINATION = `[destinations.kit]
type = "http"
url = "http://127.0.0.1:9/kit"
allow_insecure = true
unsigned = true
`;

export function builtin(name: string): Bobbin {
  const b = findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.get(name);
  if (!b) throw new Error(`no built-in bobbin ${name}`);
  return b;
}

export function kitOf(b: Bobbin): Kit {
  const text = b.files().get("captures/kit.toml");
  if (text === undefined) throw new Error(`${b.name} has no captures/kit.toml`);
  return parseKit(text);
}

/** One instance per distinct settings: the kit's, and each capture's own `# settings:`. */
function instancesFor(b: Bobbin, kit: Kit): { name: string; settings: Record<string, unknown>; captures: Capture[] }[] {
  const out = new Map<string, { name: string; settings: Record<string, unknown>; captures: Capture[] }>();
  for (const c of capturesOf(b.files())) {
    const settings = c.settings ?? kit.instance.settings;
    const id = JSON.stringify(settings);
    if (!out.has(id)) out.set(id, { name: out.size === 0 ? kit.instance.name : `${kit.instance.name}-${out.size}`, settings, captures: [] });
    out.get(id)?.captures.push(c);
  }
  return [...out.values()];
}

export interface CaptureResult {
  capture: Capture;
  instance: string;
  status: number;
  body: string;
  /** The X-Hookspool-Status header: the word beside a source's own ack body. */
  word?: string;
}

/**
 * Serve `b` as a deployment would and send it every capture. Returns what each got, after every
 * accepted one was delivered (its batch's key and event type are the capture's).
 */
export async function runCatalogue(b: Bobbin, runtime: Runtime = "bun"): Promise<CaptureResult[]> {
  const kit = kitOf(b);
  const home = tempDir("hookspool-catalogue-");
  // Unsigned deliveries: the processes may run on the kit's clock, months behind the receiver's,
  // and the outbound signature is not what this proves (the destination suites prove it).
  const receiver = new Receiver<{ key: string; events: unknown[] }>({});
  const secretFiles: Record<string, string> = {};
  for (const [name, value] of Object.entries(kit.secrets)) {
    secretFiles[name] = join(home, `secret-${name}`);
    writeFileSync(secretFiles[name], value, { mode: 0o600 });
  }
  const instances = instancesFor(b, kit);
  const doc = {
    intake: { listen: "127.0.0.1:0" },
    dispatch: { poll_s: 0.05, heartbeat_s: 1 },
    bobbins: Object.fromEntries(
      instances.map((i) => [
        i.name,
        {
          bobbin: b.name,
          secrets: Object.fromEntries(Object.entries(secretFiles).map(([n, f]) => [n, { file: f }])),
          ...(Object.keys(i.settings).length ? { settings: i.settings } : {}),
          outputs: { "*": "receiver" },
          // Deliver at once: the proof is the path, not the window.
          span: "immediate",
        },
      ]),
    ),
    destinations: { receiver: { type: "http", url: `http://127.0.0.1:${receiver.port}/in`, allow_insecure: true, unsigned: true, timeout_s: 5 } },
  };
  writeFileSync(join(home, "config.toml"), stringify(doc));
  // Captures with timestamps are valid at the kit's now: the processes run on that clock.
  const env = kit.now !== undefined ? { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(kit.now - Date.now() / 1000) } : {};
  const hs = await startHookspool(home, ["run"], { env, runtime });
  const results: CaptureResult[] = [];
  try {
    const port = await hs.port();
    for (const i of instances) {
      for (const c of i.captures) {
        const r = c.request;
        const path = r.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${i.name}`);
        // fetch frames the request itself: its own Host and Content-Length.
        const headers = r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase()));
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: r.method, headers, body: r.method === "GET" || r.method === "HEAD" ? undefined : r.body });
        results.push({ capture: c, instance: i.name, status: res.status, body: await res.text(), word: res.headers.get("x-hookspool-status") ?? undefined });
      }
    }
    const accepted = results.filter((x) => x.capture.expect.word === "queued" && x.status === 202);
    const db = openSpool(join(home, "spool.db"));
    try {
      // The event a capture became: its payload is the capture's body, byte for byte.
      const eventOf = (a: CaptureResult) =>
        db.db.query("SELECT b.key, b.state, e.event_type FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.source = ? AND e.payload = ?").get(a.instance, new TextDecoder().decode(a.capture.request.body)) as { key: string; state: string; event_type: string } | null;
      await waitFor(`${accepted.length} batches delivered`, () => accepted.every((a) => eventOf(a)?.state === "delivered"));
      for (const a of accepted) {
        const row = eventOf(a);
        expect({ file: a.capture.file, key: row?.key, event_type: row?.event_type }).toEqual({ file: a.capture.file, key: a.capture.expect.key ?? row?.key, event_type: a.capture.expect.eventType ?? row?.event_type });
      }
    } finally {
      db.close();
    }
    expect(receiver.accepted().length).toBe(accepted.length);
    expect(receiver.unverified).toEqual([]);
  } finally {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
  }
  for (const secret of Object.values(kit.secrets)) expect(hs.stderr()).not.toContain(secret);
  return results;
}

/** Every capture got what its `# expect:` says. */
export function expectAsCaptured(results: CaptureResult[]): void {
  for (const r of results) {
    const got: Record<string, unknown> = { file: r.capture.file, status: r.status };
    const want: Record<string, unknown> = { file: r.capture.file, status: r.capture.expect.status };
    if (r.capture.expect.word) {
      // hookspool's JSON status, or, beside a source's own ack body, the X-Hookspool-Status header.
      got.word = r.word ?? (r.body ? ((JSON.parse(r.body) as { status?: string }).status ?? null) : null);
      want.word = r.capture.expect.word;
    }
    expect(got).toEqual(want);
  }
}
