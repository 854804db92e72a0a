// A secret learned on the wire (Asana's X-Hook-Secret, Notion's verification_token): kept in the
// file the source's `secrets.secret` names, 0600, only while the operator has armed the source
// (`hookspool source arm`, a `<file>.armed` holding its expiry and a one-time arm token), only for
// a handshake whose URL carries that token (`?hookspool_arm_token=`, which the operator gave the
// provider with the webhook URL), and only when no secret is kept yet (no file, or an empty one, as
// SETUP.md has the operator create it). So a stranger who knows the hook URL cannot plant a secret
// while the window is open. Of two handshakes at once (two intakes on a shared home) the one that
// renames the arm file away is the one that writes; the other is told it lost. Never logged,
// never stored anywhere else.
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { SecretRef } from "../config/types.ts";
import { constantTimeEqual } from "../plugin/verify.ts";

export type LearnOutcome = "learned" | "same" | "not_armed" | "wrong_arm" | "taken" | "no_file";

/** The query parameter that carries the arm token (a name every stored URL drops, as it says token). */
export const ARM_PARAM = "hookspool_arm_token";

/** The file that arms a learning source, beside its secret file: `{"until": <unix seconds>, "token": "..."}`. */
export const armPath = (secretFile: string) => `${secretFile}.armed`;

/** The arm of a source, or null when it is not armed (no file, or one that cannot be read). */
export function readArm(secretFile: string): { until: number; token: string } | null {
  try {
    const doc = JSON.parse(readFileSync(armPath(secretFile), "utf8")) as { until?: unknown; token?: unknown };
    return typeof doc.until === "number" &&
      Number.isFinite(doc.until) &&
      typeof doc.token === "string" &&
      doc.token.length >= 16
      ? { until: doc.until, token: doc.token }
      : null;
  } catch {
    return null;
  }
}

/** Until when the source is armed (null: it is not). */
export function armedUntil(secretFile: string): number | null {
  return readArm(secretFile)?.until ?? null;
}

/** A new arm token. */
export function newArmToken(): string {
  return randomBytes(18).toString("base64url");
}

/** The kept secret, or null when there is none yet (no file, or an empty one). */
function kept(file: string): string | null {
  if (!existsSync(file)) return null;
  const v = readFileSync(file, "utf8").replace(/\r?\n$/, "");
  return v === "" ? null : v;
}

function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // A filesystem that cannot fsync a directory: the file itself is synced.
  }
}

/** Put `value` in `file` (0600, synced, the directory too), replacing a missing or empty one in one rename. */
function writeKept(file: string, value: string): void {
  const tmp = `${file}.learning-${randomBytes(8).toString("hex")}`;
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, `${value}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
    fsyncDir(dirname(file));
  }
}

/** Keep `offered` as the source's secret if the rules allow it; says what happened. */
export function keepLearnedSecret(
  ref: SecretRef | undefined,
  offered: string,
  now: number,
  armToken: string | null,
): LearnOutcome {
  if (!ref || !("file" in ref)) return "no_file";
  const file = ref.file;
  const same = () => {
    const current = kept(file);
    return current === null ? null : constantTimeEqual(current, offered) ? "same" : "taken";
  };
  const before = same();
  if (before !== null) return before;
  const arm = readArm(file);
  if (arm === null || arm.until < now) return "not_armed";
  if (armToken === null || !constantTimeEqual(armToken, arm.token)) return "wrong_arm";
  // The arm is used up by the one handshake that renames it away: only that one writes.
  const claim = `${armPath(file)}.taken-${randomBytes(6).toString("hex")}`;
  try {
    renameSync(armPath(file), claim);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return same() ?? "taken";
    throw e;
  }
  try {
    // Kept meanwhile (by hand, say): that secret stays.
    const meanwhile = same();
    if (meanwhile !== null) return meanwhile;
    writeKept(file, offered);
    return "learned";
  } finally {
    rmSync(claim, { force: true });
  }
}
