// Structured logs: fixed fields, text or JSON lines (HOOKSPOOL_LOG=json), to stderr.
// Only ids, names, sizes, states, codes and durations: the field set is closed, so a body, a
// header value, a secret or a query string has nowhere to go.
import { createConsola, type ConsolaInstance, type LogObject } from "consola";
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

function clean(fields: LogFields | undefined): LogFields {
  const out: Record<string, unknown> = {};
  if (!fields) return out;
  for (const k of FIELD_ORDER) {
    const v = fields[k];
    if (v !== undefined && v !== null)
      out[k] = typeof v === "string" ? v.replace(/[\u0000-\u001f\u007f]/g, " ").slice(0, 200) : v;
  }
  return out as LogFields;
}

function format(json: boolean, ts: number, level: string, component: string, msg: string, fields: LogFields): string {
  if (json) return JSON.stringify({ ts, level, component, msg, ...fields });
  const when = new Date(ts * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  const kv = Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === "string" && /\s/.test(v) ? JSON.stringify(v) : v}`)
    .join(" ");
  return `${when} ${level.padEnd(5)} ${component}: ${msg}${kv ? ` ${kv}` : ""}`;
}

export interface LoggerOptions {
  /** JSON lines instead of text; default from HOOKSPOOL_LOG=json. */
  json?: boolean;
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
  const log: Logger = {
    info: (msg, fields) => consola.info(msg, clean(fields)),
    warn: (msg, fields) => consola.warn(msg, clean(fields)),
    error: (msg, fields) => consola.error(msg, clean(fields)),
    limited(level, msg, fields = {}) {
      const held = limiter.admit([msg, fields.reason, fields.source, fields.destination].join("\u0000"));
      if (held === null) return;
      log[level](msg, held > 0 ? { ...fields, repeated: held } : fields);
    },
    child: (sub) => createLogger(`${component}.${sub}`, { json, clock }),
  };
  return log;
}
