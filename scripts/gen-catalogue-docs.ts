// Writes the catalogue table of docs/bobbins/README.md (what `hookspool bobbin list --markdown`
// prints) from the built-in bobbins. A test checks it is current.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { catalogueMarkdown } from "../src/bobbin/catalogue.ts";
import { findBobbins } from "../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../src/config/schema.ts";

const file = join(import.meta.dir, "..", "docs", "bobbins", "README.md");
const MARK = "This table is the output of `hookspool bobbin list --markdown`.";
const text = readFileSync(file, "utf8");
const at = text.indexOf(MARK);
if (at < 0) throw new Error(`${file}: the line "${MARK}" is missing`);
// The table runs from the line after the mark to the first blank line after it.
const start = text.indexOf("\n\n", at) + 2;
const end = text.indexOf("\n\n", start);
const bobbins = [...findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.values()].sort(
  (a, b) => (a.name < b.name ? -1 : 1),
);
writeFileSync(file, `${text.slice(0, start)}${catalogueMarkdown(bobbins)}${end < 0 ? "\n" : text.slice(end)}`);
console.error(`wrote ${file}`);
