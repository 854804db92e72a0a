// Writes docs/config.md from the schema table, the template source's tables and the hand-written
// docs/partials/template-source.md. A test checks it is current.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderConfigReference } from "../src/config/starter.ts";

const docs = join(import.meta.dir, "..", "docs");
const out = join(docs, "config.md");
await Bun.write(out, renderConfigReference(readFileSync(join(docs, "partials", "template-source.md"), "utf8")));
console.error(`wrote ${out}`);
