// hookspool check's problem: one ConfigProblem, said at the key to fix, and the stat the file-mode
// rules share.
import { type Stats, statSync } from "node:fs";
import type { ConfigProblem } from "../config/types.ts";

export const problem = (level: ConfigProblem["level"], key: string, message: string, hint?: string): ConfigProblem => ({
  level,
  key,
  message,
  hint,
});

export function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}
