// The source kit: one matrix every source must pass, run over real loopback HTTP against the
// real intake. Signed is queued and on disk when the answer arrives; unsigned, tampered, stale
// and future-dated get 401 with an empty body; oversized 413 and chunked 411 before any source
// code runs; a repeat is a duplicate; a ping or handshake with a bad signature gets 401; a HEAD
// handshake is constant; a verified request the source cannot classify is quarantined with no
// auth header kept; a refused write is 503; and no secret reaches a log line or a column, nor a
// payload a log line. The cases a subject cannot exercise (no timestamp, no dedup) are skipped.
import { quarantineIssue } from "../../store/enqueue.ts";
import type { StoredEvent } from "../../store/kit.ts";
import type { HttpStub } from "../../net/stubs.ts";
import { type KitIntake, type KitRequest, startKitIntake } from "./intake.ts";

export type { KitRequest };

export interface KitSubject {
  /** The source under test (its URL is /hooks/<source>). */
  source: string;
  /** The config (see startKitIntake); it must define `source`. */
  config: string;
  secrets: Record<string, string>;
  /** The Unix time `accepted` verifies at. */
  now: number;
  /** A signed request the source queues (202) at `now`. */
  accepted: KitRequest;
  /** Sign a new body at a time, when the kit can (a template scheme, a test's own signer). */
  sign?: (body: Uint8Array, now: number, id: string) => { headers: [string, string][]; query?: string };
  /** The headers that carry the signature or token: stripped for "unsigned", never stored. */
  authHeaders: readonly string[];
  /** False for token schemes: the token does not cover the body. */
  bodySigned: boolean;
  /** The scheme carries a timestamp, so stale and future-dated requests are refused. */
  timestamped: boolean;
  /** How far the timestamp may be from the clock, either side (the template's tolerance_s); default 300. */
  toleranceS?: number;
  /**
   * For a source that reads its timestamp from the body (Linear's webhookTimestamp): the fields
   * of a JSON body the kit makes, with that timestamp set to `now`. Such a source cannot verify a
   * body that is not JSON, so the kit's unclassifiable request is JSON with no key instead.
   */
  stamped?: (fields: Record<string, unknown>, now: number) => Record<string, unknown>;
  /** The source answers a queued or duplicate request with its own ack body (Twilio, Discord). */
  ack?: boolean;
  /** The source derives a dedup id, so the same request twice is a duplicate. */
  dedup: boolean;
  /** A constant answer to HEAD before verify (Trello's callback check). */
  headHandshake?: boolean;
  /** An unsigned verification request echoed before verify (a template's echo_unsigned). */
  unsignedEcho?: { spec: string; method: "GET" | "POST"; reply: string };
  /** Signed requests answered without being queued (a ping, a handshake), and what the answer must be. */
  answered?: readonly { request: KitRequest; check?: (r: { status: number; text: string }) => string | null }[];
  /** A signed request the source verifies but cannot classify; made from `sign` when absent. */
  broken?: KitRequest;
  /** The answers the source's own HTTP gets (captures/kit.toml [[http]]). */
  http?: readonly HttpStub[];
  /** Texts that must never appear in a log line (a payload's marker). */
  payloadSentinels?: readonly string[];
  /** Texts that must never appear in a log line or a column (part of a secret); each secret's value always is one. */
  secretSentinels?: readonly string[];
}

export type Outcome = "pass" | "fail" | "skip";

export interface KitCase {
  name: string;
  outcome: Outcome;
  /** What went wrong, or why it was skipped. */
  detail?: string;
}

export interface KitRun {
  cases: KitCase[];
  /** The event the signed case stored. */
  stored: StoredEvent | null;
}

/** The largest JSON a sender might post; oversized is one byte more than the source allows. */
function bodyCap(k: KitIntake, source: string): number {
  const c = k.loaded.config;
  return c.sources[source]?.max_body_bytes ?? c.intake.max_body_bytes;
}

const DEFAULT_TOLERANCE_S = 300;
/** A quarantined event's last_error: one reason class (a sender fault, no route, or a plugin error). */
const REASON_CLASS =
  /^(not_json|not_utf8|key_missing|key_too_long|meta_too_long|bad_payload|no_destination|plugin_error:\w+)$/;
const enc = new TextEncoder();

