// hookspool sweep <instance>: recover what a sender could not deliver, for a bobbin that declares
// a sweep. github.repo's lists the webhook's recent deliveries and asks GitHub to redeliver each
// one that never got a 2xx and that the spool has not seen; stripe.events' (stripe-events) and an
// events-api sweep (paddle.billing's) list the provider's undelivered events and enqueue each one
// the spool does not hold, as the intake would have taken its webhook.
import { dirname } from "node:path";
import type { CommandDef } from "citty";
import type { Bobbin } from "../bobbin/registry.ts";
import { findBobbins } from "../bobbin/registry.ts";
import type { EventsApiSection, SweepSection } from "../bobbin/manifest.ts";
import { newestRef, resolveSecret } from "../config/secrets.ts";
import { probeUrlOk } from "../config/probes.ts";
import { loadSources } from "../config/sources.ts";
import type { LoadedConfig } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { createHttp } from "../net/http.ts";
import { createPacer } from "../net/pace.ts";
import { listEventsApi, type ListReport } from "../sweep/events-api.ts";
import { sweepGitHub } from "../sweep/github.ts";
import { landSwept } from "../sweep/land.ts";
import { listStripeEvents, STRIPE_EVENTS } from "../sweep/stripe.ts";
import { humanAge } from "./format.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore } from "./context.ts";
import { visible } from "./format.ts";
import { parseSince } from "../time.ts";

/** An API base URL by the rule a health probe's api_url keeps: https, or plain http to this machine only. */
function apiUrl(raw: string): string {
  if (!probeUrlOk(raw))
    throw new HookspoolError(
      "E_USAGE",
      `--api-url ${raw}: expected an https URL (plain http only to this machine), without a query or credentials`,
    );
  return raw;
}

/** Which flags each kind takes (beyond --since, --dry-run and --api-url). */
const KIND_FLAGS: Record<SweepSection["kind"], string[]> = {
  "github-redeliver": ["repo", "hook"],
  "stripe-events": ["endpoint"],
  "events-api": ["param"],
};

/** Every --param name=value of the command line (citty keeps only the last of a repeated flag). */
function paramsOf(rawArgs: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i];
    let v: string | undefined;
    if (a === "--param") v = rawArgs[++i];
    else if (a.startsWith("--param=")) v = a.slice(8);
    else continue;
    const eq = v?.indexOf("=") ?? -1;
    if (v === undefined || eq <= 0) throw new HookspoolError("E_USAGE", "--param takes <name>=<value>");
    out[v.slice(0, eq)] = v.slice(eq + 1);
  }
  return out;
}

export function sweepCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "sweep",
      description:
        "recover what a sender failed to deliver (run it on a timer): github.repo redelivers its webhook's " +
        "failed deliveries; stripe.events and paddle.billing enqueue the events that were not delivered",
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
      endpoint: {
        type: "string",
        description: "stripe: the webhook endpoint (we_...); only the event types it is subscribed to are enqueued",
      },
      param: {
        type: "string",
        description: "events-api: a query parameter the bobbin's sweep asks for, <name>=<value> (repeatable)",
        valueHint: "name=value",
      },
      since: {
        type: "string",
        description:
          "how far back to look (default: github 24h; the others the source's dedup window, at most what the " +
          "provider keeps)",
      },
      "dry-run": { type: "boolean", description: "say what would be redelivered or enqueued, and change nothing" },
      "api-url": { type: "string", description: "the provider API's base URL (default: the bobbin's)" },
    },
    async run({ args, rawArgs }) {
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
      if (!bobbin || !sweep)
        throw new HookspoolError("E_USAGE", `${inst.bobbin} declares no sweep`, {
          hint: "a bobbin whose sender does not retry, or whose provider lists undelivered events, has one",
        });
      for (const [kind, flags] of Object.entries(KIND_FLAGS))
        for (const f of flags)
          if (kind !== sweep.kind && args[f] !== undefined && !KIND_FLAGS[sweep.kind].includes(f))
            throw new HookspoolError("E_USAGE", `--${f} is not for ${bobbin.manifest.name}'s ${sweep.kind} sweep`);
      const ref = config.sources[instance]?.secrets?.[sweep.secret];
      if (!ref)
        throw new HookspoolError("E_CONFIG", `[bobbins.${instance}] has no secrets.${sweep.secret}`, {
          hint:
            `add secrets.${sweep.secret} = { file = "..." }: ` +
            `${bobbin.manifest.secrets[sweep.secret]?.description ?? "the sweep's token"}`,
        });
      if (sweep.kind === "github-redeliver")
        return runGitHub(cli, loaded, instance, args, resolveSecret(newestRef(ref), cli.io.env));
      return runEnqueueing(cli, loaded, { instance, bobbin, sweep, args, params: paramsOf(rawArgs ?? []), ref });
    },
  };
}

