// hookspool status: the health document (the same one GET /healthz answers), or a readable
// summary of it; exit 1 while it reports a problem, so a cron or a probe can act on it.
import { dirname } from "node:path";
import type { CommandDef } from "citty";
import { loadEverySource } from "../config/sources.ts";
import type { DestinationStatus, SourceStatus, StatusDoc } from "../obs/status.ts";
import { storeStatus } from "../obs/store-status.ts";
import { CorruptSpool } from "../store/corrupt.ts";
import { humanAge, humanBytes, table, visible } from "./format.ts";
import { type Cli, GLOBAL_ARGS, loadForReading, openOperatorStores } from "./context.ts";

function summary(doc: StatusDoc): string {
  const out: string[] = [];
  out.push(doc.ok ? "hookspool: ok" : `hookspool: ${doc.degraded.length} problem(s)`);
  for (const d of doc.degraded) out.push(`  - ${visible(d)}`);
  out.push("");
  const hb = doc.dispatcher.heartbeat_age_s;
  const heartbeat = hb !== null ? ` (heartbeat ${humanAge(hb)} ago, pid ${doc.dispatcher.pid ?? "-"})` : "";
  out.push(`dispatcher   ${doc.dispatcher.alive ? "alive" : "not running"}${heartbeat}`);
  for (const d of doc.dispatchers ?? []) {
    const holds = doc.maintenance?.holder === d.id ? ", holds maintenance" : "";
    out.push(
      `  ${visible(d.id)}  ${d.alive ? "alive" : "stale"}, heartbeat ${humanAge(d.heartbeat_age_s)} ago${holds}`,
    );
  }
  const checked = doc.spool.integrity_checked_age_s;
  const integrity =
    checked === undefined
      ? ""
      : `, integrity checked ${checked === null ? "never (status --deep checks it)" : `${humanAge(checked)} ago`}`;
  const disk = doc.disk_free_bytes === null ? "disk: the database server's" : `${humanBytes(doc.disk_free_bytes)} free`;
  const enqueued = doc.spool.last_enqueue_age_s;
  out.push(
    `spool        schema ${doc.schema}, ${humanBytes(doc.spool_bytes)}, ${disk}, ` +
      `last enqueue ${enqueued === null ? "never" : `${humanAge(enqueued)} ago`}${integrity}`,
  );
  const b = doc.batches;
  out.push(
    `batches      ${b.open} open, ${b.sealed} sealed, ${b.leased} leased, ${b.retry} retry, ${b.awaiting} awaiting, ` +
      `${b.delivered} delivered, ${b.dead} dead, ${b.dropped} dropped, ${b.quarantined} quarantined`,
  );
  const dead = Object.entries(doc.dead_by_reason).filter(([r, n]) => n > 0 && r !== "quarantined");
  if (dead.length) out.push(`dead         ${dead.map(([r, n]) => `${n} ${r}`).join(", ")}`);
  const oldest = doc.oldest_pending_age_s;
  out.push(`oldest       ${oldest === null ? "nothing pending" : `${humanAge(oldest)} pending`}`);
  out.push(`issues       ${doc.issues_open} open`);
  const dests = Object.entries(doc.destinations);
  if (dests.length) {
    out.push("");
    // A BUDGET column only when some destination has a run budget.
    const budgeted = dests.some(([, d]) => d.budget || d.key_budget);
    const head = [
      "DESTINATION",
      "STATE",
      "INFLIGHT",
      "WINDOW",
      ...(budgeted ? ["BUDGET"] : []),
      "OLDEST",
      "LAST ERROR",
    ];
    out.push(
      table(
        head,
        dests.map(([n, d]) => [
          n,
          gateWords(d),
          d.inflight ?? "-",
          windowWords(d),
          ...(budgeted ? [budgetWords(d)] : []),
          humanAge(d.oldest_pending_age_s),
          d.last_error ?? "",
        ]),
      ),
    );
  }
  // Pull destinations' consumers: who leased last and when, and what each holds now.
  const pulls = dests.filter(([, d]) => d.type === "pull");
  if (pulls.length) {
    out.push("");
    out.push(
      table(
        ["PULL DESTINATION", "CONSUMER", "LAST LEASE", "LEASED"],
        pulls.flatMap(([n, d]) =>
          d.consumers?.length
            ? d.consumers.map((c) => [
                n,
                c.name,
                c.last_lease_age_s === null ? "-" : `${humanAge(c.last_lease_age_s)} ago`,
                c.leased,
              ])
            : [[n, "none yet", "-", 0]],
        ),
      ),
    );
  }
  const sources = Object.entries(doc.sources);
  if (sources.length) {
    out.push("");
    // A PROVIDER column (the last health probe's answer) only when some source has a probe.
    const probed = sources.some(([, s]) => s.probe);
    out.push(
      table(
        ["SOURCE", "LAST EVENT", "EXPECTED EVERY", "SILENT", ...(probed ? ["PROVIDER"] : [])],
        sources.map(([n, s]) => [
          n,
          s.last_event_age_s === null ? "never" : `${humanAge(s.last_event_age_s)} ago`,
          s.expected_every_s ? humanAge(s.expected_every_s) : "-",
          s.silent ? "yes" : "",
          ...(probed ? [probeWords(s.probe)] : []),
        ]),
      ),
    );
  }
  return out.join("\n");
}

