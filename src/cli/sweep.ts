// hookspool sweep <instance>: recover what a sender that never retries could not deliver, for a
// bobbin that declares a sweep. github.repo's lists the webhook's recent deliveries and asks
// GitHub to redeliver each one that never got a 2xx and that the spool has not seen.
import type { CommandDef } from "citty";
import { findBobbins } from "../bobbin/registry.ts";
import { newestRef, resolveSecret } from "../config/secrets.ts";
import { HookspoolError } from "../errors.ts";
import { createHttp } from "../net/http.ts";
import { createPacer } from "../net/pace.ts";
import { sweepGitHub } from "../sweep/github.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore } from "./context.ts";
import { visible } from "./format.ts";
import { parseSince } from "../time.ts";

/** An API base URL: https, or plain http to this machine only (a test's stub). */
function apiUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new HookspoolError("E_USAGE", `--api-url ${raw}: not a URL`);
  }
  if (u.protocol !== "https:" && !(u.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)))
    throw new HookspoolError("E_USAGE", `--api-url ${raw}: must be https`);
  return raw;
}

export function sweepCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "sweep",
      description:
        "recover what a sender that does not retry failed to deliver: " +
        "github.repo redelivers its webhook's failed deliveries (run it on a timer)",
    },
    args: {
      ...GLOBAL_ARGS,
      instance: {
        type: "positional",
        description: "a [bobbins.<instance>] whose bobbin declares a sweep",
        required: true,
      },
      repo: { type: "string", description: "github: the repository, <owner>/<repo>" },
      hook: { type: "string", description: "github: the webhook's id (its settings page URL ends in it)" },
      since: {
        type: "string",
        description: "how far back to look (default 24h, the dedup window; GitHub keeps 3 days)",
      },
      "dry-run": { type: "boolean", description: "say what would be redelivered, and ask GitHub for nothing" },
      "api-url": { type: "string", description: "github: the API's base URL (default https://api.github.com)" },
    },
    async run({ args }) {
      const instance = String(args.instance);
      const loaded = loadFor(cli);
      const { config } = loaded;
      const inst = Object.hasOwn(config.bobbins, instance) ? config.bobbins[instance] : undefined;
      if (!inst)
        throw notInConfig(
          loaded,
          new HookspoolError("E_NOT_FOUND", `no [bobbins.${instance}] in the config`, {
            hint: "hookspool bobbin expand lists the instances",
          }),
        );
      const bobbin = findBobbins({
        bobbinPath: config.spool.bobbin_path,
        presets: Object.keys(config.spans),
      }).bobbins.get(inst.bobbin ?? "");
      const sweep = bobbin?.manifest.sweep;
      if (!sweep)
        throw new HookspoolError("E_USAGE", `${inst.bobbin} declares no sweep`, {
          hint: "only a bobbin whose sender does not retry has one (github.repo)",
        });
      const repo = String(args.repo ?? "");
      const hook = String(args.hook ?? "");
      if (!/^[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+$/.test(repo))
        throw new HookspoolError("E_USAGE", "--repo <owner>/<repo> is required");
      if (!/^\d+$/.test(hook))
        throw new HookspoolError(
          "E_USAGE",
          "--hook <webhook id> is required: the number at the end of the webhook's settings URL",
        );
      const ref = config.sources[instance]?.secrets?.[sweep.secret];
      if (!ref)
        throw new HookspoolError("E_CONFIG", `[bobbins.${instance}] has no secrets.${sweep.secret}`, {
          hint:
            `add secrets.${sweep.secret} = { file = "..." }: ` +
            `${bobbin.manifest.secrets[sweep.secret]?.description ?? "the sweep's token"}`,
        });
      const token = resolveSecret(newestRef(ref), cli.io.env);
      const since = parseSince(String(args.since ?? "24h"), cli.clock.now());
      const store = await openOperatorStore(cli, loaded);
      try {
        const report = await sweepGitHub({
          http: createHttp({ clock: cli.clock }),
          apiUrl: apiUrl(String(args["api-url"] ?? "https://api.github.com")),
          repo,
          hookId: hook,
          token,
          since,
          dryRun: args["dry-run"] === true,
          spooled: (guids) => store.spooledDedupIds(instance, guids),
          // Well under GitHub's secondary limits for writes.
          pacer: createPacer(2, { clock: cli.clock }),
        });
        const verb = args["dry-run"] ? "would redeliver" : "redelivered";
        if (cli.globals.json) cli.io.out(JSON.stringify({ dry_run: args["dry-run"] === true, ...report }));
        else {
          for (const r of report.redelivered)
            cli.io.out(visible(`${verb} ${r.guid} (${r.event || "event"}, delivery ${r.id})`));
          for (const f of report.failed) cli.io.out(visible(`failed ${f.guid} (delivery ${f.id}): ${f.reason}`));
          cli.io.out(
            visible(
              `${repo} hook ${hook}: ${report.guids} deliveries since ` +
                `${new Date(since * 1000).toISOString()}, ${report.landed} landed, ` +
                `${report.spooled.length} spooled already, ${report.redelivered.length} ` +
                `${verb}${report.failed.length ? `, ${report.failed.length} failed` : ""}`,
            ),
          );
          if (report.stopped) cli.io.err(visible(`hookspool: stopped early: ${report.stopped}; run it again later`));
        }
        return report.failed.length || report.stopped ? 1 : 0;
      } finally {
        await store.close();
      }
    },
  };
}
