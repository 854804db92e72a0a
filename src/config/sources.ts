// Loading the source plugins named by config (a template table or a TypeScript module), and
// where an event of a source goes: the one routing rule the intake, `hookspool enqueue`, script
// emits and a quarantine replay all share.
import { BUILTIN_PREFIX, builtinModule } from "../bobbin/registry.ts";
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { HookspoolError } from "../errors.ts";
import { registerPluginApi } from "../bobbin/plugin-api.ts";
import { checkTemplate, type TemplateSettings, templateHeaders, templateSource } from "../plugin/template.ts";
import type { HookRequest, Secrets, SourcePlugin } from "../plugin/types.ts";
import { ConfigError, type Env } from "./load.ts";
import { quoteKey } from "./parse.ts";
import { type ResolveOptions, type RouteCopy, resolveCopies } from "./routes.ts";
import { liveRefs, newestRef, resolveSecret } from "./secrets.ts";
import type { Config, ConfigProblem, SourceConfig } from "./types.ts";

/**
 * A header whose value is probably a credential: Authorization, Proxy-Authorization, Cookie,
 * or a name with key, token or secret in it. Kept headers are stored with every event and
 * delivered in the document, so such a header is refused unless the source says
 * allow_sensitive_keep_headers = true.
 */
export function sensitiveHeader(name: string): boolean {
  const h = name.toLowerCase();
  return (
    h === "authorization" ||
    h === "proxy-authorization" ||
    h === "cookie" ||
    h === "set-cookie" ||
    /key|token|secret/.test(h)
  );
}

export function sensitiveProblem(key: string, header: string, where: string): ConfigProblem {
  return {
    level: "error",
    key,
    message: `${header} in ${where} looks like a credential; kept headers are stored with every event and delivered`,
    hint: "remove it, or set allow_sensitive_keep_headers = true on the source if it holds no secret",
  };
}

/** Every quarantined request may keep these: what the body is, and who sent it. */
const QUARANTINE_HEADERS = ["content-type", "content-length", "user-agent"];
/** Credentials no plugin needs to classify a request; never stored, whatever config says. */
const NEVER_STORED: ReadonlySet<string> = new Set(["authorization", "proxy-authorization", "cookie"]);

/** A source ready for requests: its plugin with config applied. */
export interface IntakeSource {
  name: string;
  plugin: SourcePlugin;
  config: SourceConfig;
  /**
   * Resolves the configured references at each access (never cached: a rotated file is read
   * next time); a rotation's list gives its newest.
   */
  secrets: Secrets;
  /** What verify tries at `now`: one Secrets per position of a rotation's lists, newest first. */
  secretsAt(now: number): SecretPosition[];
  /** The plugin's auth headers and config's: never stored, stripped from quarantine. */
  authHeaders: string[];
  keepHeaders: string[];
  /** The only headers (lower case) a quarantined request keeps. */
  quarantineHeaders: string[];
  /** Query parameters that carry the source's secret (a push token): never stored. */
  secretParams: string[];
  maxBodyBytes: number;
  storeRaw: boolean;
  dedupWindowS: number;
}

/** The Secrets an unauthenticated challenge gets: any access throws (its answer must be constant). */
export const NO_SECRETS: Secrets = {
  get() {
    throw new Error("an unauthenticated challenge may not read secrets");
  },
};

export function configSecrets(source: string, refs: SourceConfig["secrets"], env: Env): Secrets {
  return {
    get(name) {
      const ref = refs && Object.hasOwn(refs, name) ? refs[name] : undefined;
      if (!ref)
        throw new HookspoolError("E_CONFIG", `source ${source} has no secret named ${name}`, {
          key: `sources.${source}.secrets.${name}`,
        });
      return resolveSecret(newestRef(ref), env);
    },
  };
}

/** One position of a source's rotation: each secret's entry at that place of its list. */
export interface SecretPosition {
  /** 0 for the newest; an entry past its until is left out before counting. */
  position: number;
  secrets: Secrets;
  /** When this position's older entries stop being used (null: never, the newest). */
  until: number | null;
}

/**
 * The positions verify tries at `now`: one when no secret is a list (the common case, the
 * newest of each); else one per place in the longest list still in force, each secret's entry
 * at that place (a shorter list's last one past its end).
 */
export function secretPositions(
  source: string,
  refs: SourceConfig["secrets"],
  env: Env,
  now: number,
): SecretPosition[] {
  const newest = configSecrets(source, refs, env);
  const lists = Object.entries(refs ?? {})
    .filter(([, s]) => Array.isArray(s))
    .map(([name, s]) => [name, liveRefs(s, now)] as const);
  const n = Math.max(1, ...lists.map(([, l]) => l.length));
  if (n === 1) return [{ position: 0, secrets: newest, until: null }];
  const live = new Map(lists);
  return Array.from({ length: n }, (_, i) => {
    const untils = lists.flatMap(([, l]) => (i < l.length && l[i].until !== undefined ? [l[i].until as number] : []));
    return {
      position: i,
      until: untils.length ? Math.min(...untils) : null,
      secrets: {
        get(name) {
          const l = live.get(name);
          if (!l) return newest.get(name);
          const ref = l[Math.min(i, l.length - 1)];
          if (!ref)
            throw new HookspoolError(
              "E_CONFIG",
              `every entry of source ${source}'s secrets.${name} is past its until`,
              {
                key: `sources.${source}.secrets.${name}`,
              },
            );
          return resolveSecret(ref, env);
        },
      },
    };
  });
}