type Args = Record<string, unknown>;

async function runGitHub(cli: Cli, loaded: LoadedConfig, instance: string, args: Args, token: string): Promise<number> {
  const repo = String(args.repo ?? "");
  const hook = String(args.hook ?? "");
  if (!/^[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+$/.test(repo))
    throw new HookspoolError("E_USAGE", "--repo <owner>/<repo> is required");
  if (!/^\d+$/.test(hook))
    throw new HookspoolError(
      "E_USAGE",
      "--hook <webhook id> is required: the number at the end of the webhook's settings URL",
    );
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
}

interface Enqueueing {
  instance: string;
  bobbin: Bobbin;
  sweep: SweepSection;
  args: Args;
  params: Record<string, string>;
  ref: Parameters<typeof newestRef>[0];
}

/** A stripe-events or events-api sweep: list what the provider did not deliver, enqueue what is missing. */
async function runEnqueueing(cli: Cli, loaded: LoadedConfig, o: Enqueueing): Promise<number> {
  const { config, paths } = loaded;
  const { instance, args } = o;
  const stripe = o.sweep.kind === "stripe-events";
  const spec: EventsApiSection | undefined = stripe ? STRIPE_EVENTS : o.sweep.api;
  const src = config.sources[instance];
  if (!spec || !src) throw new HookspoolError("E_CONFIG", `[bobbins.${instance}] has no source to sweep for`);
  const vendor = o.bobbin.manifest.provider.vendor;
  for (const name of Object.keys(o.params))
    if (!Object.hasOwn(spec.args, name))
      throw new HookspoolError(
        "E_USAGE",
        `--param ${name}: ${o.bobbin.manifest.name}'s sweep takes no such parameter`,
        {
          hint: Object.keys(spec.args).length ? `it takes ${Object.keys(spec.args).join(", ")}` : "it takes no --param",
        },
      );
  for (const [name, what] of Object.entries(spec.args))
    if (!o.params[name]) throw new HookspoolError("E_USAGE", `--param ${name}=<value> is required: ${what}`);

  // Routed as the intake routes a request of the source: its own plugin, routes and windows.
  const plugins = await loadSources(
    { ...config, sources: { [instance]: src } },
    { configDir: dirname(paths.config ?? paths.home), env: cli.io.env, file: paths.config ?? "config.toml" },
  );
  const source = plugins.get(instance);
  if (!source) throw new HookspoolError("E_CONFIG", `source ${instance} could not be loaded`);

  const now = cli.clock.now();
  const keeps = spec.keeps_s;
  const window = Math.min(source.dedupWindowS, keeps);
  const since = args.since === undefined ? now - window : parseSince(String(args.since), now);
  if (now - since > keeps + 60)
    throw new HookspoolError(
      "E_USAGE",
      `--since ${String(args.since)}: ${vendor} keeps events for ${humanAge(keeps)}`,
      {
        hint: `look back at most ${Math.floor(keeps / 86400)}d`,
      },
    );
  if (now - since > source.dedupWindowS + 60 && !cli.globals.json)
    cli.io.err(
      visible(
        `hookspool: note: --since reaches past source ${instance}'s dedup window (${humanAge(source.dedupWindowS)}): ` +
          "an event that landed before it is enqueued again if the provider still lists it",
      ),
    );
  const dryRun = args["dry-run"] === true;
  const key = resolveSecret(newestRef(o.ref), cli.io.env);
  const http = createHttp({ clock: cli.clock });
  const pacer = createPacer(spec.per_s, { clock: cli.clock });
  const base = apiUrl(String(args["api-url"] ?? spec.url));
  const clockNow = () => cli.clock.now();
  const what = o.bobbin.manifest.secrets[o.sweep.secret]?.description ?? "the sweep's key";
  const keyHint = `the instance's secrets.${o.sweep.secret}: ${what}`;
  const listed: ListReport & { notForEndpoint?: string[] } = stripe
    ? await listStripeEvents({
        http,
        apiUrl: base,
        key,
        since,
        endpoint: args.endpoint === undefined ? undefined : String(args.endpoint),
        now: clockNow,
        pacer,
      })
    : await listEventsApi({
        http,
        apiUrl: base,
        spec,
        args: o.params,
        key,
        since,
        vendor,
        keyHint,
        now: clockNow,
        pacer,
      });

  const store = await openOperatorStore(cli, loaded);
  try {
    const landed = await landSwept({
      config,
      source,
      kind: o.sweep.kind,
      events: listed.events,
      dryRun,
      now: cli.clock.now(),
      spooled: (ids) => store.spooledDedupIds(instance, ids),
      enqueue: (ev, at) => store.enqueue(ev, at),
    });
    const notFor = listed.notForEndpoint ?? [];
    if (cli.globals.json)
      cli.io.out(
        JSON.stringify({
          dry_run: dryRun,
          kind: o.sweep.kind,
          since,
          listed: listed.events.length + notFor.length,
          pages: listed.pages,
          ...landed,
          not_for_endpoint: notFor,
          stopped: listed.stopped,
        }),
      );
    else {
      const verb = dryRun ? "would enqueue" : "enqueued";
      for (const e of landed.enqueued)
        cli.io.out(
          visible(`${verb} ${e.id} (${e.eventType || "event"}${e.batchId === null ? "" : `, batch ${e.batchId}`})`),
        );
      for (const id of landed.duplicates) cli.io.out(visible(`duplicate ${id}: the intake took it meanwhile`));
      for (const id of landed.replayed) cli.io.out(visible(`replayed ${id}: its dead batch is queued again`));
      for (const f of landed.failed) cli.io.out(visible(`failed ${f.id}: ${f.reason}`));
      const isoSince = new Date(since * 1000).toISOString();
      const parts = [
        `${listed.events.length + notFor.length} undelivered events listed since ${isoSince}`,
        ...(notFor.length ? [`${notFor.length} not for endpoint ${String(args.endpoint)}`] : []),
        `${landed.spooled.length} spooled already`,
        `${landed.enqueued.length} ${dryRun ? "would be enqueued" : "enqueued"}`,
        ...(landed.duplicates.length ? [`${landed.duplicates.length} duplicates`] : []),
        ...(landed.replayed.length ? [`${landed.replayed.length} replayed`] : []),
        ...(landed.ignored.length ? [`${landed.ignored.length} ignored`] : []),
        ...(landed.failed.length ? [`${landed.failed.length} failed`] : []),
      ];
      cli.io.out(visible(`${instance} (${o.sweep.kind}): ${parts.join(", ")}`));
      if (listed.stopped) cli.io.err(visible(`hookspool: stopped early: ${listed.stopped}; run it again later`));
    }
    return landed.failed.length || listed.stopped ? 1 : 0;
  } finally {
    await store.close();
  }
}
