// Load-time consistency rules: what would make a config unusable is an error, the rest warnings
// (hookspool check escalates every warning).
import { destinationProblem, PULL_NAME, QUARANTINE } from "./destinations.ts";
import { exposeProblems } from "./expose.ts";
import { parseRate } from "../pacing.ts";
import type { Problems } from "./parse.ts";
import { quoteKey } from "./parse.ts";
import { userKey } from "./provenance.ts";
import type { Config, DestinationConfig, PullSourceConfig, SourceConfig } from "./types.ts";
import { CONSUMER_NAME, PULL_MAX_LEASE, PULL_MAX_WAIT_S } from "../store/pull.ts";

const ENV_NAME = /^[A-Z][A-Z0-9_]*$/;

export function validateConfig(config: Config, p: Problems): void {
  validateSources(config, p);
  validateRoutes(config, p);
  validateDestinations(config, p);
}

function validateSources(config: Config, p: Problems): void {
  for (const [name, src] of Object.entries(config.sources)) {
    const key = `sources.${quoteKey(name)}`;
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/.test(name))
      p.error(key, "a source name is 1-64 letters, digits, _ . -", "it is the URL path /hooks/<name>");
    if (src.module && src.template) p.error(key, "set module or template, not both");
    if (src.pull) pullSourceRules(src.pull, src, key, p);
    // A poll source is what a poll bobbin's instance expands into; check refuses one written by
    // hand (a warning at run time, as an unknown key is).
    for (const k of ["kind", "every_s", "jitter_s"] as const) {
      if (src[k] !== undefined && !(k === "kind" && src.kind === "webhook"))
        p.warn(
          `${key}.${k}`,
          "only a poll bobbin's [bobbins.<instance>] makes a poll source",
          'enable the service with its bobbin: [bobbins.<instance>] bobbin = "<vendor>.<product>"',
        );
    }
    if (src.span !== undefined && !Object.hasOwn(config.spans, src.span))
      p.error(`${key}.span`, `no span preset "${src.span}"`, `one of ${Object.keys(config.spans).join(", ")}`);
    const auth = new Set((src.auth_headers ?? []).map((h) => h.toLowerCase()));
    for (const h of src.keep_headers ?? []) {
      if (auth.has(h.toLowerCase()))
        p.error(`${key}.keep_headers`, `${h} is an auth header and is never stored`, "remove it from keep_headers");
    }
    if (src.action !== undefined) {
      const why = destinationProblem(config, src.action);
      if (why) p.warn(`${key}.action`, `destination "${src.action}": ${why}`);
    }
    windowWarnings(config, src, key, p);
    if (src.dedup_window_s > config.retention.delivered_days * 86400) {
      p.warn(
        `${key}.dedup_window_s`,
        "the dedup window is longer than retention.delivered_days",
        "an id may outlive the event it points at; that is allowed but check says so",
      );
    }
  }
}

/**
 * The quiet_s > max_s warning: max_s seals such a batch before it can go quiet. max_s = 0 is no
 * exception: such a batch is ready as soon as it opens.
 */
function windowWarnings(
  config: Config,
  w: { quiet_s?: number; max_s?: number; span?: string },
  key: string,
  p: Problems,
): void {
  const span = w.span && Object.hasOwn(config.spans, w.span) ? config.spans[w.span] : undefined;
  const quiet = w.quiet_s ?? span?.quiet_s ?? config.coalesce.quiet_s;
  const max = w.max_s ?? span?.max_s ?? config.coalesce.max_s;
  if (quiet > max) p.warn(key, `quiet_s (${quiet}) > max_s (${max}): the quiet window can never fire`);
}

