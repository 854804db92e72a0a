// hookspool metrics: the table-derived part of GET /metrics, for a cron or a textfile collector.
import type { CommandDef } from "citty";
import { renderStoreMetrics } from "../obs/metrics.ts";
import { openStores } from "../store/open.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";

export function metricsCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "metrics", description: "print the /metrics gauges computed from the spool (Prometheus text)" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const { config, paths } = loadFor(cli);
      const stores = await openStores(config, { mode: "operator", paths, env: cli.io.env, clock: cli.clock });
      try {
        cli.io.out(
          (await renderStoreMetrics(stores.status(), config, paths.spoolFile, { now: cli.clock.now() })).trimEnd(),
        );
        return 0;
      } finally {
        await stores.close();
      }
    },
  };
}
