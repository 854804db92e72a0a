// make bench: run every benchmark in this folder, one after another; each prints JSON lines.
import { readdirSync } from "node:fs";
import { join } from "node:path";

const dir = import.meta.dir;
let failed = false;
for (const f of readdirSync(dir).filter((n) => n.endsWith(".ts") && n !== "run.ts").sort()) {
  const p = Bun.spawn([process.execPath, join(dir, f)], { stdout: "inherit", stderr: "inherit" });
  if ((await p.exited) !== 0) {
    console.error(`bench ${f} failed`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
