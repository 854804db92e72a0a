// Structured logs (spec 11.3): fixed fields, text or JSON lines (HOOKSPOOL_LOG=json), to stderr.
// Only ids, names, sizes, states, codes and durations: the field set is closed, so a body, a
// header value, a secret or a query string has nowhere to go.
import { createConsola, type ConsolaInstance, type LogObject } from "consola";
import { type Clock, systemClock } from "../clock.ts";

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
}

const FIELD_ORDER: (keyof LogFields)[] = ["source", "route", "batch", "event", "destination", "attempt", "status", "bytes", "duration_ms", "reason", "tee", "remote"];

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(component: string): Logger;
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
    if (v !== undefined && v !== null) out[k] = typeof v === "string" ? v.replace(/[\u0000-\u001f\u007f]/g, " ").slice(0, 200) : v;
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
          sink(format(json, clock.now(), obj.type === "warn" ? "warn" : obj.type === "error" ? "error" : "info", component, msg, fields));
        },
      },
    ],
  });
  return {
    info: (msg, fields) => consola.info(msg, clean(fields)),
    warn: (msg, fields) => consola.warn(msg, clean(fields)),
    error: (msg, fields) => consola.error(msg, clean(fields)),
    child: (sub) => createLogger(`${component}.${sub}`, { json, clock }),
  };
}
