// Comments to 120 columns, the part of `make fmt` Biome does not do: Biome wraps code but leaves a
// comment as written. Every comment comes from TypeScript's own parser, so text inside a string,
// a template literal or a regular expression is never taken for one and never touched.
//
//   bun scripts/wrap-comments.ts --write PATH...   rewrap in place
//   bun scripts/wrap-comments.ts --check PATH...   name each comment it would rewrap; exit 1 if any
//   bun scripts/wrap-comments.ts --report PATH...  every line still over 120, by what it is
//
// Only a paragraph with a line over the width is rewrapped, greedily, to the width: a run of `//`
// lines or a `/** */` block keeps its indentation and its other paragraphs as they are. A blank
// comment line ends a paragraph; a list item (`- `, `* `, `1. `) starts one and its continuation
// lines hang under its text; indented lines, ``` fences, table rows (`|`) and directives
// (biome-ignore, @ts-expect-error, ...) are kept as they are. A word longer than the line (a URL)
// stays whole on a line of its own. A one-line `/** text */` that is too long becomes a block, and
// a `//` comment after code on a line that is too long moves to its own lines above that code.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

export const WIDTH = 120;

/** Length as an editor counts columns: code points, not UTF-16 units. */
const cols = (s: string) => [...s].length;

interface Comment {
  pos: number;
  end: number;
  kind: ts.CommentKind;
}

/** Every comment of a TypeScript source, in order: the trivia before and after each token. */
export function comments(sf: ts.SourceFile): Comment[] {
  const text = sf.text;
  const seen = new Map<number, Comment>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) if (!seen.has(r.pos)) seen.set(r.pos, { pos: r.pos, end: r.end, kind: r.kind });
  };
  const visit = (node: ts.Node) => {
    for (const child of node.getChildren(sf)) {
      if (child.kind >= ts.SyntaxKind.FirstJSDocNode && child.kind <= ts.SyntaxKind.LastJSDocNode) continue;
      if (child.getChildCount(sf) === 0) {
        add(ts.getTrailingCommentRanges(text, child.pos));
        add(ts.getLeadingCommentRanges(text, child.pos));
      } else visit(child);
    }
  };
  add(ts.getLeadingCommentRanges(text, 0));
  visit(sf);
  return [...seen.values()].sort((a, b) => a.pos - b.pos);
}

const DIRECTIVE =
  /^\s*(biome-ignore|@ts-|eslint-|prettier-ignore|istanbul |c8 |#region|#endregion|<reference|TODO\(|@vitest)/;
const ITEM = /^([-*+]|\d+[.)]) +/;

type Piece = { kind: "text"; lines: string[]; hang: string; first: string } | { kind: "keep"; line: string };

