// A secret learned on the wire (Asana's X-Hook-Secret, Notion's verification_token): kept in the
// file the source's `secrets.secret` names, 0600, written atomically, only while the operator has
// armed the source (`hookspool source arm`, a `<file>.armed` holding its expiry) and only when no
// secret is kept there yet. The first handshake inside the window the operator opened wins; a
// later one with another secret is refused, and the same one again is answered (a sender's
// retry). Never logged, never stored anywhere else.
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import type { SecretRef } from "../config/types.ts";
import { constantTimeEqual } from "../plugin/verify.ts";

export type LearnOutcome = "learned" | "same" | "not_armed" | "taken" | "no_file";

/** The file that arms a learning source, beside its secret file: `{"until": <unix seconds>}`. */
export const armPath = (secretFile: string) => `${secretFile}.armed`;

/** Until when the source is armed (null: it is not). */
export function armedUntil(secretFile: string): number | null {
  try {
    const doc = JSON.parse(readFileSync(armPath(secretFile), "utf8")) as { until?: unknown };
    return typeof doc.until === "number" && Number.isFinite(doc.until) ? doc.until : null;
  } catch {
    return null;
  }
}

/** The kept secret, or null when there is none yet (no file, or an empty one). */
function kept(file: string): string | null {
  if (!existsSync(file)) return null;
  const v = readFileSync(file, "utf8").replace(/\r?\n$/, "");
  return v === "" ? null : v;
}

/** Keep `offered` as the source's secret if the rules allow it; says what happened. */
export function keepLearnedSecret(ref: SecretRef | undefined, offered: string, now: number): LearnOutcome {
  if (!ref || !("file" in ref)) return "no_file";
  const file = ref.file;
  const current = kept(file);
  if (current !== null) return constantTimeEqual(current, offered) ? "same" : "taken";
  const until = armedUntil(file);
  if (until === null || until < now) return "not_armed";
  const tmp = `${file}.learning-${process.pid}`;
  writeFileSync(tmp, `${offered}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  rmSync(armPath(file), { force: true });
  return "learned";
}
