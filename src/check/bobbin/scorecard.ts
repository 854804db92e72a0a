// `hookspool bobbin check`: every row of a bobbin's scorecard in order, and the scorecard as
// text, Markdown or JSON. A bobbin passes when every required row passes or does not apply;
// --strict counts the advisory rows (provider-links, scope) too.
import { parseManifest } from "../../bobbin/manifest.ts";
import { findBobbins } from "../../bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../config/schema.ts";
import { type Problem, type Row, row, skipped } from "./row.ts";
import { processorRow } from "./processor-row.ts";
import { capturesRow } from "./captures-row.ts";
import { loadCaptures } from "./kit-files.ts";
import { sourceKitRow } from "./source-kit-row.ts";
import { coreOnlyRow, docsRow, filesRow, manifestRow, nameRow, providerRow, todosRow } from "./static-rows.ts";
import type { CheckSubject } from "./subject.ts";
import { testFileOf, testsRow } from "./tests-row.ts";

export interface Scorecard {
  bobbin: string;
  dir: string;
  passed: boolean;
  rows: Row[];
}

export interface CheckOptions {
  strict?: boolean;
  /** Fetch each provider page (the provider-links row). */
  online?: boolean;
  /** Files changed since this git ref, for the scope row. */
  changed?: readonly string[];
  presets?: readonly string[];
  /** Run the bobbin's own tests (default true). */
  runTests?: boolean;
  /** Where a request to a provider page goes (tests). */
  fetchPage?: (url: string) => Promise<number>;
}

async function providerLinksRow(urls: [string, string][], o: CheckOptions): Promise<Row> {
  if (!o.online) return skipped("provider-links", "run with --online to fetch each provider page", true);
  const fetchPage =
    o.fetchPage ??
    (async (url: string) => {
      const head = await fetch(url, { method: "HEAD", redirect: "follow", signal: AbortSignal.timeout(10_000) }).catch(
        () => null,
      );
      if (head && head.status < 400) return head.status;
      const get = await fetch(url, { redirect: "follow", signal: AbortSignal.timeout(10_000) });
      return get.status;
    });
  const out: Problem[] = [];
  for (const [k, url] of urls) {
    const status = await fetchPage(url).catch((e: Error) => e.name);
    if (typeof status !== "number" || status >= 400)
      out.push({
        file: "bobbin.toml",
        message: `provider.${k} answered ${status}`,
        fix: "point it at a page that exists",
      });
  }
  return row("provider-links", out, undefined, true);
}

function scopeRow(s: CheckSubject, o: CheckOptions): Row {
  if (!o.changed) return skipped("scope", "run with --base <ref> to see what else the change touches", true);
  const mine = (f: string) => f.startsWith(`bobbins/${s.relDir}/`) || f === testFileOf(s.relDir);
  const outside = o.changed.filter((f) => !mine(f));
  return row(
    "scope",
    outside.map((f) => ({
      file: f,
      message: "touches-core: the change reaches outside the bobbin",
      fix: "a bobbin-only change touches its directory and its own test file; review the rest as a core change",
    })),
    outside.length ? undefined : "bobbin-only",
    true,
  );
}

export async function checkBobbin(s: CheckSubject, o: CheckOptions = {}): Promise<Scorecard> {
  const presets = o.presets ?? Object.keys(DEFAULT_SPANS);
  const text = s.files.get("bobbin.toml");
  const { manifest, problems } =
    text === undefined
      ? { manifest: null, problems: [] }
      : parseManifest(text, { dir: s.relDir, builtin: s.shipped, presets });
  const builtinNames = new Set(findBobbins({ bobbinPath: [], presets }).bobbins.keys());
  const loaded = loadCaptures(s);
  const hasCode = [...s.files.keys()].some((f) => f.endsWith(".ts") && !f.startsWith("tests/"));
  const urls = Object.entries(manifest?.provider ?? {}).filter(([k, v]) =>
    k.endsWith("_docs") || k === "homepage" ? typeof v === "string" : false,
  ) as [string, string][];
  const rows: Row[] = [
    nameRow(s, problems, manifest, builtinNames),
    manifestRow(s, problems),
    providerRow(s, problems, manifest),
    filesRow(s, manifest),
    todosRow(s),
    coreOnlyRow(s),
    docsRow(s, manifest),
    await capturesRow(s, manifest, loaded),
    await sourceKitRow(s, manifest, loaded),
    await processorRow(s, manifest, loaded),
    await testsRow(s, hasCode, o.runTests !== false),
    await providerLinksRow(urls, o),
    scopeRow(s, o),
  ];
  if (text === undefined)
    rows[1] = row("manifest", [{ file: "bobbin.toml", message: "missing", fix: "every bobbin has a bobbin.toml" }]);
  const passed = rows.every((r) => r.outcome !== "fail" || (r.advisory && !o.strict));
  return { bobbin: manifest?.name ?? s.relDir.replace("/", "."), dir: s.dir, passed, rows };
}

const where = (p: Problem) => `${p.file}${p.line ? `:${p.line}` : ""}`;

export function scorecardText(c: Scorecard, esc: (s: string) => string): string {
  const out = [esc(`${c.bobbin} (${c.dir}): ${c.passed ? "passes" : "does not pass"}`)];
  for (const r of c.rows) {
    out.push(
      esc(
        `  ${r.outcome.toUpperCase().padEnd(5)} ` +
          `${r.name}${r.advisory ? " (advisory)" : ""}${r.note ? `: ${r.note}` : ""}`,
      ),
    );
    for (const p of r.problems) out.push(esc(`        ${where(p)}: ${p.message}`), esc(`          fix: ${p.fix}`));
  }
  return out.join("\n");
}

export function scorecardMarkdown(c: Scorecard): string {
  const cell = (s: string) =>
    s
      .replaceAll("|", "\\|")
      .replaceAll("\n", " ")
      .replace(/[<>&]/g, (x) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;" })[x] ?? x);
  const out = [
    `### \`${c.bobbin}\`: ${c.passed ? "passes" : "does not pass"}`,
    "",
    "| check | result | notes |",
    "| --- | --- | --- |",
  ];
  for (const r of c.rows) {
    const n = r.problems.length;
    const note = r.note ?? (n ? `${n} problem${n > 1 ? "s" : ""}` : "");
    out.push(`| ${r.name}${r.advisory ? " (advisory)" : ""} | ${r.outcome} | ${cell(note)} |`);
  }
  const problems = c.rows.flatMap((r) =>
    r.problems.map((p) => `- **${r.name}** \`${cell(where(p))}\`: ${cell(p.message)}. Fix: ${cell(p.fix)}`),
  );
  if (problems.length) out.push("", ...problems);
  return out.join("\n");
}
