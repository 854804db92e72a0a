// Build dist/hookspool: one executable with the migrations (and later the bobbins) embedded.
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const outfile = join(root, "dist", "hookspool");
mkdirSync(join(root, "dist"), { recursive: true });

const result = await Bun.build({
  entrypoints: [join(root, "src", "main.ts")],
  compile: { outfile },
  minify: true,
  sourcemap: "none",
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.error(`built ${outfile}`);