/** A comment's text lines (without their `//` or ` * `) as paragraphs and lines kept as they are. */
function pieces(lines: string[]): Piece[] {
  const out: Piece[] = [];
  let para: Extract<Piece, { kind: "text" }> | null = null;
  let fenced = false;
  for (const line of lines) {
    const fence = /^\s*```/.test(line);
    if (fenced || fence || line.trim() === "" || DIRECTIVE.test(line) || /^\s*\|/.test(line)) {
      if (fence) fenced = !fenced;
      para = null;
      out.push({ kind: "keep", line });
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      para = { kind: "text", lines: [line.slice(item[0].length)], hang: " ".repeat(item[0].length), first: item[0] };
      out.push(para);
      continue;
    }
    const lead = /^ */.exec(line)?.[0].length ?? 0;
    if (para && para.hang.length > 0 && lead === para.hang.length) {
      para.lines.push(line.slice(lead));
      continue;
    }
    if (lead > 0) {
      // Indented more than the text around it and not under a list item: code or a layout.
      para = null;
      out.push({ kind: "keep", line });
      continue;
    }
    if (para && para.hang.length === 0) para.lines.push(line);
    else {
      para = { kind: "text", lines: [line], hang: "", first: "" };
      out.push(para);
    }
  }
  return out;
}

/** Greedy fill of words to `width` columns after `prefix` (then `hangPrefix`); a long word stays whole. */
function fill(words: string[], prefix: string, hangPrefix: string, width: number): string[] {
  const out: string[] = [];
  let line = prefix;
  let empty = true;
  for (let i = 0; i < words.length; i++) {
    // A word that starts with @ never starts a line: a JSDoc reader would take it for a tag.
    let w = words[i];
    while (i + 1 < words.length && words[i + 1].startsWith("@")) w += ` ${words[++i]}`;
    if (empty) {
      line += w;
      empty = false;
    } else if (cols(line) + 1 + cols(w) <= width) line += ` ${w}`;
    else {
      out.push(line);
      line = hangPrefix + w;
    }
  }
  out.push(line);
  return out;
}

/**
 * The lines of a comment's text after its paragraphs that hold a line over the width were
 * refilled; `lead` is what stands before the text on a line (`  // `, `   * `), `over` says
 * whether a text line, with its lead, is over the width.
 */
function rewrap(lines: string[], lead: string, width: number): string[] {
  const out: string[] = [];
  for (const p of pieces(lines)) {
    if (p.kind === "keep") {
      out.push(p.line);
      continue;
    }
    const original = p.lines.map((l, i) => (i === 0 ? p.first : p.hang) + l);
    if (!original.some((l) => cols(lead + l) > width)) {
      out.push(...original);
      continue;
    }
    const words = p.lines.join(" ").split(/\s+/).filter(Boolean);
    out.push(...fill(words, lead + p.first, lead + p.hang, width).map((l) => l.slice(lead.length)));
  }
  return out;
}

interface Edit {
  start: number;
  end: number;
  text: string;
  line: number;
}

/** The edits that bring a source's comments within `width` columns. */
export function commentEdits(path: string, text: string, width = WIDTH): Edit[] {
  if (!text.split("\n").some((l) => cols(l) > width)) return [];
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const lineStart = (pos: number) => text.lastIndexOf("\n", pos - 1) + 1;
  const lineEnd = (pos: number) => {
    const e = text.indexOf("\n", pos);
    return e < 0 ? text.length : e;
  };
  const lineOf = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line + 1;
  const edits: Edit[] = [];
  const all = comments(sf);
  for (let i = 0; i < all.length; i++) {
    const c = all[i];
    const start = lineStart(c.pos);
    const before = text.slice(start, c.pos);
    const ownLine = /^[ \t]*$/.test(before);
    if (c.kind === ts.SyntaxKind.SingleLineCommentTrivia) {
      if (!ownLine) {
        // After code: when the line is too long, the comment moves above the line, at its indentation.
        const end = lineEnd(c.pos);
        if (cols(text.slice(start, end)) <= width || text.slice(c.end, end).trim() !== "") continue;
        const indent = /^[ \t]*/.exec(before)?.[0] ?? "";
        const body = text.slice(c.pos + 2, c.end).replace(/^ /, "");
        if (DIRECTIVE.test(body)) continue;
        const moved = rewrap([body], `${indent}// `, width).map((l) => `${indent}// ${l}`.trimEnd());
        edits.push({ start: c.pos, end: c.end, text: "", line: lineOf(c.pos) });
        edits.push({ start, end: start, text: `${moved.join("\n")}\n`, line: lineOf(c.pos) });
        // The code keeps no space before the comment it lost.
        const code = before.replace(/[ \t]+$/, "");
        edits[edits.length - 2].start = start + code.length;
        continue;
      }
      // A run: the `//` lines that follow on the next lines at the same indentation.
      const indent = before;
      let j = i;
      while (j + 1 < all.length) {
        const n = all[j + 1];
        if (n.kind !== ts.SyntaxKind.SingleLineCommentTrivia) break;
        const between = text.slice(all[j].end, n.pos);
        if (between !== `\n${indent}`) break;
        j++;
      }
      const run = all.slice(i, j + 1);
      i = j;
      const bodies = run.map((r) => text.slice(r.pos + 2, r.end));
      // `///` and `//!` lines, and runs whose text does not start after one space, are left as written.
      if (bodies.some((b) => /^[/!]/.test(b))) continue;
      if (!run.some((r) => cols(text.slice(start, r.end)) > width)) continue;
      const lines = bodies.map((b) => b.replace(/^ /, ""));
      const lead = `${indent}// `;
      const next = rewrap(lines, lead, width).map((l) => (l === "" ? `${indent}//` : `${lead}${l}`));
      const replacement = next.join("\n").slice(indent.length);
      const from = run[0].pos;
      const to = run[run.length - 1].end;
      if (replacement !== text.slice(from, to))
        edits.push({ start: from, end: to, text: replacement, line: lineOf(from) });
      continue;
    }
    // A block comment: rewrapped only when it stands on its own lines and reads as `/** */` prose.
    const raw = text.slice(c.pos, c.end);
    const endLine = lineEnd(c.end);
    const after = text.slice(c.end, endLine);
    const physical = text.slice(start, endLine).split("\n");
    if (!physical.some((l) => cols(l) > width)) continue;
    if (!ownLine || after.trim() !== "") continue;
    const indent = before;
    const doc = raw.startsWith("/**");
    const inner = raw.slice(doc ? 3 : 2, -2);
    const innerLines = inner.split("\n");
    if (innerLines.length > 1 && !innerLines.slice(1).every((l) => /^[ \t]*\*/.test(l) || l.trim() === "")) continue;
    const lines = innerLines
      .map((l, k) => (k === 0 ? l : l.replace(/^[ \t]*\* ?/, "")))
      .map((l, k) => (k === 0 ? l.replace(/^ /, "") : l))
      .map((l) => l.replace(/[ \t]+$/, ""));
    while (lines.length && lines[0].trim() === "") lines.shift();
    while (lines.length && lines[lines.length - 1].trim() === "") lines.pop();
    if (lines.length === 0) continue;
    const lead = `${indent} * `;
    const body = rewrap(lines, lead, width);
    const open = doc ? "/**" : "/*";
    const oneLine = `${indent}${open} ${body.join(" ")} */`;
    const block =
      body.length === 1 && cols(oneLine) <= width
        ? oneLine.slice(indent.length)
        : [open, ...body.map((l) => (l === "" ? `${indent} *` : `${lead}${l}`)), `${indent} */`].join("\n");
    if (block !== raw) edits.push({ start: c.pos, end: c.end, text: block, line: lineOf(c.pos) });
  }
  return edits;
}

export function applyEdits(text: string, edits: Edit[]): string {
  let out = text;
  for (const e of [...edits].sort((a, b) => b.start - a.start || b.end - a.end))
    out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return out;
}

const LITERALS = new Set([
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateExpression,
  ts.SyntaxKind.RegularExpressionLiteral,
]);

/** What each line over the width is, found at its first column past the width. */
export function longLines(path: string, text: string, width = WIDTH): { line: number; kind: string }[] {
  if (!text.split("\n").some((l) => cols(l) > width)) return [];
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const ranges = comments(sf);
  const out: { line: number; kind: string }[] = [];
  const lines = text.split("\n");
  let offset = 0;
  for (let n = 0; n < lines.length; n++) {
    const l = lines[n];
    if (cols(l) > width) {
      const at = offset + [...l].slice(0, width).join("").length;
      const inComment = ranges.find((r) => r.pos <= at && at < r.end);
      let kind: string;
      if (inComment) {
        const body = text.slice(inComment.pos, inComment.end);
        if (/https?:\/\/\S{40,}/.test(l)) kind = "comment: a URL";
        else if (DIRECTIVE.test(body.replace(/^\/[/*]+/, ""))) kind = "comment: a directive";
        else kind = "comment: kept as written (code, a table or a long word)";
      } else {
        // The literal the column falls in (a template's ${} included), else one on the line too long to fit.
        const lineStart = offset;
        const lineEnd = offset + l.length;
        let node: ts.Node = sf;
        let literal: ts.Node | null = null;
        for (;;) {
          const child = node.getChildren(sf).find((c) => c.getStart(sf) <= at && at < c.getEnd());
          if (!child) break;
          node = child;
          if (!literal && LITERALS.has(child.kind)) literal = child;
        }
        if (!literal) {
          const onLine = (x: ts.Node): ts.Node | null => {
            if (x.getEnd() <= lineStart || x.getStart(sf) >= lineEnd) return null;
            const inside = Math.min(x.getEnd(), lineEnd) - Math.max(x.getStart(sf), lineStart);
            if (LITERALS.has(x.kind) && cols(l) - inside <= width) return x;
            for (const c of x.getChildren(sf)) {
              const found = onLine(c);
              if (found) return found;
            }
            return null;
          };
          literal = onLine(sf);
        }
        const url = /https?:\/\/\S{40,}/.test(l) ? " (a URL)" : "";
        if (!literal) kind = `code (${ts.SyntaxKind[node.kind]})`;
        else if (literal.kind === ts.SyntaxKind.StringLiteral) kind = `string literal${url}`;
        else if (literal.kind === ts.SyntaxKind.RegularExpressionLiteral) kind = "regular expression";
        else kind = `template literal${url}`;
      }
      out.push({ line: n + 1, kind });
    }
    offset += l.length + 1;
  }
  return out;
}

function tsFiles(paths: string[]): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const st = statSync(p);
    if (st.isDirectory()) {
      for (const e of readdirSync(p).sort()) if (e !== "node_modules" && !e.startsWith(".")) walk(join(p, e));
    } else if (p.endsWith(".ts") && !p.endsWith(".gen.ts")) out.push(p);
  };
  for (const p of paths) walk(p);
  return out;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const mode = args.find((a) => a.startsWith("--")) ?? "--check";
  const paths = args.filter((a) => !a.startsWith("--"));
  if (!["--write", "--check", "--report"].includes(mode) || paths.length === 0) {
    console.error("usage: bun scripts/wrap-comments.ts --write|--check|--report PATH...");
    process.exit(2);
  }
  let changed = 0;
  const kinds = new Map<string, number>();
  for (const f of tsFiles(paths)) {
    const text = readFileSync(f, "utf8");
    if (mode === "--report") {
      for (const l of longLines(f, text)) {
        kinds.set(l.kind, (kinds.get(l.kind) ?? 0) + 1);
        console.log(`${f}:${l.line}: ${l.kind}`);
      }
      continue;
    }
    const edits = commentEdits(f, text);
    if (edits.length === 0) continue;
    changed += edits.length;
    if (mode === "--write") writeFileSync(f, applyEdits(text, edits));
    else for (const e of edits) console.log(`${f}:${e.line}: a comment over ${WIDTH} columns (make fmt rewraps it)`);
  }
  if (mode === "--report") {
    const total = [...kinds.values()].reduce((a, b) => a + b, 0);
    console.log(`${total} lines over ${WIDTH} columns${total ? ":" : ""}`);
    for (const [k, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`  ${n} ${k}`);
  } else if (mode === "--check" && changed > 0) process.exit(1);
}
