// The end-to-end proof every built-in bobbin gets: its captures sent over loopback to a real
// `hookspool run` whose home has one [bobbins.<i>] table per kit instance, each answered as its
// `# expect:` says, and its accepted captures delivered to a receiver under the key, event type
// and version they name. The run is shared by every bobbin on the same clock (shared-run.ts); what a file
// reads back is its own bobbin's. bobbinTest is the test each file starts with; the file adds
// what is its bobbin's own, most often against an intake of the kit's instance (kitIntake), sent
// a capture again (capturedRequest) and read back by payload (eventsByPayload).
import { expect, test } from "bun:test";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { Bobbin } from "../../src/bobbin/registry.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { type Runtime, waitFor } from "../helpers/proc.ts";
import { builtin, type CaptureResult, kitOf, type SharedRun, sharedRun } from "./shared-run.ts";

export { builtin, type CaptureResult, kitOf, type SharedRun, sharedRun } from "./shared-run.ts";

/** The destination a bobbin's "against an intake" tests route to: never reached (the intake only queues). */
export const KIT_DESTINATION = `[destinations.kit]
type = "http"
url = "http://127.0.0.1:9/kit"
allow_insecure = true
unsigned = true
`;

/**
 * A capture of `b` as a test sends it again: its body as text, and its headers as the source sent
 * them, less the framing fetch redoes (Host, Content-Length).
 */
export function capturedRequest(
  b: Bobbin,
  file = "captures/accepted.http",
): { body: string; headers: Record<string, string> } {
  const c = capturesOf(b.files()).find((x) => x.file === file);
  if (!c) throw new Error(`${b.name} has no ${file}`);
  return {
    body: new TextDecoder().decode(c.request.body),
    headers: Object.fromEntries(
      c.request.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())),
    ),
  };
}

export interface KitIntakeOptions {
  /**
   * More keys of the instance's table, over its bobbin, secrets and outputs (`{ "*" = "kit" }`):
   * settings (the kit's unless given), dedup_window_s, other outputs.
   */
  table?: Record<string, unknown>;
  /** More TOML, after the instance's table and the kit destination: other instances, routes, destinations. */
  config?: string;
  /** More secret files (name -> value), for `config`'s `{{secret:<name>}}`. */
  secrets?: Record<string, string>;
  /** The intake's clock: the kit's now unless given (startIntake's default when the kit has none). */
  clockAt?: number;
}

/**
 * An intake whose one [bobbins.<i>] table is the kit's instance of the built-in `name`: named as
 * the kit says, each of the kit's secrets in a file of its own (secret-<i>-<secret>), everything
 * to KIT_DESTINATION, on the kit's clock.
 */
export function kitIntake(name: string, o: KitIntakeOptions = {}): Promise<TestIntake> {
  const kit = kitOf(builtin(name));
  const instance = kit.instance.name;
  const files: Record<string, string> = { ...o.secrets };
  const secrets: Record<string, { file: string }> = {};
  for (const [secret, value] of Object.entries(kit.secrets)) {
    files[`${instance}-${secret}`] = value;
    secrets[secret] = { file: `{{secret:${instance}-${secret}}}` };
  }
  const table = {
    bobbin: name,
    ...(Object.keys(secrets).length ? { secrets } : {}),
    ...(Object.keys(kit.instance.settings).length ? { settings: kit.instance.settings } : {}),
    outputs: { "*": "kit" },
    ...o.table,
  };
  return startIntake(`${stringify({ bobbins: { [instance]: table } })}\n${KIT_DESTINATION}\n${o.config ?? ""}`, {
    secrets: files,
    clockAt: o.clockAt ?? kit.now,
  });
}

/**
 * The events of `t` whose payload is `body`, oldest first, each as `columns` (of events e and their
 * batches b) select.
 */
export function eventsByPayload<T>(t: TestIntake, columns: string, body: string): T[] {
  return t.db.db
    .query(`SELECT ${columns} FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.payload = ? ORDER BY e.id`)
    .all(body) as T[];
}

