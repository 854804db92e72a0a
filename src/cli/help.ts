// The --help page: the command, a usage line, then its arguments, options, the global options
// and sub-commands in left-aligned columns (one width per page, no trailing spaces).
import type { ArgDef, ArgsDef, CommandDef, CommandMeta } from "citty";
import { GLOBAL_ARGS } from "./context.ts";

// biome-ignore lint/suspicious/noExplicitAny: citty's CommandDef is generic over each command's args
export type AnyCommand = CommandDef<any>;

/** What a command may add to citty's meta for its help page and for root.ts. */
export interface HelpMeta extends CommandMeta {
  /** The usage after `hookspool <cmd>` when the args cannot say it (replay: ids or --dead). */
  usage?: string;
  /** It takes several ids (replay 3 4 5): its last positional repeats. */
  variadic?: boolean;
}

type Resolvable<T> = T | Promise<T> | (() => T | Promise<T>);

/** citty lets meta, args and subCommands be values, promises or functions; ours are values. */
async function resolve<T>(v: Resolvable<T> | undefined): Promise<T | undefined> {
  return typeof v === "function" ? await (v as () => T | Promise<T>)() : await v;
}

/** A command's meta with our fields (usage, variadic). */
export async function metaOf(cmd: AnyCommand): Promise<HelpMeta> {
  return ((await resolve(cmd.meta as Resolvable<HelpMeta>)) ?? {}) as HelpMeta;
}

/** A group's commands by name, or undefined for a leaf command. */
export async function subCommandsOf(cmd: AnyCommand): Promise<Record<string, AnyCommand> | undefined> {
  return (await resolve(cmd.subCommands as Resolvable<Record<string, AnyCommand>>)) ?? undefined;
}

/** `--limit <n>`, `--dead`, `<batch>...` */
function label(name: string, def: ArgDef, last: boolean, variadic: boolean): string {
  if (def.type === "positional") return `<${name}>${last && variadic ? "..." : ""}`;
  if (def.type === "boolean") return `--${name}`;
  return `--${name} <${def.valueHint ?? name}>`;
}

/** The description, then "(required)" and "(default: x)" where they say something. */
function describe(def: ArgDef): string {
  const notes: string[] = [];
  if (def.required === true && def.type !== "positional" && def.default === undefined) notes.push("(required)");
  if (def.default !== undefined && def.default !== "" && def.default !== false) notes.push(`(default: ${def.default})`);
  return [def.description ?? "", ...notes].filter(Boolean).join(" ");
}

/** The usage line citty's args imply: positionals, required flags, [options], a command. */
function impliedUsage(own: [string, ArgDef][], meta: HelpMeta, subs: boolean, runnable: boolean): string {
  const words: string[] = [];
  if (subs) words.push(runnable ? "[command]" : "<command>");
  const positionals = own.filter(([, d]) => d.type === "positional");
  positionals.forEach(([name, d], i) => {
    const shown = `${name}${i === positionals.length - 1 && meta.variadic ? "..." : ""}`;
    words.push(d.required === false || d.default !== undefined ? `[${shown}]` : `<${shown}>`);
  });
  for (const [name, d] of own)
    if (d.type !== "positional" && d.required === true && d.default === undefined)
      words.push(`--${name} <${d.valueHint ?? name}>`);
  words.push("[options]");
  return words.join(" ");
}

/**
 * The help page of the last command of `chain` (the root first). Headings are bold on a
 * terminal; otherwise the page is plain text.
 */
export async function renderHelp(chain: AnyCommand[], opts: { color: boolean }): Promise<string> {
  const cmd = chain[chain.length - 1];
  const metas = await Promise.all(chain.map(metaOf));
  const meta = metas[metas.length - 1];
  const path = ["hookspool", ...metas.slice(1).map((m) => m.name ?? "")].join(" ");
  const bold = (s: string) => (opts.color ? `\u001b[1m${s}\u001b[22m` : s);
  const args = ((await resolve(cmd.args as Resolvable<ArgsDef>)) ?? {}) as ArgsDef;
  const own = Object.entries(args).filter(([name]) => !(name in GLOBAL_ARGS));
  const positionals = own.filter(([, d]) => d.type === "positional");
  const flags = own.filter(([, d]) => d.type !== "positional");
  const subs = await subCommandsOf(cmd);

  const sections: [string, [string, string][]][] = [
    [
      "Arguments",
      positionals.map(([n, d], i) => [label(n, d, i === positionals.length - 1, meta.variadic === true), describe(d)]),
    ],
    ["Options", flags.map(([n, d]) => [label(n, d, false, false), describe(d)])],
    [
      "Global options",
      Object.entries(GLOBAL_ARGS as ArgsDef).map(([n, d]) => [label(n, d, false, false), describe(d)]),
    ],
  ];
  if (subs) {
    const rows: [string, string][] = [];
    for (const [name, sub] of Object.entries(subs)) {
      const m = await metaOf(sub);
      if (!m.hidden) rows.push([name, m.description ?? ""]);
    }
    sections.push(["Commands", rows]);
  }
  const width = Math.max(...sections.flatMap(([, rows]) => rows.map(([l]) => l.length)));

  const lines = [
    bold(`${path}${meta.description ? ` - ${meta.description}` : ""}`),
    "",
    `${bold("Usage:")} ${path} ${meta.usage ?? impliedUsage(own, meta, Boolean(subs), Boolean(cmd.run))}`,
  ];
  for (const [title, rows] of sections) {
    if (rows.length === 0) continue;
    lines.push("", bold(`${title}:`));
    for (const [l, d] of rows) lines.push(`  ${l.padEnd(width)}  ${d}`.trimEnd());
  }
  if (subs) lines.push("", `Run \`${path} <command> --help\` for a command's options.`);
  return lines.join("\n");
}
