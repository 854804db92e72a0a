// Temporary directories that are removed after each test file.
import { afterAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];
let registered = false;

/** A fresh private directory under the system temp dir, removed when the file's tests end. */
export function tempDir(prefix = "hookspool-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  if (!registered) {
    registered = true;
    afterAll(() => {
      for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
    });
  }
  return dir;
}
