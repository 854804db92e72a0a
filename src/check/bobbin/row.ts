// One row of a bobbin's scorecard: pass, fail or skip, and every problem as file:line with how
// to fix it. Advisory rows count only under --strict.
export type Outcome = "pass" | "fail" | "skip";

export interface Problem {
  /** Relative to the bobbin's directory. */
  file: string;
  line?: number;
  message: string;
  fix: string;
}

export interface Row {
  name: string;
  advisory: boolean;
  outcome: Outcome;
  problems: Problem[];
  /** Why a row was skipped, or what a passing row saw. */
  note?: string;
}

export function row(name: string, problems: Problem[], note?: string, advisory = false): Row {
  return { name, advisory, outcome: problems.length ? "fail" : "pass", problems, ...(note ? { note } : {}) };
}

export function skipped(name: string, why: string, advisory = false): Row {
  return { name, advisory, outcome: "skip", problems: [], note: why };
}

/** The 1-based line of the first line of `text` matching `re`, or undefined. */
export function lineOf(text: string | undefined, re: RegExp): number | undefined {
  if (text === undefined) return undefined;
  const i = text.split("\n").findIndex((l) => re.test(l));
  return i < 0 ? undefined : i + 1;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The line of a TOML key path (`settings.scheme.type`): its own line, else its table's. */
export function tomlLine(text: string | undefined, key: string): number | undefined {
  if (!key) return undefined;
  const parts = key.split(".");
  const last = parts[parts.length - 1].replace(/^"|"$/g, "");
  const header = parts.slice(0, -1).join(".");
  const lines = (text ?? "").split("\n");
  let start = 0;
  if (header) {
    const h = lines.findIndex((l) => new RegExp(`^\\s*\\[+\\s*${escapeRe(header)}\\s*\\]+`).test(l));
    if (h >= 0) start = h;
  }
  for (let i = start; i < lines.length; i++) {
    if (i > start && /^\s*\[/.test(lines[i]) && header) break;
    if (
      new RegExp(`^\\s*"?${escapeRe(last)}"?\\s*=`).test(lines[i]) ||
      new RegExp(`^\\s*\\[+\\s*${escapeRe(key)}\\s*\\]+`).test(lines[i])
    )
      return i + 1;
  }
  const own = lines.findIndex((l) => new RegExp(`^\\s*\\[+\\s*${escapeRe(parts[0])}[\\].]`).test(l));
  return header && start > 0 ? start + 1 : own >= 0 ? own + 1 : undefined;
}
