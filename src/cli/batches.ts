// Reading batches: hookspool list and hookspool show. Payloads only on request.
import type { CommandDef } from "citty";
import { exposeSummary } from "../config/expose.ts";
import { HookspoolError } from "../errors.ts";
import { DEAD_REASON_TEXT } from "./dead-reasons.ts";
import { FILTER_ARGS, filterOf } from "./filters.ts";
import { humanAge, humanBytes, isoTime, table, visible } from "./format.ts";
import { type Cli, GLOBAL_ARGS, loadForReading, openOperatorStore, positiveInt } from "./context.ts";
import { leaseConsumer } from "../store/pull.ts";
import type { BatchRow, EventListing } from "../store/batches.ts";
import { isStale } from "../store/stale-plan.ts";

/**
 * A batch as list --json gives it: a pull consumer's lease names its holder (lease_consumer); its
 * owner comes from the store without the lease's nonce.
 */
function listed(b: BatchRow): BatchRow & { lease_consumer?: string } {
  const consumer = leaseConsumer(b.lease_owner);
  return consumer === null ? b : { ...b, lease_consumer: consumer };
}

/**
 * What the stale rule made of a listed event, by its trace's rule and the floor its batch was
 * judged against at its first lease (store/stale-plan.ts); null: neither marked nor left out.
 */
function staleOf(b: BatchRow, e: EventListing): "mark" | "skip" | null {
  const rule = e.trace?.stale;
  if (rule !== "mark" && rule !== "skip") return null;
  return isStale(e.version, b.floor_at === null ? null : b.stale_floor) ? rule : null;
}

/** The stale part of WHY HERE: the event's version, and whether its batch's first lease found it stale. */
function staleText(b: BatchRow, e: EventListing): string {
  if (e.version === null) return "";
  const s = staleOf(b, e);
  if (s === null) return `, version ${e.version}`;
  const why = `version ${e.version} < ${b.stale_floor} delivered`;
  return s === "skip" ? `, stale: left out (${why})` : `, stale: marked (${why})`;
}

/** A routing trace in a few words: the stage, the rule and what it matched, where the window came from. */
function traceText(t: Record<string, unknown> | null): string {
  if (!t) return "-";
  if (t.stage === "quarantined") return `quarantined: ${String(t.reason)}`;
  const rule = typeof t.rule_index === "number" ? ` (rule ${t.rule_index + 1}` : "";
  const matched = Object.entries((t.matched as Record<string, string>) ?? {}).map(([k, v]) => `${k}=${v}`);
  const w = t.window as { quiet_s?: number; from?: string } | undefined;
  const ruleText = rule ? `${rule}${matched.length ? `, matched ${matched.join(" ")}` : ""})` : "";
  const expose = t.expose ? `, ${exposeSummary(t.expose)}` : "";
  return `${String(t.stage)} ${String(t.route)}${ruleText}, window from ${w?.from ?? "-"}${expose}`;
}

function listCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "list",
      description: "batches, newest first, without payloads (--destination quarantine: quarantined requests)",
    },
    args: {
      ...GLOBAL_ARGS,
      ...FILTER_ARGS,
      before: {
        type: "string",
        description: "the next page: batches older than this id (the last line says it)",
        valueHint: "ID",
      },
      limit: { type: "string", description: "at most this many", default: "50", valueHint: "n" },
    },
    async run({ args, rawArgs }) {
      const filter = filterOf(args, cli.clock.now(), rawArgs);
      const limit = positiveInt(args.limit, "--limit");
      const before = args.before === undefined ? undefined : positiveInt(args.before, "--before");
      const store = await openOperatorStore(cli, loadForReading(cli));
      try {
        const rows = await store.listBatches({ ...filter, before, limit });
        if (cli.globals.json) {
          cli.io.out(JSON.stringify(rows.map(listed)));
          return 0;
        }
        if (rows.length === 0) {
          cli.io.out("no batches");
          return 0;
        }
        const now = cli.clock.now();
        // A HELD BY column only when a pull consumer holds one of these batches.
        const held = rows.some((b) => leaseConsumer(b.lease_owner) !== null);
        cli.io.out(
          table(
            [
              "ID",
              "STATE",
              ...(held ? ["HELD BY"] : []),
              "SOURCE",
              "ROUTE",
              "KEY",
              "DESTINATION",
              "EVENTS",
              "BYTES",
              "AGE",
              "LAST",
            ],
            // A dead batch's LAST is why it died: the receiver's refusal or the pipeline's fault.
            rows.map((b) => [
              b.id,
              b.state,
              ...(held ? [leaseConsumer(b.lease_owner) ?? ""] : []),
              b.source,
              b.route,
              b.key,
              b.destination,
              b.count,
              humanBytes(b.bytes),
              humanAge(now - b.first_at),
              (b.state === "dead" ? b.dead_reason : null) ?? b.last_class ?? "",
            ]),
          ),
        );
        // A full page may have more behind it: the cursor for the next.
        if (rows.length === limit) cli.io.out(`more: --before ${rows[rows.length - 1].id}`);
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}

function showCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "show", description: "one batch; --events, --attempts, and --payload (payloads only on request)" },
    args: {
      ...GLOBAL_ARGS,
      batch: { type: "positional", description: "batch id", required: true },
      events: { type: "boolean", description: "list events: ids, types, sizes, dedup ids, exclusion (no payloads)" },
      payload: { type: "boolean", description: "print the stored payloads (may hold secrets or personal data)" },
      attempts: { type: "boolean", description: "list attempts" },
    },
    async run({ args }) {
      const id = positiveInt(args.batch, "batch");
      const store = await openOperatorStore(cli, loadForReading(cli));
      try {
        const b = await store.getBatch(id);
        if (!b) throw new HookspoolError("E_NOT_FOUND", `no batch ${id}`);
        const events = args.events ? await store.batchEvents(id) : undefined;
        const attempts = args.attempts ? await store.batchAttempts(id) : undefined;
        const payloads = args.payload ? await store.batchPayloads(id) : undefined;
        if (payloads && cli.io.isTTY) cli.io.err("warning: payloads may hold secrets or personal data");
        if (cli.globals.json) {
          const out: Record<string, unknown> = { batch: b };
          // Each event with what its batch's first lease found of it: "mark", "skip" or null.
          if (events) out.events = events.map((e) => ({ ...e, stale: staleOf(b, e) }));
          if (attempts) out.attempts = attempts;
          if (payloads) {
            out.payloads = payloads.map((p) => ({
              id: p.id,
              payload: p.payload,
              headers: JSON.parse(p.headers),
              raw_base64: p.raw ? Buffer.from(p.raw).toString("base64") : null,
            }));
          }
          cli.io.out(JSON.stringify(out));
          return 0;
        }
        const now = cli.clock.now();
        const lines: [string, string][] = [
          ["batch", String(b.id)],
          ["state", b.state + (b.result ? ` (${b.result})` : "")],
          ["source", b.source],
          ["route", b.route],
          ["key", b.key],
          ["destination", b.destination],
          ["events", `${b.count} (${humanBytes(b.bytes)})`],
          ["window", `quiet ${b.quiet_s}s, max ${b.max_s}s, ${b.max_events} events, ${humanBytes(b.max_bytes)}`],
          ["first event", `${isoTime(b.first_at)} (${humanAge(now - b.first_at)} ago)`],
          ["last event", `${isoTime(b.last_at)} (${humanAge(now - b.last_at)} ago)`],
          ["sealed", isoTime(b.sealed_at)],
          ["content_hash", b.content_hash ?? "-"],
          ["attempts", `${b.attempts} counted`],
        ];
        // An awaiting batch's next_attempt_at is when its outcome is overdue.
        if (b.state === "awaiting" && b.next_attempt_at !== null) {
          lines.push([
            "awaiting",
            "the outcome of its run (hookspool outcome <webhook-id> ok|failed); " +
              `overdue ${isoTime(b.next_attempt_at)} (in ${humanAge(b.next_attempt_at - now)})`,
          ]);
        } else if (b.next_attempt_at !== null)
          lines.push(["next attempt", `${isoTime(b.next_attempt_at)} (in ${humanAge(b.next_attempt_at - now)})`]);
        if (b.not_before !== null) lines.push(["not before", isoTime(b.not_before)]);
        // The version its key had delivered when it was first leased: its events are judged by it.
        if (b.floor_at !== null && b.stale_floor !== null)
          lines.push(["stale floor", `version ${b.stale_floor}, its key's last delivered at ${isoTime(b.floor_at)}`]);
        if (b.lease_owner) {
          const consumer = leaseConsumer(b.lease_owner);
          const holder = consumer === null ? b.lease_owner : `consumer ${consumer} (${b.lease_owner})`;
          lines.push(["lease", `${holder} until ${isoTime(b.lease_until)}`]);
        }
        if (b.last_class || b.last_error) lines.push(["last error", `${b.last_class ?? "-"}: ${b.last_error ?? ""}`]);
        if (b.delivered_at !== null)
          lines.push([b.state === "delivered" ? "delivered" : "finished", isoTime(b.delivered_at)]);
        if (b.state === "dead") {
          lines.push([
            "dead because",
            `${b.dead_reason ?? "-"} (${DEAD_REASON_TEXT[b.dead_reason ?? ""] ?? "unknown"})`,
          ]);
          lines.push(["next step", `hookspool replay ${b.id}`]);
        }
        const w = Math.max(...lines.map(([k]) => k.length));
        cli.io.out(lines.map(([k, v]) => `${k.padEnd(w)}  ${visible(v)}`).join("\n"));
        if (events) {
          cli.io.out("");
          cli.io.out(
            table(
              ["EVENT", "TYPE", "RECEIVED", "BYTES", "DEDUP ID", "EXCLUDED", "WHY HERE"],
              events.map((e) => [
                e.id,
                e.event_type || "-",
                isoTime(e.received_at),
                e.size,
                e.dedup_id ?? "-",
                e.excluded_at ? isoTime(e.excluded_at) : "",
                traceText(e.trace) + staleText(b, e),
              ]),
            ),
          );
        }
        if (attempts) {
          cli.io.out("");
          cli.io.out(
            attempts.length
              ? table(
                  ["ATTEMPT", "N", "STARTED", "OUTCOME", "CLASS", "STATUS", "MS", "PROBE", "COUNTED", "ERROR"],
                  attempts.map((a) => [
                    a.id,
                    a.n,
                    isoTime(a.started_at),
                    a.outcome ?? "running",
                    a.klass ?? "",
                    a.status ?? "",
                    a.duration_ms ?? "",
                    a.probe ? "yes" : "",
                    a.counted ? "yes" : "",
                    a.error ?? "",
                  ]),
                )
              : "no attempts",
          );
        }
        if (payloads) {
          for (const p of payloads) {
            cli.io.out("");
            cli.io.out(`--- event ${p.id}`);
            // A payload is a sender's bytes: shown escaped, never as terminal commands.
            cli.io.out(
              p.payload !== null
                ? visible(p.payload)
                : `(quarantined request, ${p.raw?.length ?? 0} raw bytes; ` +
                    `headers ${visible(p.headers)})\n${p.raw ? visible(new TextDecoder().decode(p.raw)) : ""}`,
            );
          }
        }
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}

export function batchCommands(cli: Cli): Record<string, CommandDef> {
  return { list: listCommand(cli), show: showCommand(cli) };
}
