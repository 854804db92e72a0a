// A bobbin's manifest (bobbin.toml): who runs the service and its pages, how its requests are
// read (a code source or the template source), its secrets, typed settings, processor and
// outputs. parseManifest reads one and reports every problem with the key it is at; config
// loading refuses a bobbin whose manifest has one, and `hookspool bobbin check` shows them.
// The manifest's types and key lists are manifest-schema.ts's; importers take them from here too.
import { parse as parseToml } from "smol-toml";
import { payloadPathProblem } from "../plugin/get-path.ts";
import { TEMPLATE_KEYS } from "../plugin/template.ts";
import { healthSection } from "./manifest-health.ts";
import { eventsApiSection } from "./manifest-sweep.ts";
import {
  EVENT_TYPE_TOKEN,
  hasSettingType,
  isTable,
  MAX_INDEXED,
  type Manifest,
  type ManifestContext,
  type ManifestProblem,
  NAME_PART,
  type PollSection,
  type ProcessorSection,
  PROVIDER_KEYS,
  type Provider,
  RESERVED_VENDOR,
  type SecretSpec,
  SETTING_TYPES,
  type SettingSpec,
  type SettingType,
  SOURCE_KEYS,
  type SourceSection,
  SWEEP_KINDS,
  type EventsApiSection,
  type SweepSection,
  type Table,
  TEMPLATE_SETTING_TYPES,
  tomlKey,
  TOP_KEYS,
} from "./manifest-schema.ts";

export {
  EVENT_TYPE_TOKEN,
  hasSettingType,
  MAX_INDEXED,
  NAME_PART,
  RESERVED_VENDOR,
  SETTING_TYPES,
  SWEEP_KINDS,
} from "./manifest-schema.ts";
export type {
  EventsApiSection,
  Manifest,
  ManifestContext,
  ManifestProblem,
  PollSection,
  ProcessorSection,
  Provider,
  SecretSpec,
  SettingSpec,
  SettingType,
  SourceSection,
  SweepSection,
} from "./manifest-schema.ts";
export type { HealthSection } from "./manifest-health.ts";

/** Whether a directory part names a name part: - may be written _. */
function dirMatches(part: string, dirPart: string): boolean {
  return dirPart.replaceAll("_", "-") === part;
}