/** The last health probe: "sends (asked 5m ago)", "disabled: status=disabled", "unknown: <why>". */
function probeWords(p: SourceStatus["probe"]): string {
  if (!p) return "-";
  const asked = `asked ${humanAge(p.age_s)} ago`;
  if (p.healthy === true) return `sends (${asked})`;
  if (p.healthy === false) return `disabled: ${p.says ?? ""} (${asked})`;
  return `unknown: ${p.error ?? ""} (${asked})`;
}

/** The breaker state, and a 429 or Retry-After gate with its time left. */
function gateWords(d: DestinationStatus): string {
  if (d.gated_for_s === undefined) return d.throttled ? `${d.state}, probing after a 429` : d.state;
  return `${d.state}, ${d.throttled ? "429" : "Retry-After"} gate ${humanAge(d.gated_for_s)} left`;
}

/** A paced destination's window: "12/30 per 60 s", and when the next slot frees if it is full. */
function windowWords(d: DestinationStatus): string {
  if (!d.rate) return "-";
  const full =
    d.rate.next_free_in_s !== null
      ? `, next in ${humanAge(d.rate.next_free_in_s)}`
      : d.rate.used >= d.rate.limit
        ? ", full"
        : "";
  return `${d.rate.used}/${d.rate.limit} per ${humanAge(d.rate.window_s)}${full}`;
}

/** A destination's run budgets: "20/20 per 1h, held; key 3 per 1h". */
function budgetWords(d: DestinationStatus): string {
  const parts: string[] = [];
  if (d.budget) {
    const held = d.budget.next_free_at !== null ? ", held" : "";
    parts.push(`${d.budget.used}/${d.budget.limit} per ${humanAge(d.budget.window_s)}${held}`);
  }
  if (d.key_budget) parts.push(`key ${d.key_budget.limit} per ${humanAge(d.key_budget.window_s)}`);
  return parts.length ? parts.join("; ") : "-";
}

export function statusCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "status",
      description: "health of the spool, dispatcher, destinations and sources; exit 1 while any problem is reported",
    },
    args: {
      ...GLOBAL_ARGS,
      deep: {
        type: "boolean",
        description: "also read the whole spool file through (SQLite's quick_check): a corrupt one is exit 2",
      },
    },
    async run({ args }) {
      const { config, paths } = loadForReading(cli);
      // The plugins' own liveness expectations count where config sets none; a plugin that
      // does not load is check's to report, not status's.
      const { sources: plugins } = await loadEverySource(config, {
        configDir: dirname(paths.config ?? paths.home),
        env: cli.io.env,
        file: paths.config ?? "config.toml",
      });
      const stores = await openOperatorStores(cli, { config, paths });
      try {
        if (args.deep) {
          // null: the server checks its own pages (PostgreSQL).
          const problems = await stores.operator().checkIntegrity();
          if (problems?.length) throw new CorruptSpool(paths.spoolFile, problems);
        }
        const { doc } = await storeStatus(stores.status(), config, paths.spoolFile, {
          now: cli.clock.now(),
          plugins,
          env: cli.io.env,
        });
        cli.io.out(cli.globals.json ? JSON.stringify(doc) : summary(doc));
        return doc.ok ? 0 : 1;
      } finally {
        await stores.close();
      }
    },
  };
}
