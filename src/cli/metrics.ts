// hookspool metrics: the table-derived part of GET /metrics, for a cron or a textfile collector.
import type { CommandDef } from "citty";
import { renderSpoolMetrics } from "../obs/metrics.ts";
import { type Cli, GLOBAL_ARGS, loadFor, openExisting, withPg } from "./context.ts";
import { isPostgres } from "../config/backend.ts";
import { pgMetricsText } from "../obs/status-pg.ts";

export function metricsCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "metrics", description: "print the /metrics gauges computed from the spool (Prometheus text)" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const { config, paths } = loadFor(cli);
      if (isPostgres(config)) {
        cli.io.out((await withPg(cli, config, (pg) => pgMetricsText(pg, config, cli.clock.now()))).trimEnd());
        return 0;
      }
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
