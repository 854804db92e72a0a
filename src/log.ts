// Structured logs: fixed fields, text or JSON lines (HOOKSPOOL_LOG=json), to stderr.
// Only ids, names, sizes, states, codes and durations: the field set is closed, so a body, a
// header value, a secret or a query string has nowhere to go.
import { createConsola, type ConsolaInstance, type LogObject } from "consola/core";
import { type Clock, systemClock } from "./clock.ts";

export interface LogFields {
  source?: string;
  route?: string;
  batch?: number;
  event?: number;
  destination?: string;
  attempt?: number;
  status?: number;
  bytes?: number;
  duration_ms?: number;
  /** A short, fixed phrase or class name; never a body or a secret. */
  reason?: string;
  tee?: boolean;
  /** The peer address (the reverse proxy's X-Forwarded-For only from loopback). */
  remote?: string;
  /** The address the intake listens on. */
  listen?: string;
  /** A hook URL the intake serves (path only: never a query string). */
  url?: string;
  /** How many identical lines were held back since this line was last printed. */
  repeated?: number;
}

const FIELD_ORDER: (keyof LogFields)[] = [
  "source",
  "route",
  "batch",
  "event",
  "destination",
  "attempt",
  "status",
  "bytes",
  "duration_ms",
  "reason",
  "tee",
  "remote",
  "listen",
  "url",
  "repeated",
];

export type Level = "info" | "warn" | "error";

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /**
   * A line that can repeat many times a second (a full disk, a failing tick): the first goes out
   * at once, identical ones (same message, reason, source and destination) within the next
   * REPEAT_WINDOW_S are only counted, and the next one printed after the window carries the
   * count in `repeated`.
   */
  limited(level: Level, msg: string, fields?: LogFields): void;
  child(component: string): Logger;
}

/** Identical limited lines are printed at most once per this many seconds. */
export const REPEAT_WINDOW_S = 10;

/** Counts identical lines and says when one may be printed again (see Logger.limited). */
export class RepeatLimiter {
  private readonly seen = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly now: () => number,
    private readonly windowS = REPEAT_WINDOW_S,
  ) {}

  /** null: hold this line back; a number: print it, with that many held back since the last. */
  admit(key: string): number | null {
    const t = this.now();
    const s = this.seen.get(key);
    if (s && t - s.at < this.windowS && t >= s.at) {
      s.held++;
      return null;
    }
    const held = s?.held ?? 0;
    this.seen.set(key, { at: t, held: 0 });
    // Forget keys that went quiet, so a long-running process does not collect every reason ever seen.
    if (this.seen.size > 256) for (const [k, v] of this.seen) if (t - v.at >= this.windowS) this.seen.delete(k);
    return held;
  }
}

export type LogSink = (line: string) => void;

let sink: LogSink = (line) => process.stderr.write(`${line}\n`);

/** Send every log line to `fn` (tests); returns a function that restores the previous sink. */
export function setLogSink(fn: LogSink): () => void {
  const prev = sink;
  sink = fn;
  return () => {
    sink = prev;
  };
}

const CONTROL = /[\u0000-\u001f\u007f]/;
const CONTROLS = /[\u0000-\u001f\u007f]/g;

/** A string field as a line may carry it: no control characters, at most 200 of them. */
function cleanText(v: string): string {
  const flat = CONTROL.test(v) ? v.replace(CONTROLS, " ") : v;
  return flat.length > 200 ? flat.slice(0, 200) : flat;
}

function clean(fields: LogFields | undefined): LogFields {
  const out: Record<string, unknown> = {};
  if (!fields) return out;
  for (const k of FIELD_ORDER) {
    const v = fields[k];
    if (v !== undefined && v !== null) out[k] = typeof v === "string" ? cleanText(v) : v;
  }
  return out as LogFields;
}

/** The text form's timestamp, made once per second rather than once per line. */
let stampSecond = Number.NaN;
let stampText = "";
function stampOf(ts: number): string {
  const second = Math.floor(ts);
  if (second !== stampSecond) {
    stampSecond = second;
    stampText = new Date(second * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  }
  return stampText;
}

const SPACE = /\s/;

function format(json: boolean, ts: number, level: string, component: string, msg: string, fields: LogFields): string {
  if (json) return JSON.stringify({ ts, level, component, msg, ...fields });
  let line = `${stampOf(ts)} ${level.padEnd(5)} ${component}: ${msg}`;
  for (const k in fields) {
    const v = fields[k as keyof LogFields];
    line += ` ${k}=${typeof v === "string" && SPACE.test(v) ? JSON.stringify(v) : v}`;
  }
  return line;
}

const RANK: Record<Level, number> = { info: 0, warn: 1, error: 2 };

/**
 * The least level printed: HOOKSPOOL_LOG_LEVEL=warn keeps warnings and errors only (the intake's
 * per-request lines go), =error errors only; anything else, info. A line below it costs a call.
 */
export function logThreshold(env: Record<string, string | undefined> = process.env): Level {
  const v = env.HOOKSPOOL_LOG_LEVEL?.trim().toLowerCase();
  return v === "warn" || v === "error" ? v : "info";
}

export interface LoggerOptions {
  /** JSON lines instead of text; default from HOOKSPOOL_LOG=json. */
  json?: boolean;
  /** The least level printed; default from HOOKSPOOL_LOG_LEVEL (logThreshold). */
  level?: Level;
  clock?: Clock;
}

/** A logger for one component (intake, dispatch, ...). */
export function createLogger(component: string, opts: LoggerOptions = {}): Logger {
  const json = opts.json ?? process.env.HOOKSPOOL_LOG === "json";
  const clock = opts.clock ?? systemClock;
  const consola: ConsolaInstance = createConsola({
    level: 3,
    // consola folds repeated identical lines by default; every queued line must be kept.
    throttle: 0,
    reporters: [
      {
        log(obj: LogObject) {
          const [msg, fields] = obj.args as [string, LogFields];
          sink(
            format(
              json,
              clock.now(),
              obj.type === "warn" ? "warn" : obj.type === "error" ? "error" : "info",
              component,
              msg,
              fields,
            ),
          );
        },
      },
    ],
  });
  const limiter = new RepeatLimiter(() => clock.now());
  const level = opts.level ?? logThreshold();
  const off = () => {};
  const on = (l: Level) => RANK[l] >= RANK[level];
  const log: Logger = {
    info: on("info") ? (msg, fields) => consola.info(msg, clean(fields)) : off,
    warn: on("warn") ? (msg, fields) => consola.warn(msg, clean(fields)) : off,
    error: (msg, fields) => consola.error(msg, clean(fields)),
    limited(l, msg, fields = {}) {
      if (!on(l)) return;
      const held = limiter.admit([msg, fields.reason, fields.source, fields.destination].join("\u0000"));
      if (held === null) return;
      log[l](msg, held > 0 ? { ...fields, repeated: held } : fields);
    },
    child: (sub) => createLogger(`${component}.${sub}`, { json, clock, level }),
  };
  return log;
}