/** The first of eventsByPayload, or null when no event's payload is `body`. */
export function eventByPayload<T>(t: TestIntake, columns: string, body: string): T | null {
  return eventsByPayload<T>(t, columns, body)[0] ?? null;
}

/**
 * Send `b`'s captures to its shared run (once per run) and return what each got, after every
 * accepted one (202 queued) was delivered: its event's payload the capture's body, its batch's key,
 * event type and version the capture's, one delivery each at its destination, and no kit secret in
 * the run's log.
 */
export async function runCatalogue(b: Bobbin, runtime: Runtime = "bun"): Promise<CaptureResult[]> {
  const run = await sharedRun(b, runtime);
  const results = await run.results(b);
  // Queued: 202, or 200 beside a source's own ack body (the word then in X-Hookspool-Status).
  const accepted = results.filter((x) => x.capture.expect.word === "queued" && x.status >= 200 && x.status < 300);
  // The event a capture became: its payload is the capture's body, byte for byte.
  let rows = run.events(b);
  const eventOf = (a: CaptureResult) =>
    rows.find((r) => r.source === a.instance && r.payload === new TextDecoder().decode(a.capture.request.body));
  await waitFor(`${b.name}: ${accepted.length} batches delivered`, () => {
    rows = run.events(b);
    return accepted.every((a) => eventOf(a)?.state === "delivered");
  });
  for (const a of accepted) {
    const row = eventOf(a);
    expect({ file: a.capture.file, key: row?.key, event_type: row?.event_type, version: row?.version }).toEqual({
      file: a.capture.file,
      key: a.capture.expect.key ?? row?.key,
      event_type: a.capture.expect.eventType ?? row?.event_type,
      version: a.capture.expect.version ?? row?.version,
    });
  }
  const got = await run.deliveries(b);
  expect(got.accepted.length).toBe(accepted.length);
  expect(got.unverified).toEqual([]);
  const stderr = await run.stderr();
  for (const secret of Object.values(kitOf(b).secrets)) expect(stderr).not.toContain(secret);
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

/**
 * What a capture's answer must be, beyond its status: its method (POST unless said), its body, its `# expect-key:`
 * (null: none).
 */
export interface Expected {
  method?: string;
  status: number;
  body?: string;
  key?: string | null;
}

/** The captures are exactly these files, each answered as the table says (a number: a POST's status). */
export function expectAnswers(results: CaptureResult[], answers: Record<string, number | Expected>): void {
  const want = Object.fromEntries(
    Object.entries(answers).map(([file, a]) => [
      file,
      typeof a === "number" ? { method: "POST", status: a } : { method: "POST", ...a },
    ]),
  );
  const got = Object.fromEntries(
    results.map((r) => {
      const w: Expected | undefined = want[r.capture.file];
      const g: Expected = { method: r.capture.request.method, status: r.status };
      if (w && "body" in w) g.body = r.body;
      if (w && "key" in w) g.key = r.capture.expect.key ?? null;
      return [r.capture.file, g];
    }),
  );
  expect(got).toEqual(want);
}

export interface BobbinTestOptions {
  /** Every capture of the bobbin, and what it is answered (see expectAnswers). */
  answers: Record<string, number | Expected>;
  /** What else the captures' answers must show, once every accepted one was delivered. */
  afterwards?(results: CaptureResult[], run: SharedRun): void | Promise<void>;
  /** The same test again on the compiled binary. */
  binary?: boolean;
}

/**
 * The test a bobbin's file starts with: its captures through the shared run (runCatalogue), each
 * answered as it says and as `answers` says, then `afterwards`.
 */
export function bobbinTest(name: string, title: string, o: BobbinTestOptions): void {
  const b = builtin(name);
  test(title, async () => {
    const results = await runCatalogue(b);
    expectAsCaptured(results);
    expectAnswers(results, o.answers);
    await o.afterwards?.(results, await sharedRun(b));
  });
  if (o.binary) {
    test("the compiled binary carries the bobbin and serves it the same way", async () => {
      const results = await runCatalogue(b, "binary");
      expectAsCaptured(results);
      expectAnswers(results, o.answers);
    }, 120_000);
  }
}
