// The core-only scan of a bobbin's code: one case per rule, each of which would pass without
// that rule, plus the cases that must stay clean (comments, strings, types, allowed imports).
import { describe, expect, test } from "bun:test";
import { scanModule, scanVendorDir } from "../../src/bobbin/scan.ts";

const scan = (text: string, file = "source.ts", siblings: string[] = ["repo"]) => scanModule(file, text, { siblings });
const messages = (text: string, file?: string) => scan(text, file).map((p) => p.message);
const lines = (text: string) => scan(text).map((p) => p.line);

describe("imports", () => {
  test("node:crypto is refused, pointing at the verify helpers", () => {
    const [problem, ...rest] = scan(`import { createHmac } from "node:crypto";\nexport const h = createHmac;\n`);
    expect(rest).toEqual([]);
    expect(problem).toMatchObject({ file: "source.ts", line: 1, message: 'imports "node:crypto"' });
    expect(problem.hint).toContain("src/plugin/verify.ts");
  });

  test("every blocked module is refused with or without the node: prefix", () => {
    const names = ["crypto", "http", "https", "net", "tls", "dgram", "child_process", "worker_threads"];
    const specs = [...names, ...names.map((n) => `node:${n}`), "bun:sqlite", "bun:ffi"];
    const text = specs.map((s, i) => `import * as m${i} from "${s}";`).join("\n");
    expect(messages(text)).toEqual(specs.map((s) => `imports "${s}"`));
  });

  test("the bobbin's own files are allowed, in its directory and below", () => {
    expect(scan(`import { a } from "./helper.ts";\nimport { b } from "./lib/b.ts";\nexport { a, b };\n`)).toEqual([]);
    expect(scan(`import { a } from "../helper.ts";\nexport { a };\n`, "lib/x.ts")).toEqual([]);
  });

  test("core's plugin API is allowed", () => {
    const text =
      `import { constantTimeEqual } from "../../../src/plugin/verify.ts";\nexport const eq ` + `= constantTimeEqual;\n`;
    expect(scan(text)).toEqual([]);
  });

  test("a type-only import is erased, so it may come from anywhere", () => {
    const text = [
      `import type { Row } from "../../../src/store/batches.ts";`,
      `import { type Toml } from "smol-toml";`,
      `export type { Other } from "../repo/source.ts";`,
      "export const n: Row | Toml | Other | null = null;",
    ].join("\n");
    expect(scan(text)).toEqual([]);
  });

  test("a relative import into another bobbin is refused", () => {
    expect(messages(`import { a } from "../repo/source.ts";\nexport { a };\n`)).toEqual([
      'a bobbin never imports another bobbin (imports "../repo/source.ts")',
    ]);
    expect(messages(`import { a } from "../../github/repo/source.ts";\nexport { a };\n`)).toEqual([
      'a bobbin never imports another bobbin (imports "../../github/repo/source.ts")',
    ]);
  });

  test("a bare import named like a sibling product is another bobbin", () => {
    expect(messages(`import { a } from "repo";\nexport { a };\n`)).toEqual([
      'a bobbin never imports another bobbin (imports "repo")',
    ]);
  });

  test("a relative import that leaves the bobbin for the rest of core is refused", () => {
    expect(messages(`import { openDb } from "../../../src/store/db.ts";\nexport { openDb };\n`)).toEqual([
      'imports "../../../src/store/db.ts", outside the bobbin\'s directory',
    ]);
  });

  test("an npm package is refused", () => {
    expect(messages(`import { parse } from "smol-toml";\nexport { parse };\n`)).toEqual([
      'imports the package "smol-toml": a bobbin imports only core and its own files',
    ]);
  });

  test("the runtime's pure helpers are allowed under node:, and only there", () => {
    expect(
      messages(
        `import { join } from "node:path";\nimport { format } from "node:util";\nexport const p = ` +
          `join("a", format("%s", "b"));\n`,
      ),
    ).toEqual([]);
    expect(messages(`import { join } from "path";\nexport const p = join("a");\n`)).toEqual([
      'imports the package "path": a bobbin imports only core and its own files',
    ]);
  });

  test("node:fs may read, never write", () => {
    expect(
      scan(`import { readFileSync } from "node:fs";\nexport const t = readFileSync("./a.json", "utf8");\n`),
    ).toEqual([]);
    const writes =
      `import * as fs from "node:fs";\nimport { mkdir } from "fs/promises";\n` +
      `fs.writeFileSync("a", "b");\nawait mkdir("d");\n`;
    expect(scan(writes).map((p) => [p.line, p.message])).toEqual([
      [3, "uses `writeFileSync` (node:fs is for reading only)"],
      [4, "uses `mkdir` (node:fs is for reading only)"],
    ]);
  });

  test("a commented-out import is not an import", () => {
    expect(scan(`// import { createHmac } from "node:crypto";\nexport const x = 1;\n`)).toEqual([]);
  });
});