function validateRoutes(config: Config, p: Problems): void {
  const seen = new Set<string>();
  const known = new Set([...Object.keys(config.sources), ...Object.keys(config.bobbins)]);
  config.routes.forEach((route, i) => {
    const key = `routes[${i}]`;
    if (seen.has(route.name)) p.error(`${key}.name`, `route "${route.name}" is defined twice`);
    // "<route>-><destination>" names the group of events sent elsewhere by an override.
    if (route.name.includes("->"))
      p.error(
        `${key}.name`,
        `"${route.name}": a route name may not contain "->"`,
        "hookspool names the groups of overridden events <route>-><destination>",
      );
    seen.add(route.name);
    if (known.has(route.name))
      p.error(
        `${key}.name`,
        `"${route.name}" is the implicit route of source ${route.name}`,
        "pick another route name",
      );
    if (!known.has(route.source))
      p.error(`${key}.source`, `no source "${route.source}"`, "define [sources.<name>] or [bobbins.<name>]");
    if (route.tee && route.destination === undefined) p.error(`${key}.destination`, "a tee route needs a destination");
    if (route.expose !== undefined)
      for (const e of exposeProblems(route.expose))
        p.error(e.at === null ? `${key}.expose` : `${key}.expose[${e.at}]`, e.message, e.hint);
    if (route.destination !== undefined) {
      const why = destinationProblem(config, route.destination);
      if (why) p.warn(`${key}.destination`, `destination "${route.destination}": ${why}`);
    }
    // The route inherits the rest from its source; a route that sets neither field has
    // its source's window, which the source's own check reports.
    if (route.quiet_s !== undefined || route.max_s !== undefined) {
      const src = Object.hasOwn(config.sources, route.source) ? config.sources[route.source] : undefined;
      windowWarnings(
        config,
        { quiet_s: route.quiet_s ?? src?.quiet_s, max_s: route.max_s ?? src?.max_s, span: src?.span },
        key,
        p,
      );
    }
  });
}

/**
 * Whether a source's events carry a version: a template's `version` selector, a pull source's
 * upstream versions; a poll's ticks never; a code source's only its loaded plugin can say
 * (hookspool check), so undefined.
 */
function versioned(src: SourceConfig): boolean | undefined {
  if (src.pull) return true;
  if (src.kind === "poll") return false;
  if (src.template) return typeof src.template.version === "string" && src.template.version !== "";
  return undefined;
}

/**
 * A stale rule ("mark" or "skip") on a route, or on a source for its routes, whose source reads
 * no version: it could judge nothing, so it is an error at its own key (an instance's for a bobbin's
 * source). Run after the bobbins' expansion, which makes their sources' templates.
 */
export function validateStale(config: Config, p: Problems): void {
  const on = (rule: string | undefined) => rule === "mark" || rule === "skip";
  const problem = (key: string, rule: string, source: string) =>
    p.error(
      userKey(config, key),
      `stale = "${rule}" needs a version, and source ${source} reads none`,
      "set the source's template version (a field: or header: selector with the sender's own time), or remove stale",
    );
  for (const [name, src] of Object.entries(config.sources))
    if (on(src.stale) && versioned(src) === false) problem(`sources.${quoteKey(name)}.stale`, String(src.stale), name);
  config.routes.forEach((r, i) => {
    const src = Object.hasOwn(config.sources, r.source) ? config.sources[r.source] : undefined;
    // An instance's output route has its instance's rule, said at the instance's own key.
    if (r.instance === undefined && on(r.stale) && src && versioned(src) === false)
      problem(`routes[${i}].stale`, String(r.stale), r.source);
  });
}

