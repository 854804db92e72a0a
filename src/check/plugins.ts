// hookspool check, the code it would load: each source's plugin, imported one at a time, and
// the owner/mode rule for code loaded by path (source modules, spool.bobbin_path, a bobbin's
// processor).
import { isAbsolute, join, resolve } from "node:path";
import { codePathProblem } from "../bobbin/code-path.ts";
import { BUILTIN_PREFIX, builtinModule, readBobbinManifest } from "../bobbin/registry.ts";
import { ConfigError, expandPath } from "../config/load.ts";
import { quoteKey } from "../config/parse.ts";
import { loadSources } from "../config/sources.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import type { CheckDeps } from "./check.ts";
import { problem } from "./problem.ts";

/** What check needs to know about a loaded source plugin. */
export interface PluginFacts {
  /** The plugin's default destination; undefined when it has none or computes it per event. */
  action?: string;
  /** The plugin computes its action per event: check cannot follow it. */
  dynamicAction?: boolean;
  span?: string;
  eventHeader?: string;
  /** Whether the sender retries a failed delivery, as the plugin says. */
  senderRetries?: boolean;
  /** How many headers the source keeps (config's keep_headers, else the plugin's). */
  keepHeaders?: number;
  /** The plugin reads each event's version (a template's `version`, a code source's version()). */
  versioned?: boolean;
}

export function codePathRules(
  config: Config,
  configDir: string,
  deps: CheckDeps,
): { problems: ConfigProblem[]; unsafe: Set<string> } {
  const problems: ConfigProblem[] = [];
  const unsafe = new Set<string>();
  for (const [name, src] of Object.entries(config.sources)) {
    // A built-in bobbin's code is compiled into the binary, not loaded by path.
    if (!src.module || src.module.startsWith("builtin:")) continue;
    // A relative module is resolved against the config file's directory, as the intake does.
    const path = isAbsolute(src.module) ? src.module : resolve(configDir, src.module);
    const bad = codePathProblem(path, "file", deps.uid);
    if (bad) {
      problems.push(problem("error", `sources.${quoteKey(name)}.module`, bad.message, bad.hint));
      unsafe.add(name);
    }
  }
  config.spool.bobbin_path.forEach((entry, i) => {
    const key = `spool.bobbin_path[${i}]`;
    const path = entry.startsWith("~") ? expandPath(entry, deps.cwd, deps.env) : entry;
    if (!isAbsolute(path))
      return problems.push(
        problem("error", key, `${entry} is not an absolute path`, "code is loaded by absolute path only"),
      );
    const bad = codePathProblem(path, "directory", deps.uid);
    if (bad) problems.push(problem("error", key, bad.message, bad.hint));
  });
  return { problems, unsafe };
}

/** Import every plugin, one source at a time so one broken module does not hide the others. */
export async function loadPlugins(
  config: Config,
  configDir: string,
  file: string,
  skip: Set<string>,
  deps: CheckDeps,
): Promise<{ problems: ConfigProblem[]; facts: Map<string, PluginFacts> }> {
  const problems: ConfigProblem[] = [];
  const facts = new Map<string, PluginFacts>();
  for (const [name, src] of Object.entries(config.sources)) {
    if (skip.has(name)) continue;
    try {
      const loaded = await loadSources({ ...config, sources: { [name]: src } }, { configDir, env: deps.env, file });
      const source = loaded.get(name);
      const plugin = source?.plugin;
      if (!plugin) continue;
      facts.set(name, {
        keepHeaders: source?.keepHeaders.length ?? 0,
        action: typeof plugin.action === "string" ? plugin.action : undefined,
        dynamicAction: typeof plugin.action === "function",
        span: plugin.span,
        eventHeader: plugin.eventHeader,
        senderRetries: plugin.senderRetries,
        versioned: typeof plugin.version === "function",
      });
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      problems.push(...e.problems.map((p) => ({ ...p, level: "error" as const })));
    }
  }
  return { problems, facts };
}

/**
 * A bobbin instance's processor must be there to run: compiled in, or a file under its private
 * bobbin's directory that the owner/mode rule lets the runtime load.
 */
export function processorModuleRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const d of Object.values(config.destinations)) {
    const env = d.env ?? {};
    if (d.processor === undefined || !env.HOOKSPOOL_BOBBIN_DIR) continue;
    const key = `bobbins.${quoteKey(d.processor)}`;
    const dir = env.HOOKSPOOL_BOBBIN_DIR;
    const manifest = readBobbinManifest(dir);
    const module = manifest?.processor?.module ?? manifest?.poll?.module;
    if (!module) continue;
    if (dir.startsWith(BUILTIN_PREFIX)) {
      if (builtinModule(`${dir}/${module}`) === undefined)
        out.push(problem("error", key, `the built-in ${env.HOOKSPOOL_BOBBIN} has no ${module} module`));
      continue;
    }
    const bad = codePathProblem(join(dir, `${module}.ts`), "file", deps.uid);
    if (bad) out.push(problem("error", key, `its processor: ${bad.message}`, bad.hint));
  }
  return out;
}