/** The request without its signature: auth headers and the query string removed. */
function unsigned(req: KitRequest, authHeaders: readonly string[]): KitRequest {
  const auth = new Set(authHeaders.map((h) => h.toLowerCase()));
  return { ...req, url: req.url.split("?")[0], headers: req.headers.filter(([k]) => !auth.has(k.toLowerCase())) };
}

/** The same request with one byte more in the body: no body signature still matches. */
function tampered(req: KitRequest): KitRequest {
  const body = new Uint8Array(req.body.length + 1);
  body.set(req.body, 0);
  body[req.body.length] = 0x20;
  return { ...req, body };
}

/** `body` signed afresh at `now`, keeping the request's other headers. */
function resigned(s: KitSubject, body: Uint8Array, now: number, id: string): KitRequest | null {
  if (!s.sign) return null;
  const signed = s.sign(body, now, id);
  const replaced = new Set(signed.headers.map(([k]) => k.toLowerCase()));
  const base = unsigned(s.accepted, s.authHeaders);
  return {
    ...base,
    url: `${base.url}${signed.query ? `?${signed.query}` : ""}`,
    headers: [...base.headers.filter(([k]) => !replaced.has(k.toLowerCase())), ...signed.headers],
    body,
  };
}

type Step = (k: KitIntake) => Promise<string | null | { skip: string }>;