function validateDestinations(config: Config, p: Problems): void {
  for (const [name, d] of Object.entries(config.destinations)) {
    const key = `destinations.${quoteKey(name)}`;
    if (name === QUARANTINE) {
      p.error(key, "quarantine is a reserved destination name");
      continue;
    }
    const implied = name.startsWith("hermes:")
      ? "hermes"
      : name.startsWith("script:")
        ? "script"
        : name.startsWith("pull:")
          ? "pull"
          : undefined;
    if (implied && d.type && d.type !== implied)
      p.error(`${key}.type`, `a ${implied}: destination cannot have type = "${d.type}"`);
    const type = implied ?? d.type ?? (d.url !== undefined ? "http" : undefined);
    if (type === undefined && !d.module)
      p.error(
        key,
        "cannot tell the destination's type",
        'name it hermes:<route>, script:<name> or pull:<name>, or set type = "http" and url',
      );
    if (type === "pull") pullDestinationRules(name, d, key, p);
    if (type === "script") {
      if (d.argv && d.processor) p.error(key, "set argv or processor, not both");
      if (!d.argv && !d.processor) p.error(`${key}.argv`, "a script destination needs argv");
      if (d.argv && d.argv.length === 0) p.error(`${key}.argv`, "argv is empty");
      for (const envName of Object.keys(d.env ?? {})) {
        if (!ENV_NAME.test(envName)) p.error(`${key}.env.${envName}`, "environment names match ^[A-Z][A-Z0-9_]*$");
        else if (envName.startsWith("HOOKSPOOL_"))
          p.error(`${key}.env.${envName}`, "HOOKSPOOL_* variables are set by hookspool, not by config");
      }
    }
    // One outcome settles one delivery: with unwrap each event is its own request, its own run.
    if (d.outcome === "await" && d.unwrap)
      p.error(
        `${key}.outcome`,
        'outcome = "await" cannot be used with unwrap = true',
        "an awaited outcome settles one delivery of the whole batch; drop unwrap or the await",
      );
    if (d.outcome !== "await" && (d.outcome_timeout_s !== undefined || d.on_timeout !== undefined)) {
      p.warn(
        `${key}.${d.outcome_timeout_s !== undefined ? "outcome_timeout_s" : "on_timeout"}`,
        'applies only with outcome = "await"',
      );
    }
    for (const k of ["budget", "key_budget"] as const) {
      const text = d[k];
      if (text === undefined) continue;
      try {
        if (parseRate(text) === null)
          p.error(`${key}.${k}`, `a ${k} is a count in a window ("20/h"); leave it out for none`);
      } catch (e) {
        p.error(`${key}.${k}`, (e as Error).message);
      }
    }
    if (d.api_rate !== undefined && type !== "pull") p.warn(`${key}.api_rate`, "applies only to a pull destination");
    if (d.rate !== undefined) {
      try {
        parseRate(d.rate);
      } catch (e) {
        p.error(`${key}.rate`, (e as Error).message);
      }
    }
    // Only http has a choice for a body kept in a file that does not fit: the others' way is fixed.
    if (d.large !== undefined && type !== "http" && (type !== undefined || d.module))
      p.error(
        `${key}.large`,
        `large applies only to an http destination, not a ${type ?? "module"} one`,
        "drop it: beyond max_body_bytes a hermes destination refuses such a body, a script gets its file's path",
      );
    if (type === "http") {
      if (!d.url) p.error(`${key}.url`, "an http destination needs url");
      else if (!/^https?:\/\//.test(d.url)) p.error(`${key}.url`, "expected an http(s) URL");
      else if (d.url.startsWith("http://") && !d.allow_insecure)
        p.error(`${key}.url`, "http:// needs allow_insecure = true", "use https://");
    }
  }
}

/** A pull destination: a name its API path can carry, a token, a rate its API can apply; nothing a push uses. */
function pullDestinationRules(name: string, d: DestinationConfig, key: string, p: Problems): void {
  if (!PULL_NAME.test(name.slice("pull:".length)))
    p.error(
      key,
      "a pull destination's name after pull: is 1-64 letters, digits, _ . -",
      "it is the path /pull/<name>/",
    );
  if (d.token === undefined) p.error(`${key}.token`, "a pull destination needs token (its consumers' bearer token)");
  if (d.api_rate !== undefined) {
    try {
      parseRate(d.api_rate);
    } catch (e) {
      p.error(`${key}.api_rate`, (e as Error).message);
    }
  }
  for (const k of ["url", "argv", "processor", "unwrap", "outcome", "rate"] as const)
    if (d[k] !== undefined && d[k] !== false)
      p.warn(`${key}.${k}`, "a pull destination is never pushed: this does nothing");
}

/** A pull source: an upstream URL it may send its token to, a pull destination's name, and no webhook of its own. */
function pullSourceRules(pull: PullSourceConfig, src: SourceConfig, key: string, p: Problems): void {
  let url: URL | null = null;
  try {
    url = new URL(pull.url);
  } catch {
    p.error(`${key}.pull.url`, "expected an http(s) URL");
  }
  if (url && url.protocol !== "https:" && url.protocol !== "http:")
    p.error(`${key}.pull.url`, "expected an http(s) URL");
  else if (url?.protocol === "http:" && !pull.allow_insecure)
    p.error(`${key}.pull.url`, "http:// sends the token in the clear: it needs allow_insecure = true", "use https://");
  if (url && (url.search || url.hash || url.username || url.password))
    p.error(`${key}.pull.url`, "the base URL only: no query, fragment or credentials (the token goes in token)");
  if (!PULL_NAME.test(pull.destination))
    p.error(
      `${key}.pull.destination`,
      "the upstream pull destination's name, without pull: (1-64 letters, digits, _ . -)",
    );
  if (pull.max > PULL_MAX_LEASE) p.error(`${key}.pull.max`, `a lease request takes at most ${PULL_MAX_LEASE} batches`);
  if (pull.wait_s > PULL_MAX_WAIT_S)
    p.error(`${key}.pull.wait_s`, `a lease request waits at most ${PULL_MAX_WAIT_S} s upstream`);
  if (pull.consumer !== undefined && !CONSUMER_NAME.test(pull.consumer))
    p.error(`${key}.pull.consumer`, "a consumer's name is 1-64 letters, digits, _ . -");
  if (src.module || src.template)
    p.error(key, "a pull source takes no webhooks: set pull, or module/template, not both");
}
