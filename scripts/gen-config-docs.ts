// Writes docs/config.md from the schema table (STYLE.md rule 11). A test checks it is current.
import { join } from "node:path";
import { renderConfigReference } from "../src/config/starter.ts";

const out = join(import.meta.dir, "..", "docs", "config.md");
await Bun.write(out, renderConfigReference());
console.error(`wrote ${out}`);