function isPlugin(x: unknown): x is SourcePlugin {
  const p = x as SourcePlugin;
  return (
    typeof x === "object" &&
    x !== null &&
    typeof p.verify === "function" &&
    typeof p.key === "function" &&
    Array.isArray(p.authHeaders)
  );
}

async function importModule(modulePath: string, configDir: string): Promise<unknown> {
  // A built-in bobbin's code is compiled in: builtin:<vendor>/<product>/<module>.
  if (modulePath.startsWith(BUILTIN_PREFIX)) {
    const mod = builtinModule(modulePath) as Record<string, unknown> | undefined;
    if (mod === undefined) throw new Error(`no built-in module ${modulePath}`);
    return mod.default ?? mod;
  }
  const path = isAbsolute(modulePath) ? modulePath : resolve(configDir, modulePath);
  if (!existsSync(path)) throw new Error(`no file at ${path}`);
  registerPluginApi();
  const mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  return mod.default ?? mod;
}

export interface LoadSourcesOptions {
  /** Relative module paths are resolved against the config file's directory. */
  configDir: string;
  env?: Env;
  /** The config file, for error messages. */
  file: string;
}

/**
 * Build every configured source that can take requests. A source with neither module nor
 * template is fed only by `hookspool enqueue` and a poll source by the dispatcher: both are
 * left out, so /hooks/<name> answers 404 for them.
 */
export async function loadSources(config: Config, opts: LoadSourcesOptions): Promise<Map<string, IntakeSource>> {
  const { sources, problems } = await loadEverySource(config, opts);
  if (problems.length) throw new ConfigError(opts.file, problems);
  return sources;
}

/**
 * loadSources that never refuses: every source that could be built, and the problems of the
 * rest. The dispatcher routes emits with it, where one broken module must not stop the others.
 */
