// Temporary directories, removed when the test process exits (safe to call from any hook).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];
let registered = false;

/** A fresh private directory under the system temp dir. */
export function tempDir(prefix = "hookspool-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  if (!registered) {
    registered = true;
    process.on("exit", () => {
      for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
    });
  }
  return dir;
}
