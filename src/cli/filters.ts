// The batch filters list and export share: state, source, destination, dead reason, key, the
// last attempt's status code, a time range on the batch's last event, and --where's conditions
// on the stored payloads (replay --dead and route test take those too).
import { BATCH_STATES, type BatchFilter, type BatchState } from "../store/batches.ts";
import { type PayloadCondition, parseWheres, WHERE_GRAMMAR } from "../store/where.ts";
import { HookspoolError } from "../errors.ts";
import { deadReasonArg } from "./dead-reasons.ts";
import { DEAD_REASONS } from "../delivery.ts";
import { parseSince } from "../time.ts";

export const FILTER_ARGS = {
  state: { type: "string", description: `only batches in this state: ${BATCH_STATES.join(", ")}` },
  source: { type: "string", description: "only this source" },
  destination: { type: "string", description: "only this destination (quarantine: quarantined requests)" },
  reason: {
    type: "string",
    description: `only dead batches that died for this reason: ${DEAD_REASONS.join(", ")}`,
    valueHint: "R",
  },
  key: { type: "string", description: "only batches of this coalesce key", valueHint: "K" },
  status: {
    type: "string",
    description: "only batches whose last attempt ended with this HTTP status or exit code",
    valueHint: "CODE",
  },
  since: {
    type: "string",
    description: "only batches whose last event is at or after T (Unix seconds, ISO date, or an age: 24h, 7d)",
    valueHint: "T",
  },
  until: {
    type: "string",
    description: "only batches whose last event is at or before T (same forms)",
    valueHint: "T",
  },
  where: {
    type: "string",
    description:
      `only batches with an event whose payload matches: ${WHERE_GRAMMAR}. Repeat it: ` +
      "one event must match every condition",
    valueHint: "COND",
  },
} as const;

/** --where as route test says it: of each stored request, not of a batch. */
export const REQUEST_WHERE_ARG = {
  type: "string",
  description: `only requests whose payload matches: ${WHERE_GRAMMAR}. Repeat it: a request matches every one`,
  valueHint: "COND",
} as const;

/**
 * Every --where given, in order (citty keeps only a repeated flag's last value): `--where C` and
 * `--where=C`, up to a bare --.
 */
export function whereArgs(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    const a = raw[i];
    if (a === "--") break;
    if (a === "--where") {
      if (i + 1 >= raw.length)
        throw new HookspoolError("E_USAGE", "--where needs a condition", { hint: WHERE_GRAMMAR });
      out.push(raw[++i]);
    } else if (a.startsWith("--where=")) out.push(a.slice(8));
  }
  return out;
}

/** --where's conditions, checked (a bad one is E_USAGE, one line); undefined when none is given. */
export function whereOf(raw: readonly string[]): PayloadCondition[] | undefined {
  const texts = whereArgs(raw);
  return texts.length ? parseWheres(texts) : undefined;
}

type FilterArgs = Readonly<Record<string, unknown>>;

/**
 * The filter the flags give (`raw`: the command's arguments, for every --where), each checked: a
 * bad value is E_USAGE with the flag's name.
 */
export function filterOf(args: FilterArgs, now: number, raw: readonly string[]): BatchFilter {
  const state = args.state as string | undefined;
  if (state !== undefined && !BATCH_STATES.includes(state as BatchState))
    throw new HookspoolError("E_USAGE", `--state must be one of ${BATCH_STATES.join(", ")}`);
  let status: number | undefined;
  if (args.status !== undefined) {
    status = Number(args.status);
    if (!/^\d{1,3}$/.test(String(args.status)))
      throw new HookspoolError("E_USAGE", "--status must be an HTTP status or exit code (0-999)");
  }
  const time = (v: unknown) => (v === undefined ? undefined : parseSince(String(v), now));
  const f: BatchFilter = {
    state: state as BatchState | undefined,
    source: args.source as string | undefined,
    destination: args.destination as string | undefined,
    reason: deadReasonArg(args.reason),
    key: args.key as string | undefined,
    status,
    since: time(args.since),
    until: time(args.until),
    where: whereOf(raw),
  };
  if (f.since !== undefined && f.until !== undefined && f.since > f.until)
    throw new HookspoolError("E_USAGE", "--since is after --until");
  return Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined)) as BatchFilter;
}
