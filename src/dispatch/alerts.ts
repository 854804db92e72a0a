// Alerts: each open issue alerts once, again only after a reopen; at most one per
// rate_limit_s per kind; alerts.argv runs with the text as its last argument, off the main loop,
// and alerted_at is set only when it exits 0, so an alert is not lost while the sender is down.
import type { Config } from "../config/types.ts";
import type { Env } from "../config/load.ts";
import { caughtFault, type Faults } from "../obs/faults.ts";
import type { Logger } from "../log.ts";
import type { AlertStore } from "../store/api.ts";
import type { IssueRow } from "../store/issues.ts";
import { Chore, type ChoreContext } from "./chores.ts";

function ago(now: number, t: number): string {
  const s = Math.max(0, now - t);
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5400) return `${Math.round(s / 60)}m`;
  if (s < 129600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/** The alert text: what broke, where, how often, and the command to run next. */
export function alertText(i: IssueRow, now: number): string {
  const parts = i.fingerprint.split(":");
  const times = `${i.count} time(s), first ${ago(now, i.first_at)} ago`;
  const err = i.last_error ? `: ${i.last_error}` : "";
  switch (i.kind) {
    case "delivery": {
      const reason = parts[parts.length - 1];
      const next = ["permanent", "poison", "exhausted"].includes(reason)
        ? `hookspool show ${i.sample_batch_id ?? "<batch>"} --attempts, ` +
          `then split/exclude and hookspool replay ${i.sample_batch_id ?? "<batch>"}`
        : reason === "ignored"
          ? `hookspool issues resolve ${i.id} once the route's events/coalesce settings are right`
          : `hookspool status; hookspool issues list`;
      return (
        `hookspool issue #${i.id}: delivery to ${i.destination ?? "?"} failing (${reason}), ` +
        `${times}${err}. Next: ${next}`
      );
    }
    case "source_silent": {
      const silent =
        parts[0] === "poll" ? `poll ${parts[1]} has delivered no tick` : `source ${parts[1]} has sent nothing`;
      return (
        `hookspool issue #${i.id}: ${silent} for longer than expected${err}. ` +
        "Next: check the sender (webhook, watch channel, subscription) and hookspool status"
      );
    }
    case "internal":
      return (
        `hookspool issue #${i.id}: a bug in hookspool (${parts.slice(1, 3).join(" ")}), ` +
        `${times}${err}. The part that failed keeps running. ` +
        "Next: hookspool issues list --json shows where it happened; report it with that text"
      );
    case "source":
      return (
        `hookspool issue #${i.id}: source ${parts[2] ?? "?"} sends requests that verify but cannot be queued, ` +
        `${times}${err}. Next: hookspool list --destination quarantine, ` +
        "then fix the sender or the source's settings and hookspool replay the batch"
      );
    case "spool":
      return (
        `hookspool issue #${i.id}: spool limit ${parts.slice(1).join(":")} active, ` +
        `${times}${err}. Next: free disk space, hookspool prune, hookspool status`
      );
    default:
      return (
        `hookspool issue #${i.id}: config problem ${parts.slice(1).join(":")}, ` +
        `${times}${err}. Next: hookspool check`
      );
  }
}

export interface AlertDeps {
  store: AlertStore;
  config: Config;
  env: Env;
  log: Logger;
  now: number;
  /** Where a failed alert goes (a refused write, a bug); without it, logged and counted only. */
  faults?: Faults;
}

/** Send the alerts that are due. Returns the issue ids alerted. */
export async function runAlerts(d: AlertDeps): Promise<number[]> {
  const { store, config, log } = d;
  const dry = config.alerts.dry || d.env.HOOKSPOOL_ALERT_DRY === "1";
  const sent: number[] = [];
  for (const issue of await store.issuesToAlert()) {
    // One issue's failure (a refused write, a command that cannot start) never holds back the rest.
    try {
      if (await alertOne(d, issue, dry)) sent.push(issue.id);
    } catch (e) {
      if (d.faults) d.faults.caught("alert", e);
      else caughtFault(log, "alerts", "alert", e);
    }
  }
  return sent;
}

/** Send (or, dry, record) one issue's alert when its kind's slot is free; true when it went out. */
async function alertOne(d: AlertDeps, issue: IssueRow, dry: boolean): Promise<boolean> {
  const { store, config, log, now } = d;
  if (!(await store.alertSlotFree(issue.kind, now, config.alerts.rate_limit_s))) return false;
  const text = alertText(issue, now);
  if (dry) {
    await store.markAlerted(issue.id, issue.kind, now);
    log.info("alert recorded (dry)", { reason: issue.fingerprint });
    return true;
  }
  const code = await runCommand([...config.alerts.argv, text], config.alerts.timeout_s, d.env);
  if (code !== 0) {
    log.limited("warn", "alert command failed; will try again", {
      reason: issue.fingerprint,
      status: code ?? undefined,
    });
    return false;
  }
  await store.markAlerted(issue.id, issue.kind, now);
  log.info("alert sent", { reason: issue.fingerprint });
  return true;
}

/** Run argv (no shell) with a time limit; its own process group is killed at the limit. */
async function runCommand(argv: string[], timeoutS: number, env: Env): Promise<number | null> {
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn(argv, {
      env: { PATH: env.PATH ?? "/usr/bin:/bin", HOME: env.HOME ?? "/", LANG: env.LANG ?? "C.UTF-8" },
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
      detached: true,
    });
  } catch {
    return null;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {
      proc.kill("SIGKILL");
    }
  }, timeoutS * 1000);
  const code = await proc.exited;
  clearTimeout(timer);
  return proc.signalCode ? null : code;
}

/** The alerts chore: every maintenance interval, send the alerts that are due. */
export function alertsChore(ctx: ChoreContext): Chore {
  return new Chore("alerts", ctx, async (now) => {
    await runAlerts({ store: ctx.store, config: ctx.config(), env: ctx.env, log: ctx.log, now, faults: ctx.faults });
  });
}