describe("tokens", () => {
  const families: [string, string][] = [
    [`export const r = fetch("https://x");`, "uses `fetch(`"],
    [`export const p = Bun.spawn(["ls"]);`, "uses `Bun.spawn`"],
    [`export const p = Bun.spawnSync(["ls"]);`, "uses `Bun.spawnSync`"],
    [`await Bun.write("a", "b");`, "uses `Bun.write`"],
    [`export const f = Bun.file("a");`, "uses `Bun.file`"],
    [`Bun.serve({ fetch: () => new Response() });`, "uses `Bun.serve`"],
    ["await Bun.sleep(10);", "uses `Bun.sleep`"],
    ["export const k = Bun.env.KEY;", "uses `Bun.env`"],
    ["export const k = process.env.KEY;", "uses `process.env`"],
    ["process.exit(1);", "uses `process.exit`"],
    [`export const v = eval("1");`, "uses `eval(`"],
    [`export const f = new Function("return 1");`, "uses `new Function`"],
    [`export const f = Function("return 1");`, "uses `Function(`"],
    ["setTimeout(() => {}, 1);", "uses `setTimeout`"],
    ["setInterval(() => {}, 1);", "uses `setInterval`"],
    ["setImmediate(() => {});", "uses `setImmediate`"],
    [`console.error("x");`, "uses `console.error`"],
    [`export const m = require("./x.ts");`, "uses `require(`"],
    [`export const m = await import("./x.ts");`, "uses `import(` (a dynamic import)"],
    [`export const r = globalThis.fetch("https://x");`, "uses `globalThis.fetch(`"],
    [`export const r = globalThis["fetch"];`, "uses `globalThis` (reaching globals indirectly)"],
    ["export const { env } = process;", "uses `process` (reaching globals indirectly)"],
  ];
  for (const [text, message] of families) {
    test(text, () => {
      const problems = scan(text);
      expect(problems.map((p) => p.message)).toEqual([message]);
      expect(problems[0].hint).not.toBe("");
    });
  }

  test("the hints name the core API to use instead", () => {
    const hint = (text: string) => scan(text)[0].hint;
    expect(hint(`fetch("x");`)).toContain("ctx.http");
    expect(hint(`console.log("x");`)).toContain("ctx.log");
    expect(hint("setTimeout(() => {}, 1);")).toContain("Retryable");
  });

  test("mentions in comments, strings, templates and regexes are not flagged", () => {
    const text = [
      `// fetch("x"), console.log, process.env`,
      "/* Bun.spawn(); setTimeout(f, 1);",
      "   eval('1') */",
      `export const a = "fetch(Bun.spawn process.exit console.log require(";`,
      "export const b = 'new Function setInterval globalThis';",
      "export const c = `import( ${1 + 1} Bun.env`;",
      "export const d = /console.log|fetch(ed)?/;",
    ].join("\n");
    expect(scan(text)).toEqual([]);
  });

  test("names only in types, members of other objects, and methods of those names are not flagged", () => {
    const text = [
      "let timer: typeof setTimeout | undefined;",
      "export const ctx = { http: { fetch: (u: string) => u } };",
      `ctx.http.fetch("x");`,
      "export const processor = { process: 1, async process(x: number) { return x / 2; } };",
      "export class Client { async fetch(u: string): Promise<string> { return u; } }",
      `export const node = typeof process !== "undefined";`,
      "export { timer };",
    ].join("\n");
    expect(scan(text)).toEqual([]);
  });

  test("a call in a ternary or an array is still a call", () => {
    expect(messages(`export const a = [1, ok() ? fetch("x") : null];\ndeclare function ok(): boolean;`)).toEqual([
      "uses `fetch(`",
    ]);
  });

  test("a regex holding a quote or backtick does not hide the code after it", () => {
    const text = "export const q = /[`\"']/g;\nexport const h = 4 / 2;\nconsole.warn(q, h);";
    expect(messages(text)).toEqual(["uses `console.warn`"]);
  });

  test("a call inside a template expression is still code", () => {
    expect(messages("export const t = `a ${fetch('u')} b`;")).toEqual(["uses `fetch(`"]);
  });
});

describe("lines", () => {
  test("each problem carries its line in the original source, sorted", () => {
    const text = [
      "// A source.", // 1
      `import type { SourcePlugin } from "../../../src/plugin/types.ts";`, // 2
      "", // 3
      "/**", // 4
      " * Multi-line comment with fetch(.", // 5
      " */", // 6
      "interface Extra {", // 7
      "  n: number;", // 8
      "}", // 9
      `import {`, // 10
      `  createHmac,`, // 11
      `} from "node:crypto";`, // 12
      `export const x: Extra = { n: Number(process.env.N) };`, // 13
      "export const s = `", // 14
      "console.log", // 15
      "`;", // 16
      `console.log(x, s, createHmac);`, // 17
      `export const p: SourcePlugin | null = null;`, // 18
    ].join("\n");
    expect(lines(text)).toEqual([10, 13, 17]);
  });

  test("a second import of the same module is reported at its own line", () => {
    const text =
      `import type { A } from "smol-toml";\nimport { parse } from "smol-toml";\nexport ` +
      `const x: A | null = null;\nexport { parse };\n`;
    expect(lines(text)).toEqual([2]);
  });

  test("a file that does not parse is one problem at the failing line", () => {
    const [problem, ...rest] = scan("export const a = 1;\nexport const b = ;\n");
    expect(rest).toEqual([]);
    expect(problem.line).toBe(2);
    expect(problem.message).toStartWith("does not parse");
  });
});

describe("the vendor directory", () => {
  test("holds only product directories", () => {
    const problems = scanVendorDir("acme", [
      { name: "hooks", isDirectory: true },
      { name: "shared.ts", isDirectory: false },
      { name: "README.md", isDirectory: false },
    ]);
    expect(problems.map((p) => p.file)).toEqual(["acme/shared.ts", "acme/README.md"]);
    expect(problems[0].message).toContain("the vendor directory holds no code or files: only <product>/ directories");
  });

  test("is clean with directories only", () => {
    expect(scanVendorDir("acme", [{ name: "hooks", isDirectory: true }])).toEqual([]);
  });
});
