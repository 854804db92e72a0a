// hookspool metrics: the table-derived part of GET /metrics, for a cron or a textfile collector.
import type { CommandDef } from "citty";
import { renderSpoolMetrics } from "../obs/metrics.ts";
import { type Cli, GLOBAL_ARGS, loadFor, openExisting, sqliteOnly } from "./context.ts";

export function metricsCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "metrics", description: "print the /metrics gauges computed from the spool (Prometheus text)" },
    args: { ...GLOBAL_ARGS },
    run() {
      const { config, paths } = loadFor(cli);
      sqliteOnly(config, "hookspool metrics");
      const spool = openExisting(cli, paths.spoolFile);
      try {
        cli.io.out(renderSpoolMetrics(spool, config, paths.spoolFile, { now: cli.clock.now() }).trimEnd());
        return 0;
      } finally {
        spool.close();
      }
    },
  };
}
