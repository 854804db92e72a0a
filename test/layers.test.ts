// The layers of the source tree hold: SQL and the database connection stay in src/store/, and
// the folders import each other only downwards (a layer from the layers below it, services from
// each other without a cycle), so a second store backend or a new service is a contained change.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative, sep } from "node:path";

const SRC = join(import.meta.dir, "..", "src");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/**
 * The store's factory: the neutral store's files that open a dialect (open.ts, and what the CLI's
 * schema verbs need). It is the one door to a dialect, a layer of its own above the config it reads.
 */
const FACTORY = "store/factory";
const DIALECT_IMPORT = /from\s+["']\.\/(sqlite|pg)\//;

/** A file's folder under src/, or the file itself for the top-level files (and the store's factory). */
function unit(path: string, text = readFileSync(path, "utf8")): string {
  const rel = relative(SRC, path);
  const parts = rel.split(sep);
  if (parts.length === 2 && parts[0] === "store" && DIALECT_IMPORT.test(text)) return FACTORY;
  return rel.includes(sep) ? parts[0] : rel;
}

/** Layers, lowest first: a unit may import its own layer's units and lower ones, never a higher one. */
const LAYERS: string[][] = [
  [
    "clock.ts",
    "errors.ts",
    "lock.ts",
    "time.ts",
    "testhook.ts",
    "bodies.ts",
    "version.ts",
    "log.ts",
    "delivery.ts",
    "pacing.ts",
    "spelling.ts",
    "self.ts",
    "service.ts",
    "plugin",
    "net",
    "providers",
  ],
  ["bobbin"],
  ["store"],
  ["config"],
  [FACTORY],
  ["intake", "dashboard", "destinations", "dispatch", "obs", "processor", "sweep"],
  ["check", "cli", "main.ts"],
];
const rank = (u: string) => LAYERS.findIndex((l) => l.includes(u));

const sources = files(SRC).map((path) => ({ path, text: readFileSync(path, "utf8") }));

/** A line of code that touches a spool's connection (`spool.db`), not the config key of that name. */
function reachesConnection(line: string): boolean {
  if (/^\s*(\/\/|\*|\/\*)/.test(line)) return false;
  const code = line.replace(/"[^"]*"|`[^`]*`|'[^']*'/g, "");
  return /(?<!config\.)\bspool\.db\b/.test(code);
}

function imports(path: string, text: string): string[] {
  return [...text.matchAll(/from\s+["'](\.{1,2}\/[^"']+)["']/g)]
    .map((m) => normalize(join(dirname(path), m[1])))
    .filter((t) => t.startsWith(SRC));
}

describe("the store is sealed", () => {
  test("nothing outside src/store/ imports bun:sqlite or reaches a spool's connection", () => {
    const offences: string[] = [];
    for (const { path, text } of sources) {
      if (unit(path) === "store") continue;
      if (/from\s+["']bun:sqlite["']/.test(text)) offences.push(`${relative(SRC, path)}: imports bun:sqlite`);
      for (const [i, line] of text.split("\n").entries())
        if (reachesConnection(line)) offences.push(`${relative(SRC, path)}:${i + 1}: ${line.trim()}`);
    }
    expect(offences).toEqual([]);
  });

  test("the check itself catches what it should", () => {
    expect(reachesConnection("getMeta(this.o.spool.db, k)")).toBe(true);
    expect(reachesConnection("const db = spool.db;")).toBe(true);
    // The config key spool.db (the database's file name), a string, a comment: not the connection.
    expect(reachesConnection("expandPath(config.spool.db, home, env)")).toBe(false);
    expect(reachesConnection('str("state directory (config.toml, spool.db)")')).toBe(false);
    expect(reachesConnection(" * (or spool.home/spool.db if the TOML parses)")).toBe(false);
  });
});

describe("folders import downwards", () => {
  const edges = new Map<string, Set<string>>();
  for (const { path, text } of sources) {
    const from = unit(path);
    for (const target of imports(path, text)) {
      const to = unit(target);
      if (to === from) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)?.add(to);
    }
  }

  test("every unit has a layer", () => {
    const units = new Set(sources.map((s) => unit(s.path)));
    expect([...units].filter((u) => rank(u) < 0)).toEqual([]);
  });

  test("no import goes up a layer", () => {
    const up: string[] = [];
    for (const [from, tos] of edges) for (const to of tos) if (rank(to) > rank(from)) up.push(`${from} -> ${to}`);
    expect(up).toEqual([]);
  });

  test("no cycle between folders", () => {
    const cycles: string[] = [];
    const visit = (u: string, path: string[]) => {
      for (const next of edges.get(u) ?? []) {
        if (path.includes(next)) cycles.push([...path.slice(path.indexOf(next)), next].join(" -> "));
        else visit(next, [...path, next]);
      }
    };
    for (const u of edges.keys()) visit(u, [u]);
    expect(cycles).toEqual([]);
  });
});

describe("one store, two dialects", () => {
  const DIALECTS = ["sqlite", "pg"].map((d) => join(SRC, "store", d) + sep);
  const dialectOf = (p: string) => DIALECTS.find((d) => p.startsWith(d));

  test("nothing outside the dialects imports one, except the factory", () => {
    const offences: string[] = [];
    for (const { path, text } of sources) {
      if (dialectOf(path) || unit(path, text) === FACTORY) continue;
      for (const to of imports(path, text))
        if (dialectOf(to)) offences.push(`${relative(SRC, path)} -> ${relative(SRC, to)}`);
    }
    expect(offences).toEqual([]);
  });

  test("a dialect imports the neutral store and never the other dialect", () => {
    const offences: string[] = [];
    for (const { path, text } of sources) {
      const mine = dialectOf(path);
      if (!mine) continue;
      for (const to of imports(path, text)) {
        const theirs = dialectOf(to);
        if (theirs && theirs !== mine) offences.push(`${relative(SRC, path)} -> ${relative(SRC, to)}`);
      }
    }
    expect(offences).toEqual([]);
  });

  test("only the factory asks which backend a config names", () => {
    const offences = sources
      .filter(({ path, text }) => unit(path, text) !== FACTORY && /\bisPostgres\b/.test(text))
      .map(({ path }) => relative(SRC, path));
    expect(offences).toEqual([]);
  });

  test("each dialect's files mirror the other's names", () => {
    // What only one dialect has: the source kit's reads on SQLite;
    // PostgreSQL's maintenance lock, its NOTIFY wake-ups, its group commit as a set and the
    // generic plans of its busiest statements.
    const ONLY = {
      sqlite: ["inspect.ts", "wait.ts"],
      pg: ["enqueue-set.ts", "leader.ts", "plans.ts", "wakeups.ts"],
    };
    const names = (d: "sqlite" | "pg") =>
      readdirSync(join(SRC, "store", d))
        .filter((n) => n.endsWith(".ts") && !ONLY[d].includes(n))
        .sort();
    expect(names("sqlite")).toEqual(names("pg"));
  });

  test("the checks catch what they should", () => {
    const fake = join(SRC, "cli", "x.ts");
    expect(imports(fake, 'import { a } from "../store/pg/db.ts";').map((t) => dialectOf(t) !== undefined)).toEqual([
      true,
    ]);
    expect(imports(fake, 'import { a } from "../store/api.ts";').map((t) => dialectOf(t) !== undefined)).toEqual([
      false,
    ]);
  });
});

/** The packages a file imports by name (`a`, `@scope/a`), less node:, bun: and hookspool's own. */
function packagesOf(text: string): string[] {
  return [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"'./][^"']*)["']/g)]
    .map((m) => m[1])
    .filter((name) => !/^(node:|bun(:|$)|hookspool\/)/.test(name))
    .map((name) =>
      name
        .split("/")
        .slice(0, name.startsWith("@") ? 2 : 1)
        .join("/"),
    );
}

describe("what src/ imports", () => {
  const pkg = JSON.parse(readFileSync(join(SRC, "..", "package.json"), "utf8"));
  const dev = new Set(Object.keys(pkg.devDependencies));

  test("no devDependency: the SDKs the tests sign and verify with never reach the binary", () => {
    const offences = sources.flatMap(({ path, text }) =>
      packagesOf(text)
        .filter((name) => dev.has(name))
        .map((name) => `${relative(SRC, path)}: imports ${name}`),
    );
    expect(offences).toEqual([]);
  });

  test("the check catches what it should", () => {
    expect(packagesOf('import { sign } from "@octokit/webhooks-methods";\nimport x from "node:fs";')).toEqual([
      "@octokit/webhooks-methods",
    ]);
    expect(packagesOf('const s = await import("stripe");\nimport { a } from "./b.ts";')).toEqual(["stripe"]);
    expect(packagesOf('import p from "hookspool/plugin";\nimport { $ } from "bun";')).toEqual([]);
  });
});