export async function runSourceKit(s: KitSubject): Promise<KitRun> {
  const k = await startKitIntake({ config: s.config, secrets: s.secrets, now: s.now, http: s.http });
  const cases: KitCase[] = [];
  let stored: StoredEvent | null = null;
  const marker = `kit-sentinel-${crypto.randomUUID()}`;
  const tolerance = s.toleranceS ?? DEFAULT_TOLERANCE_S;
  const json = (fields: Record<string, unknown>) =>
    enc.encode(JSON.stringify(s.stamped ? s.stamped(fields, s.now) : fields));
  const at = (t: number) => k.clock.set(t);
  // hookspool's own answer, or a source's ack (200, the word in X-Hookspool-Status).
  const answered = (r: { status: number; text: string; headers: Headers }, word: string, status: number) =>
    (r.status === status && r.text === `{"status":"${word}"}`) ||
    (s.ack === true && r.status === 200 && r.headers.get("x-hookspool-status") === word);
  const refused = async (req: KitRequest, what: string): Promise<string | null> => {
    const before = k.spool.eventCount();
    const r = await k.send(req);
    if (r.status !== 401) return `${what}: ${r.status}, expected 401`;
    if (r.text !== "") return `${what}: 401 with a body; a refusal says nothing`;
    if (k.spool.eventCount() !== before) return `${what}: 401, but an event was stored`;
    return null;
  };
  const steps: [string, Step][] = [
    [
      "unsigned: 401, empty body, nothing stored",
      () => refused(unsigned(s.accepted, s.authHeaders), "without its signature"),
    ],
    [
      "tampered body: 401",
      async () =>
        s.bodySigned
          ? refused(tampered(s.accepted), "with one byte added")
          : { skip: "a token scheme does not sign the body" },
    ],
    [
      `stale and future-dated: 401 beyond the ${tolerance} s tolerance`,
      async () => {
        if (!s.timestamped) return { skip: "the scheme carries no timestamp" };
        at(s.now + tolerance + 1);
        const stale = await refused(s.accepted, `${tolerance + 1} s after it was signed`);
        at(s.now - tolerance - 1);
        const future = await refused(s.accepted, `${tolerance + 1} s before it was signed`);
        at(s.now);
        return stale ?? future;
      },
    ],
    [
      "signed: 202 queued, on disk when the answer arrives",
      async () => {
        const before = k.spool.eventCount();
        const r = await k.send(s.accepted);
        if (!answered(r, "queued", 202))
          return (
            `${r.status} ${r.text.slice(0, 60)}, ` +
            `expected 202 {"status":"queued"}${s.ack ? " or the source's ack" : ""}`
          );
        // A split request stores one event per element: at least one, before the answer.
        if (k.spool.eventCount() <= before) return "answered 202 before the event was stored";
        stored = k.spool.newestEvent();
        return null;
      },
    ],
    [
      `within the tolerance: accepted ${tolerance - 1} s either way`,
      async () => {
        if (!s.timestamped) return { skip: "the scheme carries no timestamp" };
        for (const t of [s.now + tolerance - 1, s.now - tolerance + 1]) {
          at(t);
          const r = await k.send(s.accepted);
          if (r.status !== 200 && r.status !== 202) return `${r.status} at ${t - s.now} s, expected 2xx`;
        }
        at(s.now);
        return null;
      },
    ],
    [
      "duplicate: the same delivery again is 200 duplicate, stored once",
      async () => {
        if (!s.dedup) return { skip: "the source derives no dedup id" };
        const before = k.spool.eventCount();
        const r = await k.send(s.accepted);
        if (!answered(r, "duplicate", 200))
          return (
            `${r.status} ${r.text.slice(0, 60)}, ` +
            `expected 200 {"status":"duplicate"}${s.ack ? " or the source's ack" : ""}`
          );
        return k.spool.eventCount() === before ? null : "a duplicate was stored again";
      },
    ],
    [
      "oversized: 413 before any source code, nothing stored",
      async () => {
        const before = k.spool.eventCount();
        const r = await k.send({ ...s.accepted, body: enc.encode(`{"pad":"${"x".repeat(bodyCap(k, s.source))}"}`) });
        if (r.status !== 413) return `${r.status}, expected 413`;
        return k.spool.eventCount() === before ? null : "an oversized body was stored";
      },
    ],
    [
      "chunked: 411",
      async () => {
        const r = await k.send(s.accepted, { chunked: true });
        return r.status === 411 ? null : `${r.status}, expected 411`;
      },
    ],
    [
      "a ping or handshake with a good signature: answered, never queued",
      async () => {
        if (!s.answered?.length) return { skip: "the source has no signed request it answers without queueing" };
        for (const { request, check } of s.answered) {
          const before = k.spool.eventCount();
          const r = await k.send(request);
          if (r.status < 200 || r.status > 299)
            return `${request.method} ${request.url.split("?")[0]}: ${r.status}, expected 2xx`;
          if (k.spool.eventCount() !== before) return "a handshake was stored as an event";
          const why = check?.(r);
          if (why) return why;
        }
        return null;
      },
    ],
    [
      "a ping or handshake with a bad signature: 401",
      async () => {
        if (!s.answered?.length) return { skip: "the source has no signed request it answers without queueing" };
        for (const { request: req } of s.answered) {
          const why = await refused(
            s.bodySigned ? tampered(req) : unsigned(req, s.authHeaders),
            `${req.method} ${req.url.split("?")[0]}, altered`,
          );
          if (why) return why;
        }
        return null;
      },
    ],
    [
      "HEAD handshake: a constant answer that reads no secret",
      async () => {
        if (!s.headHandshake) return { skip: "the source answers no HEAD" };
        const path = s.accepted.url.split("?")[0];
        const a = await k.send({ method: "HEAD", url: path, headers: [], body: new Uint8Array() });
        const b = await k.send({
          method: "HEAD",
          url: path,
          headers: [["X-Anything", "else"]],
          body: new Uint8Array(),
        });
        if (a.status < 200 || a.status > 299) return `HEAD answered ${a.status}, expected 2xx`;
        return a.status === b.status && a.text === b.text ? null : "two HEAD requests got different answers";
      },
    ],
    [
      "an unsigned verification request: its value echoed, nothing else, nothing stored",
      async () => {
        const e = s.unsignedEcho;
        if (!e) return { skip: "the source echoes no unsigned verification request" };
        const path = s.accepted.url.split("?")[0];
        const [kind, name] = [e.spec.slice(0, e.spec.indexOf(":")), e.spec.slice(e.spec.indexOf(":") + 1)];
        const ask = (value: string) =>
          k.send({
            method: e.method,
            url: kind === "query" ? `${path}?${name}=${encodeURIComponent(value)}` : path,
            headers: kind === "header" ? [[name, value]] : [],
            body: new Uint8Array(),
          });
        const before = k.spool.eventCount();
        const value = `kit-${crypto.randomUUID()}`;
        const r = await ask(value);
        if (r.status !== 200) return `${e.method} with the value answered ${r.status}, expected 200`;
        const want = e.reply === "text" ? value : JSON.stringify({ [e.reply.slice(5)]: value });
        if (r.text !== want) return "the answer is not the value alone";
        const bad = await ask("a\u0001b");
        if (bad.status !== 400 || bad.text !== "")
          return `a value with a control character answered ${bad.status}, expected 400`;
        if (k.spool.eventCount() !== before) return "a verification request was stored as an event";
        return null;
      },
    ],
    [
      "a verified request the source cannot classify: 202 quarantined, raw kept, no auth header stored",
      async () => {
        const req =
          s.broken ??
          resigned(
            s,
            s.stamped ? json({ kit: marker }) : enc.encode(`not json ${marker}`),
            s.now,
            `kit-${crypto.randomUUID()}`,
          );
        if (!req) return { skip: "the kit cannot sign a new body for this source" };
        const r = await k.send(req);
        if (r.status !== 202 || r.text !== '{"status":"quarantined"}')
          return `${r.status} ${r.text.slice(0, 60)}, expected 202 {"status":"quarantined"}`;
        const q = k.spool.newestQuarantined();
        if (!q) return "answered quarantined, but nothing is in quarantine";
        if (q.state !== "dead") return `the quarantined batch is ${q.state}, expected dead`;
        if (!req.body.every((b, i) => q.raw[i] === b)) return "the raw body was not kept";
        const kept = Object.keys(JSON.parse(q.headers) as Record<string, string>).map((h) => h.toLowerCase());
        const leaked = s.authHeaders.find((h) => kept.includes(h.toLowerCase()));
        if (leaked) return `the auth header ${leaked} was stored with the quarantined event`;
        if (!q.last_error || !REASON_CLASS.test(q.last_error))
          return `quarantine reason ${q.last_error}, not a reason class`;
        if (k.spool.openIssueCount(quarantineIssue(s.source, q.last_error).fingerprint) !== 1)
          return "no open issue for the quarantined event";
        return null;
      },
    ],
    [
      "spool unwritable: 503, nothing acknowledged",
      async () => {
        const fresh =
          resigned(s, json({ kit: marker, n: crypto.randomUUID() }), s.now, `kit-${crypto.randomUUID()}`) ?? s.accepted;
        k.spool.refuseWrites(true);
        let r: { status: number; text: string };
        try {
          r = await k.send(fresh);
        } finally {
          k.spool.refuseWrites(false);
        }
        // The accepted request is a duplicate by now: a read answers it without a write.
        if (fresh === s.accepted && s.dedup && r.status === 200)
          return { skip: "the kit cannot sign a request the spool has not seen" };
        return r.status === 503 ? null : `${r.status}, expected 503`;
      },
    ],
  ];
  try {
    for (const [name, step] of steps) {
      try {
        const r = await step(k);
        if (r === null) cases.push({ name, outcome: "pass" });
        else if (typeof r === "string") cases.push({ name, outcome: "fail", detail: r });
        else cases.push({ name, outcome: "skip", detail: r.skip });
      } catch (e) {
        cases.push({
          name,
          outcome: "fail",
          detail: `the kit could not run it: ${(e as Error).message.split("\n")[0]}`,
        });
      } finally {
        at(s.now);
      }
    }
    cases.push(sentinelCase(k, s, marker));
  } finally {
    await k.stop();
  }
  return { cases, stored };
}

/** No secret in any log line or column, and no payload marker in any log line. */
function sentinelCase(k: KitIntake, s: KitSubject, marker: string): KitCase {
  const name = "no secret in any log line or column, no payload in any log line";
  const secrets = [
    ...Object.values(s.secrets)
      .map((v) => v.trim())
      .filter((v) => v.length >= 6),
    ...(s.secretSentinels ?? []),
  ];
  // A kit that heard nothing proves nothing.
  if (k.lines.length === 0) return { name, outcome: "fail", detail: "the intake wrote no log line at all" };
  for (const line of k.lines) {
    if (secrets.some((v) => line.includes(v)))
      return { name, outcome: "fail", detail: "a log line holds a secret's value" };
    if ([marker, ...(s.payloadSentinels ?? [])].some((m) => line.includes(m)))
      return { name, outcome: "fail", detail: "a log line holds part of a payload" };
  }
  for (const v of secrets) {
    const at = k.spool.findText(v);
    if (at) return { name, outcome: "fail", detail: `a secret's value is in ${at.table}.${at.column}` };
  }
  return { name, outcome: "pass" };
}