export async function loadEverySource(
  config: Config,
  opts: LoadSourcesOptions,
): Promise<{ sources: Map<string, IntakeSource>; problems: ConfigProblem[] }> {
  const env = opts.env ?? process.env;
  const problems: ConfigProblem[] = [];
  const out = new Map<string, IntakeSource>();
  for (const [name, src] of Object.entries(config.sources)) {
    const key = `sources.${quoteKey(name)}`;
    if (src.kind === "poll" || (!src.module && !src.template)) continue;
    let plugin: SourcePlugin;
    if (src.template) {
      const bad = checkTemplate(src.template);
      if (bad.length) {
        for (const b of bad) problems.push({ level: "error", key: `${key}.template.${b.key}`, message: b.message });
        continue;
      }
      plugin = templateSource(src.template as unknown as TemplateSettings);
    } else {
      try {
        const loaded = await importModule(src.module as string, opts.configDir);
        if (!isPlugin(loaded)) {
          problems.push({
            level: "error",
            key: `${key}.module`,
            message: "the module does not export a source plugin",
            hint: "export default defineSource({ verify, key, authHeaders, ... })",
          });
          continue;
        }
        plugin = loaded;
        const own = src.config ?? {};
        const unknown = Object.keys(own).filter((k) => !(plugin.configKeys ?? []).includes(k));
        if (unknown.length) {
          for (const k of unknown)
            problems.push({
              level: "error",
              key: `${key}.config.${k}`,
              message: "the source takes no such setting",
              hint: plugin.configKeys?.length
                ? `one of ${plugin.configKeys.join(", ")}`
                : "this source takes no config",
            });
          continue;
        }
        if (plugin.withConfig) plugin = plugin.withConfig(own);
      } catch (e) {
        problems.push({
          level: "error",
          key: `${key}.module`,
          message: `cannot load ${src.module}: ${(e as Error).message.split("\n")[0]}`,
        });
        continue;
      }
    }
    for (const s of plugin.secrets ?? []) {
      if (!src.secrets || !Object.hasOwn(src.secrets, s))
        problems.push({
          level: "error",
          key: `${key}.secrets.${s}`,
          message: "required by the source",
          hint: `secrets.${s} = { file = "..." }`,
        });
    }
    // A secret learned on the wire is kept in a file, which the intake must be able to write.
    if (plugin.learn && src.secrets?.secret && !("file" in src.secrets.secret)) {
      problems.push({
        level: "error",
        key: `${key}.secrets.secret`,
        message: "this source learns its secret from a handshake and keeps it in a file",
        hint: 'secrets.secret = { file = "<name>.secret" } (in the home, which the intake may write)',
      });
    }
    if (plugin.span !== undefined && src.span === undefined && !Object.hasOwn(config.spans, plugin.span)) {
      problems.push({
        level: "error",
        key: `${key}`,
        message: `the plugin names span "${plugin.span}", which is not a preset`,
      });
    }
    const authHeaders = [...new Set([...plugin.authHeaders, ...(src.auth_headers ?? [])].map((h) => h.toLowerCase()))];
    const keepHeaders = src.keep_headers ?? [...(plugin.keepHeaders ?? [])];
    const allowSensitive = src.allow_sensitive_keep_headers === true;
    for (const h of keepHeaders) {
      if (authHeaders.includes(h.toLowerCase()))
        problems.push({
          level: "error",
          key: `${key}.keep_headers`,
          message: `${h} is an auth header and is never stored`,
          hint: "remove it from keep_headers",
        });
      else if (sensitiveHeader(h) && !allowSensitive)
        problems.push(
          sensitiveProblem(
            `${key}.keep_headers`,
            h,
            src.keep_headers === undefined ? "the plugin's keepHeaders" : "keep_headers",
          ),
        );
    }
    // A quarantined request keeps only what a replay needs to classify it again: what the body
    // is, who sent it, the kept headers, and the headers classification reads. Never a credential.
    const classifyHeaders = [
      ...(plugin.classifyHeaders ?? []),
      ...(src.template ? templateHeaders(src.template as unknown as TemplateSettings) : []),
    ];
    const quarantineHeaders = [
      ...new Set([...QUARANTINE_HEADERS, ...keepHeaders, ...classifyHeaders].map((h) => h.toLowerCase())),
    ].filter((h) => !authHeaders.includes(h) && !NEVER_STORED.has(h) && (allowSensitive || !sensitiveHeader(h)));
    const secrets = configSecrets(name, src.secrets, env);
    // Without a rotation's list (the common case) every request has the one position.
    const one: SecretPosition[] = [{ position: 0, secrets, until: null }];
    const rotating = Object.values(src.secrets ?? {}).some((s) => Array.isArray(s));
    out.set(name, {
      name,
      plugin,
      config: src,
      secrets,
      secretsAt: rotating ? (now) => secretPositions(name, src.secrets, env, now) : () => one,
      authHeaders,
      keepHeaders,
      quarantineHeaders,
      secretParams: [
        ...(src.template && typeof src.template.param === "string" ? [src.template.param] : []),
        ...(plugin.secretParams ?? []),
      ],
      maxBodyBytes: src.max_body_bytes ?? config.intake.max_body_bytes,
      storeRaw: src.store_raw ?? config.spool.store_raw,
      dedupWindowS: src.dedup_window_s,
    });
  }
  return { sources: out, problems };
}

/** What routing needs to know about one event besides its source. */
export interface Routing {
  /** The payload as the plugin reads it. */
  payload: unknown;
  /** The request it came in (or, for an emit or `hookspool enqueue`, one made from the payload). */
  req: HookRequest;
  eventType: string;
  /** Send the primary copy here instead (hookspool enqueue --destination, an emit's destination). */
  destinationOverride?: ResolveOptions["destinationOverride"];
}

/**
 * Where an event of `source` goes, the same for every way in: the plugin's attrs
 * (event_type is always among them) against config's routes, else the source's action
 * (config's, else the plugin's, which may be computed per event), tees after; the plugin's span
 * where config names none. `src` is undefined for a source without a plugin, fed only by
 * hookspool enqueue and emits.
 */
export function eventCopies(
  config: Config,
  source: string,
  src: IntakeSource | undefined,
  r: Routing,
): { copies: RouteCopy[]; attrs: Record<string, unknown> } {
  const plugin = src?.plugin;
  const attrs: Record<string, unknown> = { ...(plugin?.attrs?.(r.payload, r.req) ?? {}) };
  // Routes may match on the event type whether or not the plugin lists it.
  if (!("event_type" in attrs)) attrs.event_type = r.eventType;
  const pluginAction = typeof plugin?.action === "function" ? plugin.action(r.payload, r.req) : plugin?.action;
  const copies = resolveCopies(config, source, attrs, {
    pluginAction,
    pluginSpan: plugin?.span,
    destinationOverride: r.destinationOverride,
  });
  return { copies, attrs };
}

/**
 * How often a source is expected to send (seconds; 0: no expectation): config's
 * expect_every_s, else the plugin's expectEverySec. A poll source has its own staleness rule.
 */
export function expectEvery(config: Config, source: string, plugins?: ReadonlyMap<string, IntakeSource>): number {
  const src = config.sources[source];
  // A pull source's events keep their own sources' names; its silence is its own issue (pull-source.ts).
  if (!src || src.kind === "poll" || src.pull) return 0;
  const every = src.expect_every_s ?? plugins?.get(source)?.plugin.expectEverySec ?? 0;
  return Math.max(every, 0);
}
