// Secret references: resolved at use time, never cached, never logged, never stored.
import { readFileSync } from "node:fs";
import { HookspoolError } from "../errors.ts";
import type { SecretRef } from "./types.ts";

export type Env = Record<string, string | undefined>;

/** A reference as words, for messages: never the value. */
export function describeSecretRef(ref: SecretRef): string {
  if ("file" in ref) return `file ${ref.file}`;
  if ("env_file" in ref) return `${ref.key} in ${ref.env_file}`;
  return `environment variable ${ref.env}`;
}

function unreadable(ref: SecretRef, why: string): HookspoolError {
  return new HookspoolError("E_CONFIG", `secret (${describeSecretRef(ref)}) ${why}`, {
    hint: "fix the reference or the file's permissions",
  });
}

function readText(path: string, ref: SecretRef): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    throw unreadable(ref, `cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

/** Parse a KEY=VALUE file: comments, blank lines, `export `, and one level of quotes. */
export function parseEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2];
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0]))
      value = value.slice(1, -1);
    out.set(m[1], value);
  }
  return out;
}

/**
 * Read a secret now. file refs drop one trailing newline; an empty secret is refused (an
 * HMAC with an empty key verifies anything signed with an empty key). Errors name the
 * reference, never the value.
 */
export function resolveSecret(ref: SecretRef, env: Env = process.env): string {
  let value: string | undefined;
  if ("file" in ref) {
    value = readText(ref.file, ref).replace(/\r?\n$/, "");
  } else if ("env_file" in ref) {
    value = parseEnvFile(readText(ref.env_file, ref)).get(ref.key);
    if (value === undefined) throw unreadable(ref, "is not set in the file");
  } else {
    value = env[ref.env];
    if (value === undefined) throw unreadable(ref, "is not set");
  }
  if (value === "") throw unreadable(ref, "is empty");
  return value;
}
