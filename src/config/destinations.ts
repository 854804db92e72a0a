// Destination names and their settings after defaults: hermes:<route>, script:<name>, http.
import { type DestinationType, destinationDefaults } from "./schema.ts";
import type { Config, DestinationConfig } from "./types.ts";
import { parseRate, type Rate } from "../pacing.ts";

export type { DestinationType } from "./schema.ts";

/** What may follow pull: (the path /pull/<name>/ of the intake's pull API). */
export const PULL_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** The pull destination /pull/<name>/ serves, or null when `name` is none. */
export function pullDestination(config: Config, name: string): string | null {
  const full = `pull:${name}`;
  return destinationType(config, full) === "pull" ? full : null;
}

/** quarantine is reserved: it never delivers. */
export const QUARANTINE = "quarantine";

/** The type a destination name has, or null when the name cannot be a destination. */
export function destinationType(config: Config, name: string): DestinationType | null {
  if (name === QUARANTINE || name === "") return null;
  const table = config.destinations[name];
  if (name.startsWith("hermes:")) return name.length > "hermes:".length ? "hermes" : null;
  if (name.startsWith("script:")) return table && (table.argv || table.processor) ? "script" : null;
  // A pull destination is never pushed: its consumers lease its batches through the intake's pull API.
  if (name.startsWith("pull:")) return PULL_NAME.test(name.slice("pull:".length)) && table?.token ? "pull" : null;
  if (!table) return null;
  if (table.module) return "module";
  if (table.type === "http" || (table.type === undefined && table.url !== undefined)) return "http";
  return (table.type as DestinationType | undefined) ?? null;
}

/** Why a destination name is unusable, or null when it is fine. */
export function destinationProblem(config: Config, name: string): string | null {
  if (name === QUARANTINE) return "quarantine is reserved and never delivers";
  if (destinationType(config, name) !== null) return null;
  if (name.startsWith("script:")) return `no [destinations."${name}"] table with argv`;
  if (name.startsWith("hermes:")) return "a hermes destination needs a route name after hermes:";
  if (name.startsWith("pull:"))
    return PULL_NAME.test(name.slice("pull:".length))
      ? `no [destinations."${name}"] table with token (its consumers' bearer token)`
      : "a pull destination's name after pull: is 1-64 letters, digits, _ . - (it is the URL path /pull/<name>/)";
  return `no [destinations."${name}"] table (an http destination needs type = "http" and url)`;
}

export interface DestinationSettings {
  name: string;
  type: DestinationType;
  timeout_s: number;
  max_inflight: number;
  /** What the receiver accepts; Infinity for a script unless configured. */
  max_body_bytes: number;
  table: DestinationConfig | undefined;
}

/** A destination's effective settings, or null when the name does not resolve. */
export function destinationSettings(config: Config, name: string): DestinationSettings | null {
  const type = destinationType(config, name);
  if (type === null) return null;
  const table = config.destinations[name];
  const d = destinationDefaults(type, config.hermes);
  return {
    name,
    type,
    timeout_s: table?.timeout_s ?? d.timeout_s,
    max_inflight: table?.max_inflight ?? d.max_inflight,
    max_body_bytes: table?.max_body_bytes ?? d.max_body_bytes,
    table,
  };
}

/** Every destination the config names: source actions, route destinations, tables, bobbin outputs. */
export function configuredDestinations(config: Config): Set<string> {
  const out = new Set<string>(Object.keys(config.destinations));
  for (const s of Object.values(config.sources)) if (s.action) out.add(s.action);
  for (const r of config.routes) if (r.destination) out.add(r.destination);
  for (const b of Object.values(config.bobbins)) for (const d of Object.values(b.outputs ?? {})) out.add(d);
  out.delete(QUARANTINE);
  return out;
}

/** An awaited destination's outcome timeout, when nothing sets one. */
export const OUTCOME_TIMEOUT_S = 900;

/** How a destination with outcome = "await" waits for its outcome. */
export interface AwaitPolicy {
  timeoutS: number;
  onTimeout: "retry" | "delivered";
}

/** The await policy of `name`, or null when a 2xx ends its batches (outcome = "answer", the default). */
export function awaitPolicy(config: Config, name: string): AwaitPolicy | null {
  const t = config.destinations[name];
  if (t?.outcome !== "await") return null;
  return { timeoutS: t.outcome_timeout_s ?? OUTCOME_TIMEOUT_S, onTimeout: t.on_timeout ?? "retry" };
}

/** A destination's run budgets (null: it has none). */
export interface BudgetPolicy {
  budget: Rate | null;
  keyBudget: Rate | null;
}

function budgetRate(text: string | undefined): Rate | null {
  if (text === undefined) return null;
  try {
    return parseRate(text);
  } catch {
    return null;
  }
}

/** The run budgets of `name`, or null when it sets none (a load refuses a malformed one already). */
export function budgetPolicy(config: Config, name: string): BudgetPolicy | null {
  const t = config.destinations[name];
  const b = { budget: budgetRate(t?.budget), keyBudget: budgetRate(t?.key_budget) };
  return b.budget || b.keyBudget ? b : null;
}