/** Parse and check bobbin.toml. A manifest is returned only when it has no problem. */
export function parseManifest(
  text: string,
  ctx: ManifestContext,
): { manifest: Manifest | null; problems: ManifestProblem[] } {
  const problems: ManifestProblem[] = [];
  const err = (key: string, message: string, hint?: string) =>
    problems.push({ key, message, ...(hint ? { hint } : {}) });
  let doc: Table;
  try {
    doc = parseToml(text) as Table;
  } catch (e) {
    err("", `not valid TOML: ${(e as Error).message.split("\n")[0]}`);
    return { manifest: null, problems };
  }
  for (const k of Object.keys(doc)) if (!TOP_KEYS.includes(k)) err(k, "unknown key");

  const str = (t: Table, k: string, at: string, required: boolean): string | undefined => {
    const v = t[k];
    if (v === undefined) {
      if (required) err(at, "required");
      return undefined;
    }
    if (typeof v !== "string" || v === "") {
      err(at, "expected a non-empty string");
      return undefined;
    }
    return v;
  };
  const bool = (t: Table, k: string, at: string, def: boolean): boolean => {
    const v = t[k];
    if (v === undefined) return def;
    if (typeof v !== "boolean") err(at, "expected true or false");
    return v === true;
  };
  const num = (t: Table, k: string, at: string, def: number | undefined, min = 0): number | undefined => {
    const v = t[k];
    if (v === undefined) return def;
    if (typeof v !== "number" || !Number.isFinite(v) || v < min) {
      err(at, `expected a number >= ${min}`);
      return def;
    }
    return v;
  };
  const table = (k: string): Table | undefined => {
    const v = doc[k];
    if (v === undefined) return undefined;
    if (!isTable(v)) {
      err(k, "expected a table");
      return undefined;
    }
    return v;
  };

  // The name and its directory.
  const name = str(doc, "name", "name", true) ?? "";
  const [vendor = "", product = "", ...more] = name.split(".");
  if (name && (more.length > 0 || !NAME_PART.test(vendor) || !NAME_PART.test(product))) {
    err(
      "name",
      `"${name}" is not <vendor>.<product>`,
      "exactly one dot; each part lower-case letters, digits and -, starting with a letter, at most 40 characters",
    );
  } else if (name) {
    const [dv = "", dp = "", ...rest] = ctx.dir.split("/");
    if (rest.length > 0 || !dirMatches(vendor, dv) || !dirMatches(product, dp))
      err("name", `"${name}" is not the name of its directory ${ctx.dir}`, `move it to ${vendor}/${product}/`);
    if (vendor === RESERVED_VENDOR && !ctx.builtin)
      err(
        "name",
        `the ${RESERVED_VENDOR}. namespace is reserved for the bobbins that ship with hookspool`,
        "name it after the company that runs the service",
      );
  }
  const version = str(doc, "version", "version", true) ?? "";
  const summary = str(doc, "summary", "summary", true) ?? "";

  // [provider]: its shape only; the pages and their URLs are the conformance kit's to check.
  const providerTable = table("provider");
  if (!providerTable) err("provider", "required: the [provider] table (vendor, product, homepage, webhook_docs, ...)");
  const provider: Provider = { vendor: "", product: "" };
  if (providerTable) {
    for (const k of Object.keys(providerTable)) if (!PROVIDER_KEYS.includes(k)) err(`provider.${k}`, "unknown key");
    for (const k of PROVIDER_KEYS) {
      const v = str(providerTable, k, `provider.${k}`, k === "vendor" || k === "product");
      if (v !== undefined) (provider as unknown as Record<string, string>)[k] = v;
    }
    const checked = provider.checked;
    if (checked !== undefined && (checked.trim() === "" || checked.length > 160 || /[\r\n|]/.test(checked)))
      err(
        "provider.checked",
        "one line of at most 160 characters, without |: what the captures were checked against " +
          "(an SDK, its version or commit and file, or the provider's page)",
      );
    // A built-in ships with hookspool, so a reader of the catalogue is owed this line for each
    // one; a private bobbin may leave it out (the catalogue shows "-").
    else if (checked === undefined && ctx.builtin && !problems.some((p) => p.key === "provider.checked"))
      err(
        "provider.checked",
        "required: a built-in says what it was checked against",
        "one line summarising its README's Checked against section: the SDK, its version or commit and file, " +
          "or the provider's page",
      );
  }

  // [secrets.*]
  const secrets: Record<string, SecretSpec> = {};
  for (const [s, v] of Object.entries(table("secrets") ?? {})) {
    const at = `secrets.${tomlKey(s)}`;
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(s)) err(at, "a secret name is a lower-case identifier (letters, digits, _)");
    if (!isTable(v)) {
      err(at, "expected a table with description (and processor, required)");
      continue;
    }
    for (const k of Object.keys(v))
      if (!["description", "processor", "required", "aliases"].includes(k)) err(`${at}.${k}`, "unknown key");
    const aliases =
      v.aliases === undefined
        ? []
        : Array.isArray(v.aliases) && v.aliases.every((a) => typeof a === "string" && /^[a-z][a-z0-9_]{0,39}$/.test(a))
          ? (v.aliases as string[])
          : (err(`${at}.aliases`, "expected a list of earlier secret names"), []);
    secrets[s] = {
      description: str(v, "description", `${at}.description`, true) ?? "",
      processor: bool(v, "processor", `${at}.processor`, false),
      required: bool(v, "required", `${at}.required`, true),
      aliases,
    };
  }

  // [settings.*]
  const settings: Record<string, SettingSpec> = {};
  for (const [s, v] of Object.entries(table("settings") ?? {})) {
    const at = `settings.${tomlKey(s)}`;
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(s)) err(at, "a setting name is a lower-case identifier (letters, digits, _)");
    if (!isTable(v)) {
      err(at, "expected a table with description and type");
      continue;
    }
    for (const k of Object.keys(v))
      if (!["description", "type", "required", "default"].includes(k)) err(`${at}.${k}`, "unknown key");
    const type = v.type;
    if (type === undefined) err(`${at}.type`, `required: one of ${SETTING_TYPES.join(", ")}`);
    else if (!(SETTING_TYPES as readonly unknown[]).includes(type))
      err(`${at}.type`, `unknown type "${String(type)}": one of ${SETTING_TYPES.join(", ")}`);
    const required = bool(v, "required", `${at}.required`, false);
    const spec: SettingSpec = {
      description: str(v, "description", `${at}.description`, true) ?? "",
      type: (type as SettingType) ?? "string",
      required,
    };
    if (v.default !== undefined) {
      if ((SETTING_TYPES as readonly unknown[]).includes(type) && !hasSettingType(type as SettingType, v.default))
        err(`${at}.default`, `the default is not a ${String(type)}`);
      spec.default = v.default;
    } else if (!required)
      err(`${at}.default`, "a setting that is not required needs a default", "set required = true, or give a default");
    settings[s] = spec;
  }

  // [source] or [poll], and [processor]
  const sourceTable = table("source");
  const pollTable = table("poll");
  const processorTable = table("processor");
  let source: SourceSection | undefined;
  let poll: PollSection | undefined;
  let processor: ProcessorSection | undefined;
  if (pollTable && (sourceTable || processorTable))
    err("poll", "a poll bobbin has [poll] in place of [source] and [processor]");
  if (!pollTable && !sourceTable)
    err("source", "required: [source] with module or template (or [poll] for a service without push)");
  if (sourceTable) {
    source = {};
    for (const k of Object.keys(sourceTable)) if (!SOURCE_KEYS.includes(k)) err(`source.${k}`, "unknown key");
    const hasModule = sourceTable.module !== undefined;
    const hasTemplate = sourceTable.template !== undefined;
    if (hasModule === hasTemplate) err("source", "exactly one of module or template");
    if (hasModule) source.module = str(sourceTable, "module", "source.module", true);
    if (hasTemplate) {
      const t = sourceTable.template;
      if (t === "settings" || isTable(t)) source.template = t;
      else err("source.template", 'expected a template table or "settings"');
    }
    const span = str(sourceTable, "span", "source.span", false);
    if (span !== undefined && !ctx.presets.includes(span))
      err("source.span", `"${span}" is not a span preset: one of ${ctx.presets.join(", ")}`);
    source.span = span;
    if (sourceTable.config !== undefined) {
      const c = sourceTable.config;
      if (!Array.isArray(c) || !c.every((x) => typeof x === "string"))
        err("source.config", "expected a list of setting names");
      else source.config = c as string[];
    }
    if (sourceTable.sender_retries !== undefined)
      source.sender_retries = bool(sourceTable, "sender_retries", "source.sender_retries", false);
    source.expect_every_s = num(sourceTable, "expect_every_s", "source.expect_every_s", undefined);
    source.dedup_window_s = num(sourceTable, "dedup_window_s", "source.dedup_window_s", undefined);
    source.proxy = str(sourceTable, "proxy", "source.proxy", false);
  }
  if (processorTable) {
    for (const k of Object.keys(processorTable))
      if (!["module", "timeout_s", "state"].includes(k)) err(`processor.${k}`, "unknown key");
    processor = {
      module: str(processorTable, "module", "processor.module", true) ?? "",
      timeout_s: num(processorTable, "timeout_s", "processor.timeout_s", 300) ?? 300,
      state: bool(processorTable, "state", "processor.state", false),
    };
  }
  if (pollTable) {
    for (const k of Object.keys(pollTable))
      if (!["every_s", "jitter_s", "module", "timeout_s", "state"].includes(k)) err(`poll.${k}`, "unknown key");
    const every = num(pollTable, "every_s", "poll.every_s", undefined, 60);
    if (pollTable.every_s === undefined) err("poll.every_s", "required: seconds between polls (at least 60)");
    const jitter = num(pollTable, "jitter_s", "poll.jitter_s", undefined);
    if (jitter !== undefined && jitter > 300) err("poll.jitter_s", "at most 300");
    const module = str(pollTable, "module", "poll.module", true);
    if (module !== undefined && module !== "poller")
      err("poll.module", 'a poll bobbin\'s module is "poller" (poller.ts)');
    poll = {
      every_s: every ?? 60,
      jitter_s: jitter ?? Math.min(300, (every ?? 60) / 10),
      module: module ?? "poller",
      timeout_s: num(pollTable, "timeout_s", "poll.timeout_s", 300) ?? 300,
      state: bool(pollTable, "state", "poll.state", true),
    };
  }

  // [outputs.*]
  const outputs: Record<string, { description: string }> = {};
  for (const [o, v] of Object.entries(table("outputs") ?? {})) {
    const at = `outputs.${tomlKey(o)}`;
    if (o !== "*" && !EVENT_TYPE_TOKEN.test(o))
      err(at, `"${o}" is not an event type ("*" stands for every accepted event)`);
    if (!isTable(v)) {
      err(at, "expected a table with description");
      continue;
    }
    for (const k of Object.keys(v)) if (k !== "description") err(`${at}.${k}`, "unknown key");
    outputs[o] = { description: str(v, "description", `${at}.description`, true) ?? "" };
  }
  if (Object.keys(outputs).length === 0 && (sourceTable || pollTable))
    err("outputs", 'required: at least one [outputs.<event_type>] (or [outputs."*"])');

  // The template source's settings: a setting named for a template key is that key's value.
  if (source?.template !== undefined) {
    const fixed = isTable(source.template) ? source.template : null;
    for (const [s, spec] of Object.entries(settings)) {
      const allowed = (TEMPLATE_SETTING_TYPES as Record<string, readonly SettingType[] | undefined>)[s];
      if (allowed) {
        if (fixed && Object.hasOwn(fixed, s))
          err(
            `settings.${s}`,
            `the fixed template sets ${s} already; a setting cannot override it`,
            `remove [settings.${s}] or the template's ${s}`,
          );
        if (!allowed.includes(spec.type))
          err(`settings.${s}.type`, `the template key ${s} takes ${allowed.join(" or ")}`);
      } else if (!processor) {
        err(
          `settings.${s}`,
          "a template bobbin without a processor has no use for this setting: only template keys are settings",
          `one of ${TEMPLATE_KEYS.join(", ")}`,
        );
      }
    }
    if (source.template === "settings") {
      for (const k of ["scheme", "key"])
        if (!settings[k]) err(`settings.${k}`, `a "settings" template needs a [settings.${k}]`);
    }
  }

  // The sweep: a kind hookspool knows, a declared secret for its token, and for events-api its list.
  let sweep: SweepSection | undefined;
  const sweepTable = table("sweep");
  if (sweepTable) {
    for (const k of Object.keys(sweepTable))
      if (!["kind", "secret", "api"].includes(k)) err(`sweep.${k}`, "unknown key");
    const kind = str(sweepTable, "kind", "sweep.kind", true);
    const secret = str(sweepTable, "secret", "sweep.secret", true);
    const known = kind !== undefined && (SWEEP_KINDS as readonly string[]).includes(kind);
    if (kind !== undefined && !known)
      err("sweep.kind", `"${kind}" is not a sweep hookspool has: ${SWEEP_KINDS.join(", ")}`);
    else if (secret !== undefined && !Object.hasOwn(secrets, secret))
      err(
        "sweep.secret",
        `"${secret}" is not a secret of this bobbin`,
        `declare [secrets.${secret}] (required = false: only the sweep needs it)`,
      );
    let api: EventsApiSection | undefined;
    if (kind === "events-api") {
      if (sweepTable.api === undefined) err("sweep.api", "required: an events-api sweep says where its list is");
      else if (!isTable(sweepTable.api)) err("sweep.api", "expected a table");
      else api = eventsApiSection(sweepTable.api, err);
    } else if (known && sweepTable.api !== undefined)
      err("sweep.api", `only an events-api sweep has a [sweep.api]; ${kind} knows its API`);
    // A sweep that enqueues finds what is spooled by the dedup id, so the source must have one
    // that stays the same when the provider sends a delivery again.
    const dedup = isTable(source?.template) ? source.template.dedup : undefined;
    if ((kind === "stripe-events" || kind === "events-api") && (dedup === "body_sha256" || dedup === "none"))
      err(
        "sweep.kind",
        `a ${kind} sweep needs a dedup id from the event itself; the template's dedup is ${dedup}`,
        "dedup on the provider's event id",
      );
    if (known && secret !== undefined && Object.hasOwn(secrets, secret) && (kind !== "events-api" || api))
      sweep = { kind: kind as SweepSection["kind"], secret, ...(api ? { api } : {}) };
  }

  // Settings a code source takes in its own table: each must be a declared setting.
  for (const n of source?.config ?? []) {
    if (source?.template !== undefined)
      err("source.config", "a template bobbin's settings reach the template directly; config is for a code source");
    else if (!Object.hasOwn(settings, n))
      err("source.config", `"${n}" is not a setting of this bobbin`, `declare [settings.${n}]`);
  }

  const healthTable = table("health");
  const health = healthTable ? healthSection(healthTable, secrets, err) : undefined;
  // indexed: payload paths as --where takes them, each once.
  const indexed: string[] = [];
  if (doc.indexed !== undefined) {
    const list = doc.indexed;
    if (!Array.isArray(list) || !list.every((x) => typeof x === "string"))
      err("indexed", "expected a list of payload paths", 'indexed = ["repository.full_name"]');
    else if (list.length > MAX_INDEXED)
      err("indexed", `at most ${MAX_INDEXED} paths: each index costs every stored event a parse of its payload`);
    else
      list.forEach((path, i) => {
        const why = payloadPathProblem(path);
        if (why) err(`indexed[${i}]`, why, 'keys joined by dots, e.g. "repository.full_name"');
        else if (indexed.includes(path)) err(`indexed[${i}]`, `"${path}" is listed twice`);
        else indexed.push(path);
      });
  }

  if (problems.length > 0) return { manifest: null, problems };
  return {
    manifest: {
      name,
      vendor,
      product,
      version,
      summary,
      provider,
      source,
      poll,
      secrets,
      settings,
      processor,
      outputs,
      ...(sweep ? { sweep } : {}),
      ...(health ? { health } : {}),
      indexed,
    },
    problems,
  };
}
