// Bobbin instances become ordinary tables. Every [bobbins.<i>] expands, on every config load, into
// [sources.<i>] (the bobbin's template or code source with the instance's secrets, settings and
// overrides), and with a processor into destinations."script:<i>" and its environment, or
// without one into a route per mapped output. Everything after loading sees only those tables.
import { join } from "node:path";
import { hasSettingType, type Manifest } from "../bobbin/manifest.ts";
import type { Bobbin, BobbinProblem } from "../bobbin/registry.ts";
import { TEMPLATE_KEYS } from "../plugin/template.ts";
import { closest } from "../spelling.ts";
import { exposeProblems } from "./expose.ts";
import { probeOf } from "./probes.ts";
import { type Problems, quoteKey } from "./parse.ts";
import type {
  BobbinInstanceConfig,
  Config,
  DestinationConfig,
  RouteConfig,
  SourceConfig,
  SourceSecret,
} from "./types.ts";
import { refsOf } from "./secrets.ts";

export interface ExpandContext {
  bobbins: ReadonlyMap<string, Bobbin>;
  /** Problems of bobbins that could not load, reported where an instance uses one. */
  bobbinProblems: readonly BobbinProblem[];
  /** The state directory (a processor's state lives in <home>/bobbins/<i> by default). */
  home: string;
}

/** An instance name is part of a URL and of a destination name: a plain identifier. */
const INSTANCE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

const isEmpty = (v: unknown) =>
  v === "" ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);

/** The bobbin an instance was probably meant to name: one whose product is the instance's name. */
function didYouMean(bobbins: ReadonlyMap<string, Bobbin>, instance: string, given?: string): string | undefined {
  const names = [...bobbins.keys()];
  const product = (given ?? instance).split(".").pop() ?? "";
  const hit =
    names.find((n) => n.split(".")[1] === product) ??
    names.find((n) => n.split(".")[1] === instance) ??
    names.find((n) => given !== undefined && n.replaceAll("_", "-") === given.replaceAll("_", "-"));
  return hit ? `did you mean bobbin = "${hit}"?` : undefined;
}

/** The settings an instance runs with: its own values over the manifest's defaults, each checked. */
function settingsOf(m: Manifest, inst: BobbinInstanceConfig, key: string, p: Problems): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const given = inst.settings ?? {};
  for (const [s, v] of Object.entries(given)) {
    const spec = m.settings[s];
    if (!spec)
      p.error(
        `${key}.settings.${s}`,
        `${m.name} has no setting ${s}`,
        Object.keys(m.settings).length
          ? (closest(s, Object.keys(m.settings)) ?? `its settings: ${Object.keys(m.settings).join(", ")}`)
          : `${m.name} takes no settings`,
      );
    // A list of one may be written as its one string (key = "id" for key = ["id"]).
    else if (spec.type === "list" && typeof v === "string") out[s] = [v];
    else if (!hasSettingType(spec.type, v))
      p.error(`${key}.settings.${s}`, `expected a ${spec.type}, not ${givenWords(v)}`, spec.description);
    else out[s] = v;
  }
  for (const [s, spec] of Object.entries(m.settings)) {
    if (Object.hasOwn(given, s)) continue;
    if (spec.required)
      p.error(`${key}.settings.${s}`, `required by ${m.name}: ${spec.description}`, `settings = { ${s} = ... }`);
    else out[s] = structuredClone(spec.default);
  }
  return out;
}

/** A given setting's value in a few words, for the error that refuses it: its kind and, short, itself. */
function givenWords(v: unknown): string {
  const kind = Array.isArray(v) ? "a list" : v === null ? "null" : typeof v === "object" ? "a table" : `a ${typeof v}`;
  const text = JSON.stringify(v) ?? String(v);
  return `${kind} (${text.length > 40 ? `${text.slice(0, 40)}...` : text})`;
}

