// Secret references: resolved at use time, never cached, never logged, never stored.
import { closeSync, fstatSync, openSync, readFileSync, readSync, statSync, type Stats } from "node:fs";
import { HookspoolError } from "../errors.ts";
import type { SecretRef, SourceSecret, TimedSecretRef } from "./types.ts";

export type Env = Record<string, string | undefined>;

/** Every reference of a source's secret, newest first (one: a list of one). */
export function refsOf(s: SourceSecret): TimedSecretRef[] {
  return Array.isArray(s) ? s : [s];
}

/** The newest reference of a source's secret: what a sender signs with now, and `send` too. */
export function newestRef(s: SourceSecret): SecretRef {
  const [first] = refsOf(s);
  const { until: _until, ...ref } = first as TimedSecretRef;
  return ref as SecretRef;
}

/** The references in force at `now`, newest first: an entry past its `until` is ignored. */
export function liveRefs(s: SourceSecret, now: number): TimedSecretRef[] {
  return refsOf(s).filter((r) => r.until === undefined || now < r.until);
}

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

/**
 * A secret file read on each use, cheaply: the file stays open (one descriptor per path) and each
 * read is one stat of the path and one pread of the whole file, instead of open, stat, read and
 * close. Nothing of the content is kept between reads. A path that now names another file (a
 * rename over it), a changed mode or owner (ctime), or a changed size or mtime is opened afresh,
 * so a chmod 000 or a removed file fails the very next read, as a plain read would.
 */
interface OpenSecret {
  fd: number;
  stamp: string;
}

/** At most this many secret files held open; the least recently read one is closed first. */
const MAX_OPEN_SECRETS = 64;
const openSecrets = new Map<string, OpenSecret>();

function stampOf(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

function forget(path: string): void {
  const held = openSecrets.get(path);
  if (!held) return;
  openSecrets.delete(path);
  try {
    closeSync(held.fd);
  } catch {
    // already closed: nothing to release
  }
}

function reopen(path: string): OpenSecret {
  forget(path);
  const fd = openSync(path, "r");
  const held = { fd, stamp: stampOf(fstatSync(fd)) };
  openSecrets.set(path, held);
  if (openSecrets.size > MAX_OPEN_SECRETS) forget(openSecrets.keys().next().value as string);
  return held;
}

function readSecretFile(path: string): string {
  const st = statSync(path);
  let held = openSecrets.get(path);
  if (held) {
    // Most recently read last, so the oldest is the one closed when too many are open.
    openSecrets.delete(path);
    openSecrets.set(path, held);
  }
  // The stamp is the fd's own file when it was opened: a path that stats differently now is reopened.
  if (!held || held.stamp !== stampOf(st)) held = reopen(path);
  // One byte more than the stat said, so a file that grew since is seen and read whole the slow way.
  const buf = Buffer.allocUnsafe(st.size + 1);
  let got = 0;
  for (;;) {
    const n = readSync(held.fd, buf, got, buf.length - got, got);
    if (n === 0) break;
    got += n;
    if (got === buf.length) {
      forget(path);
      return readFileSync(path, "utf8");
    }
  }
  return buf.toString("utf8", 0, got);
}

function readText(path: string, ref: SecretRef): string {
  try {
    return readSecretFile(path);
  } catch (e) {
    forget(path);
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
