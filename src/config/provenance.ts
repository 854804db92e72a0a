// Where a problem found in an expanded table belongs in the file. A [bobbins.<i>] becomes
// [sources.<i>], destinations."script:<i>" and output routes ahead of the file's own; a rule that
// runs over those tables names them, but the operator wrote only the instance. Each such key is
// said again as the instance's own, and a file route's index as the operator counts it.
import { quoteKey } from "./parse.ts";
import type { Config, ConfigProblem } from "./types.ts";

const SOURCE = /^sources\.([A-Za-z0-9_-]+)(?:\.(.*))?$/;
const PROCESSOR = /^destinations\."script:([A-Za-z0-9_-]+)"(?:\.(.*))?$/;
const ROUTE = /^routes\[(\d+)\](.*)$/;

/** An instance's source keys that are the instance's own keys under the same name. */
const SAME_NAME = new Set([
  "span",
  "quiet_s",
  "max_s",
  "max_events",
  "max_bytes",
  "expect_every_s",
  "dedup_window_s",
  "max_body_bytes",
  "every_s",
  "jitter_s",
  "stale",
]);

/** The key of the instance's output that became its source's action. */
function actionKey(config: Config, i: string): string {
  const outputs = Object.keys(config.bobbins[i].outputs ?? {});
  const o = outputs.length === 1 ? outputs[0] : outputs.includes("*") ? "*" : undefined;
  return o === undefined ? `bobbins.${i}.outputs` : `bobbins.${i}.outputs.${quoteKey(o)}`;
}

function sourceKey(config: Config, i: string, rest: string | undefined): string {
  const inst = `bobbins.${i}`;
  if (rest === undefined) return inst;
  const [head, ...tail] = rest.split(".");
  if (head === "action") return actionKey(config, i);
  if (head === "secrets") return `${inst}.${rest}`;
  if (head === "template" || head === "config")
    return tail.length && Object.hasOwn(config.bobbins[i].settings ?? {}, tail[0])
      ? `${inst}.settings.${tail.join(".")}`
      : `${inst}.bobbin`;
  if (head === "module") return `${inst}.bobbin`;
  return SAME_NAME.has(head) ? `${inst}.${rest}` : inst;
}

function processorKey(i: string, rest: string | undefined): string {
  const head = rest?.split(".")[0];
  return head === "timeout_s" || head === "state_dir" ? `bobbins.${i}.${head}` : `bobbins.${i}`;
}

/** `key` as the operator wrote it: an expanded table's key becomes its instance's. */
export function userKey(config: Config, key: string): string {
  const src = SOURCE.exec(key);
  if (src && Object.hasOwn(config.bobbins, src[1])) return sourceKey(config, src[1], src[2]);
  const proc = PROCESSOR.exec(key);
  if (proc && Object.hasOwn(config.bobbins, proc[1]) && config.destinations[`script:${proc[1]}`]?.processor === proc[1])
    return processorKey(proc[1], proc[2]);
  const route = ROUTE.exec(key);
  if (route) {
    const n = Number(route[1]);
    const r = config.routes[n];
    if (r?.instance !== undefined) {
      const o = r.match?.event_type;
      return typeof o === "string" ? `bobbins.${r.instance}.outputs.${quoteKey(o)}` : `bobbins.${r.instance}.outputs`;
    }
    // The output routes come first: the file's own are counted from after them.
    const generated = config.routes.filter((x) => x.instance !== undefined).length;
    return `routes[${n - generated}]${route[2]}`;
  }
  return key;
}

/**
 * The problems with every key the operator's own, each said once: an instance's secret read as
 * its source's and as itself is one problem (the worse level wins).
 */
export function userProblems(config: Config, problems: readonly ConfigProblem[]): ConfigProblem[] {
  const seen = new Map<string, ConfigProblem>();
  for (const p of problems) {
    const q = { ...p, key: userKey(config, p.key) };
    const id = `${q.key}\n${q.message}`;
    const had = seen.get(id);
    if (!had) seen.set(id, q);
    else if (had.level === "warning" && q.level === "error")
      seen.set(id, { ...had, level: "error", hint: had.hint ?? q.hint });
  }
  return [...seen.values()];
}