function secretsOf(m: Manifest, inst: BobbinInstanceConfig, key: string, p: Problems): Record<string, SourceSecret> {
  // An earlier name of a secret (its manifest's aliases) still works, as the name it has now.
  const raw = inst.secrets ?? {};
  const given: Record<string, SourceSecret> = Object.fromEntries(
    Object.entries(raw).filter(([s]) => Object.hasOwn(m.secrets, s)),
  );
  for (const [s, ref] of Object.entries(raw)) {
    if (Object.hasOwn(m.secrets, s)) continue;
    const current = Object.keys(m.secrets).find((name) => m.secrets[name].aliases.includes(s));
    if (current === undefined)
      p.error(
        `${key}.secrets.${s}`,
        `${m.name} has no secret ${s}`,
        Object.keys(m.secrets).length
          ? (closest(s, Object.keys(m.secrets)) ?? `its secrets: ${Object.keys(m.secrets).join(", ")}`)
          : undefined,
      );
    else if (given[current])
      p.error(
        `${key}.secrets.${s}`,
        `${s} is an earlier name of secrets.${current}, which is given too`,
        `keep secrets.${current} only`,
      );
    else given[current] = ref;
  }
  for (const [s, spec] of Object.entries(m.secrets)) {
    const ref = given[s];
    if (!ref) {
      if (spec.required)
        p.error(
          `${key}.secrets.${s}`,
          `required by ${m.name}: ${spec.description}`,
          `secrets.${s} = { file = "/etc/hookspool/secrets/..." }`,
        );
      continue;
    }
    // The processor runs with a minimal environment: a reference to the dispatcher's cannot resolve there.
    if (spec.processor && refsOf(ref).some((r) => "env" in r))
      p.error(
        `${key}.secrets.${s}`,
        "the processor needs this secret, and it does not inherit the environment",
        `use { file = "..." } or { env_file = "...", key = "..." }`,
      );
  }
  return { ...given };
}

/** The template of the expanded source: the fixed table, then each template-key setting (empty: unset). */
function templateOf(m: Manifest, settings: Record<string, unknown>): Record<string, unknown> {
  const t: Record<string, unknown> = m.source?.template === "settings" ? {} : structuredClone(m.source?.template ?? {});
  for (const k of TEMPLATE_KEYS) {
    if (!Object.hasOwn(m.settings, k)) continue;
    const v = settings[k];
    if (v !== undefined && !isEmpty(v)) t[k] = v;
  }
  return t;
}

