// The reference in docs/config.md and the starter config.toml of `hookspool init` come from the
// loader's own table, so they cannot drift; these tests keep all three in step.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { resolveCopies } from "../../src/config/routes.ts";
import { renderConfigReference, renderStarterConfig } from "../../src/config/starter.ts";
import { clean, parse } from "./support.ts";

const DOCS = join(import.meta.dir, "..", "..", "docs", "config.md");
// The hand-written part of the template source section, which the generator reads.
const PARTIAL = readFileSync(join(import.meta.dir, "..", "..", "docs", "partials", "template-source.md"), "utf8");
const STARTER = {
  home: "/srv/hookspool",
  secretFile: "/srv/hookspool/secrets/demo",
  scriptFile: "/srv/hookspool/scripts/append-batch.sh",
};

/** The starter with every commented default switched on (`# key = value` and `# [section]`). */
function uncommentDefaults(text: string): string {
  return text
    .split("\n")
    .map((line) => (/^# ([a-z_]+ = |\[[a-z_]+\]$)/.test(line) ? line.slice(2) : line))
    .join("\n");
}

describe("docs/config.md", () => {
  test("is exactly what renderConfigReference() produces (regenerate: bun scripts/gen-config-docs.ts)", () => {
    expect(readFileSync(DOCS, "utf8")).toBe(renderConfigReference(PARTIAL));
  });

  test("documents the defaults and the span presets", () => {
    const ref = renderConfigReference(PARTIAL);
    for (const row of [
      "| `parallel` | integer >= 1 | `4` |",
      "| `max_attempts` | integer >= 1 | `64` |",
      "| `breaker.trip_after` | integer >= 1 | `3` |",
      "| `max_bytes` | integer >= 1 | `786432` |",
      "| `min_free_bytes` | integer >= 0 | `536870912` |",
      '| `listen` | string | `"127.0.0.1:8650"` |',
      '| `home` | string | `"/var/lib/hookspool"` |',
      "| `burst` | 120 | 600 |",
      "| `meeting` | 60 | 900 |",
    ]) {
      expect(ref).toContain(row);
    }
    expect(ref).toContain("`HOOKSPOOL_HOME` overrides");
    expect(ref).toContain("`HOOKSPOOL_DB` overrides");
  });

  test("fills in the template partial's generated tables, and refuses a partial that lacks one", () => {
    const ref = renderConfigReference(PARTIAL);
    expect(ref).not.toContain("<!-- generated:");
    expect(ref).toContain("| `timestamped` |");
    expect(ref).toContain("| `sender_retries` | boolean |");
    expect(() => renderConfigReference(PARTIAL.replace("<!-- generated: schemes -->", ""))).toThrow(
      "<!-- generated: schemes --> is missing",
    );
    expect(() => renderConfigReference(`${PARTIAL}\n<!-- generated: nope -->\n`)).toThrow(
      "no generated table named nope",
    );
  });

  test("has a heading for every section and named table", () => {
    const headings = renderConfigReference(PARTIAL)
      .split("\n")
      .filter((l) => l.startsWith("## "));
    expect(headings).toEqual([
      "## [spool]",
      "## [intake]",
      "## [dispatch]",
      "## [coalesce]",
      "## [limits]",
      "## [retention]",
      "## [alerts]",
      "## [hermes]",
      "## [dashboard]",
      "## [spans.<name>]",
      "## [sources.<name>]",
      "## The template source",
      "## [[routes]]",
      "## [destinations.<name>]",
      "## [bobbins.<name>]",
    ]);
  });
});

describe("the starter config.toml", () => {
  test("parses with no problems at all, not even warnings, also under strict", () => {
    const text = renderStarterConfig(STARTER);
    expect(parse(text).problems).toEqual([]);
    expect(parse(text, true).problems).toEqual([]);
  });

  test("sets home and leaves every other section at its defaults", () => {
    const config = clean(renderStarterConfig(STARTER));
    const defaults = clean("");
    expect(config.spool).toEqual({ ...defaults.spool, home: "/srv/hookspool" });
    for (const section of [
      "intake",
      "dispatch",
      "coalesce",
      "limits",
      "retention",
      "alerts",
      "hermes",
      "spans",
    ] as const) {
      expect(config[section]).toEqual(defaults[section] as never);
    }
  });

  test("its commented defaults, switched on, are the real defaults and every key is known", () => {
    const text = uncommentDefaults(renderStarterConfig(STARTER));
    expect(text).toContain("\n[dispatch]\nparallel = 4");
    expect(text).toContain("\nbreaker = { trip_after = 3, cooldown_initial_s = 30, cooldown_max_s = 600 }");
    expect(clean(text)).toEqual(clean(renderStarterConfig(STARTER)));
  });

  test("names the env override of home and db beside their keys", () => {
    const text = renderStarterConfig(STARTER);
    expect(text).toMatch(/^# db = "spool\.db" .*HOOKSPOOL_DB overrides$/m);
  });

  test("its demo source routes to the demo script with a 5 s quiet window, 30 s at most", () => {
    const config = clean(renderStarterConfig(STARTER));
    expect(config.sources.demo.secrets).toEqual({ secret: { file: STARTER.secretFile } });
    // The script runs from the home: cwd is the config's own directory, whatever the home's path.
    expect(config.destinations["script:demo-log"]).toMatchObject({ argv: [STARTER.scriptFile], cwd: "." });
    expect(resolveCopies(config, "demo", { topic: "t" })).toEqual([
      {
        route: "demo",
        destination: "script:demo-log",
        tee: false,
        window: { quiet_s: 5, max_s: 30, max_events: 500, max_bytes: 786432 },
        trace: {
          stage: "implicit",
          route: "demo",
          rule_index: null,
          matched: {},
          destination: "script:demo-log",
          window: { quiet_s: 5, max_s: 30, from: "source" },
        },
      },
    ]);
  });

  test("paths with quotes, backslashes and spaces survive as TOML strings", () => {
    const odd = { home: '/srv/my "hook" spool', secretFile: "/srv/a\\b/secret", scriptFile: "/srv/x y/run.sh" };
    const config = clean(renderStarterConfig(odd));
    expect(config.spool.home).toBe(odd.home);
    expect(config.sources.demo.secrets?.secret).toEqual({ file: odd.secretFile });
    expect(config.destinations["script:demo-log"].argv).toEqual([odd.scriptFile]);
  });
});