/** Expand every [bobbins.<i>] of `config` in place; each problem is reported once, with its key. */
export function expandBobbins(config: Config, p: Problems, ctx: ExpandContext): void {
  const generatedRoutes: RouteConfig[] = [];
  for (const [i, inst] of Object.entries(config.bobbins)) {
    const key = `bobbins.${quoteKey(i)}`;
    if (!INSTANCE_NAME.test(i)) {
      p.error(
        key,
        "an instance name is a plain identifier (letters, digits, - and _): it is the URL /hooks/<name>",
        i.includes(".") ? `write [bobbins.${i.split(".").pop()}] with bobbin = "${i}"` : undefined,
      );
      continue;
    }
    if (!inst.bobbin) {
      p.error(
        `${key}.bobbin`,
        "required: the bobbin this instance runs, <vendor>.<product>",
        didYouMean(ctx.bobbins, i),
      );
      continue;
    }
    const name = inst.bobbin;
    const bobbin = ctx.bobbins.get(name);
    if (!bobbin) {
      const dir = `${name.replace(".", "/")}/bobbin.toml`;
      const broken = ctx.bobbinProblems.filter((b) => b.file.endsWith(`/${dir}`) || b.file.endsWith(`:${dir}`));
      if (broken.length)
        for (const b of broken)
          p.error(`${key}.bobbin`, `${name} cannot load: ${b.file}: ${b.key ? `${b.key}: ` : ""}${b.message}`, b.hint);
      else
        p.error(
          `${key}.bobbin`,
          `no bobbin "${name}"`,
          didYouMean(ctx.bobbins, i, name) ??
            "hookspool bobbin list shows the bobbins this build and spool.bobbin_path have",
        );
      continue;
    }
    const m = bobbin.manifest;
    const scriptName = `script:${i}`;
    const hasProcessor = m.processor !== undefined || m.poll !== undefined;
    if (Object.hasOwn(config.sources, i)) {
      p.error(
        `sources.${quoteKey(i)}`,
        `[bobbins.${i}] expands into this source; both cannot be set`,
        `rename one of them, or remove [sources.${i}]`,
      );
      continue;
    }
    if (hasProcessor && Object.hasOwn(config.destinations, scriptName)) {
      p.error(
        `destinations.${quoteKey(scriptName)}`,
        `[bobbins.${i}] expands into this destination; both cannot be set`,
        "remove the table, or rename the instance",
      );
      continue;
    }
    const settings = settingsOf(m, inst, key, p);
    const secrets = secretsOf(m, inst, key, p);
    const probe = probeOf(m, inst, key, secrets, p);
    if (probe) (config.probes ??= {})[i] = probe;
    const outputs = inst.outputs ?? {};
    const free = m.source?.template === "settings" && Object.hasOwn(m.outputs, "*");
    for (const [o, dest] of Object.entries(outputs)) {
      if (!Object.hasOwn(m.outputs, o) && !(free && /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/.test(o))) {
        p.error(
          `${key}.outputs.${quoteKey(o)}`,
          `${m.name} has no output ${o}`,
          closest(o, Object.keys(m.outputs)) ?? `its outputs: ${Object.keys(m.outputs).join(", ")}`,
        );
      }
      if (hasProcessor && !Object.hasOwn(config.destinations, dest) && !dest.startsWith("hermes:")) {
        p.error(
          `${key}.outputs.${quoteKey(o)}`,
          `no destination "${dest}"`,
          `define [destinations.${quoteKey(dest)}], or use hermes:<route>`,
        );
      }
    }
    if (Object.keys(outputs).length === 0) {
      const example = Object.keys(m.outputs).map((o) => `${o === "*" ? '"*"' : o} = "hermes:${i}"`)[0] ?? '"*" = "..."';
      p.error(`${key}.outputs`, "required: where the instance's events go", `outputs = { ${example} }`);
    }
    const expose = inst.expose ?? {};
    for (const [o, list] of Object.entries(expose)) {
      const at = `${key}.expose.${quoteKey(o)}`;
      if (!Object.hasOwn(outputs, o))
        p.error(
          at,
          `no output ${o} in outputs: expose narrows what an output delivers`,
          `one of ${Object.keys(outputs).join(", ") || "the outputs you map"}`,
        );
      for (const e of exposeProblems(list)) p.error(e.at === null ? at : `${at}[${e.at}]`, e.message, e.hint);
    }

    // 1. The source.
    const src: SourceConfig = {
      secrets,
      span: inst.span ?? m.source?.span,
      quiet_s: inst.quiet_s,
      max_s: inst.max_s,
      max_events: inst.max_events,
      max_bytes: inst.max_bytes,
      // The manifest's expectation (else a code source's own expectEverySec) counts only when
      // the instance asks for it (expect = true); otherwise there is none.
      expect_every_s: inst.expect_every_s ?? (inst.expect ? m.source?.expect_every_s : 0),
      dedup_window_s: inst.dedup_window_s ?? m.source?.dedup_window_s ?? 86400,
      max_body_bytes: inst.max_body_bytes,
      allow_sensitive_keep_headers: false,
      sender_retries: m.source?.sender_retries,
      indexed: m.indexed.length ? [...m.indexed] : undefined,
    };
    if (m.poll) {
      // A poll has no sender and no window: those keys mean nothing for it.
      for (const k of [
        "span",
        "quiet_s",
        "max_s",
        "max_events",
        "max_bytes",
        "expect",
        "expect_every_s",
        "max_body_bytes",
        "dedup_window_s",
      ] as const) {
        if (inst[k] !== undefined)
          p.error(
            `${key}.${k}`,
            `${m.name} polls: it has no sender and no window, so no ${k}`,
            "every_s and jitter_s set its schedule",
          );
      }
      if (inst.every_s !== undefined && inst.every_s < 60)
        p.error(`${key}.every_s`, "at least 60: a poll is for a service with no push, asked rarely");
      if (inst.jitter_s !== undefined && (inst.jitter_s < 0 || inst.jitter_s > 300))
        p.error(`${key}.jitter_s`, "from 0 to 300");
      src.kind = "poll";
      src.span = "immediate";
      src.expect_every_s = 0;
      src.every_s = inst.every_s ?? m.poll.every_s;
      src.jitter_s = inst.jitter_s ?? m.poll.jitter_s;
    } else if (m.source?.module) {
      src.module = bobbin.moduleRef(m.source.module);
      // The settings the manifest hands the code source, as its table's own config.
      if (m.source.config?.length)
        src.config = Object.fromEntries(
          m.source.config.filter((n) => settings[n] !== undefined).map((n) => [n, settings[n]]),
        );
    } else {
      const template = templateOf(m, settings);
      src.template = template;
      if (src.sender_retries === undefined && typeof template.sender_retries === "boolean")
        src.sender_retries = template.sender_retries;
    }
    if (inst.stale !== undefined) src.stale = inst.stale;
    for (const k of Object.keys(src) as (keyof SourceConfig)[]) if (src[k] === undefined) delete src[k];

    if (hasProcessor) {
      // 2-6. The processor's destination and its environment.
      src.action = scriptName;
      const state = m.processor?.state ?? m.poll?.state ?? false;
      const processorSecrets = Object.fromEntries(
        Object.entries(secrets).filter(([s]) => m.secrets[s]?.processor || m.poll !== undefined),
      );
      const dest: DestinationConfig = {
        processor: i,
        timeout_s: inst.timeout_s ?? m.processor?.timeout_s ?? m.poll?.timeout_s ?? 300,
        max_inflight: 1,
        unsigned: false,
        allow_insecure: false,
        unwrap: false,
        env: {
          HOOKSPOOL_BOBBIN: m.name,
          HOOKSPOOL_BOBBIN_INSTANCE: i,
          HOOKSPOOL_BOBBIN_DIR: bobbin.dir,
          HOOKSPOOL_SETTINGS: JSON.stringify(settings),
          HOOKSPOOL_DELTA_ROUTES: JSON.stringify(outputs),
          HOOKSPOOL_SECRET_REFS: JSON.stringify(processorSecrets),
          // A journal is kept as long as a delivered batch, which a replay may run again.
          HOOKSPOOL_JOURNAL_KEEP_S: String(Math.round(config.retention.delivered_days * 86_400)),
        },
      };
      const stateDir = inst.state_dir ?? (state ? join(ctx.home, "bobbins", i) : undefined);
      if (stateDir !== undefined) dest.state_dir = stateDir;
      config.destinations[scriptName] = dest;
      // 7. A non-tee route of the instance that skips the processor would lose its work.
      config.routes.forEach((r, n) => {
        if (r.source === i && !r.tee && r.destination !== undefined && r.destination !== scriptName) {
          p.error(
            `routes[${n}].destination`,
            `[bobbins.${i}] has a processor: its events go to ${scriptName}, ` +
              `and a route to ${r.destination} would bypass it`,
            "make it a tee route (tee = true), or map an output of the instance instead",
          );
        }
      });
    } else {
      // 7. Without a processor: one output is the action; several are routes on event_type.
      const mapped = Object.entries(outputs);
      // The output that is the action narrows the implicit route; each other its own route.
      const action = mapped.length === 1 ? mapped[0][0] : "*";
      if (Object.hasOwn(expose, action)) src.expose = expose[action];
      if (mapped.length === 1) src.action = mapped[0][1];
      else if (mapped.length > 1) {
        if (!Object.hasOwn(outputs, "*"))
          p.error(
            `${key}.outputs`,
            'several outputs need "*" mapped too: an event of another type would have nowhere to go',
            'add "*" = "<destination>"',
          );
        else src.action = outputs["*"];
        // The routes match attrs.event_type, which every event carries (the source's event type),
        // so an instance needs no attrs setting for them.
        for (const [o, dest] of mapped) {
          if (o === "*") continue;
          generatedRoutes.push({
            name: `${i}-${o}`,
            source: i,
            match: { event_type: o },
            destination: dest,
            tee: false,
            instance: i,
            ...(Object.hasOwn(expose, o) ? { expose: expose[o] } : {}),
          });
        }
      }
    }
    config.sources[i] = src;
  }
  // Generated routes come before the file's own, so a file route can still tee from them.
  if (generatedRoutes.length) {
    for (const r of generatedRoutes) {
      if (config.routes.some((x) => x.name === r.name))
        p.error(
          `routes`,
          `a route named ${r.name} collides with an output route of [bobbins.${r.source}]`,
          "rename the route",
        );
    }
    config.routes = [...generatedRoutes, ...config.routes];
  }
}
