// The passages every bobbin's SETUP.md and AGENTS.md share come from docs/partials/: each marked
// region (`<!-- partial:<name> -->` ... `<!-- /partial:<name> -->`) is exactly what
// scripts/gen-bobbin-docs.ts writes there, so a partial edited without `make docs`, or a copy
// edited by hand, fails here; and each document includes the passages its bobbin must have, or
// says why not. The second half proves the check on copies in a temporary tree: it reads the
// repository and writes only there.
import { describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BOBBINS_DIR,
  bobbinDirs,
  bobbinInfo,
  DOC_FILES,
  expandDoc,
  loadPartials,
  PARTIALS_DIR,
  requiredFor,
  scanDocs,
} from "../scripts/gen-bobbin-docs.ts";
import { tempDir } from "./helpers/tmp.ts";

const partials = loadPartials();
const docs = scanDocs(BOBBINS_DIR, partials);

describe("bobbin docs: the shared passages of docs/partials/", () => {
  test("every bobbin's SETUP.md and AGENTS.md are read, and the partials are there", () => {
    expect(docs.length).toBe(2 * bobbinDirs().length);
    expect(docs.length).toBeGreaterThan(60);
    for (const name of [
      "setup-config",
      "setup-load",
      "setup-proxy",
      "setup-probe",
      "setup-rollback",
      "agent-intro",
      "agent-load",
      "agent-confirm",
    ]) {
      expect(partials.has(name)).toBe(true);
    }
    // template-source.md is docs/config.md's partial, not a bobbin passage.
    expect(partials.has("template-source")).toBe(false);
  });

  test.each(docs.map((d) => [d.where, d] as const))("%s: its marked regions are what make docs writes", (_, d) => {
    expect(d.drifted).toEqual([]);
    // The whole text too: nothing else moves when the generator runs.
    expect(d.expanded.text).toBe(d.old);
  });

  test.each(docs.map((d) => [d.where, d] as const))(
    "%s: well-formed markers, and every passage it must have",
    (_, d) => {
      expect(d.problems).toEqual([]);
    },
  );

  test("each partial is used by some document, and only where it belongs", () => {
    for (const p of partials.values()) {
      const users = docs.filter((d) => d.expanded.used.has(p.name));
      expect({ partial: p.name, used: users.length > 0 }).toEqual({ partial: p.name, used: true });
      for (const d of users) expect(d.where.endsWith(`/${p.for}`)).toBe(true);
    }
  });

  test("a webhook bobbin omits a required passage only with a reason, and a poll bobbin needs fewer", () => {
    for (const d of docs) for (const why of d.expanded.omitted.values()) expect(why.length).toBeGreaterThan(10);
    const poll = bobbinInfo("sec/edgar");
    const webhook = bobbinInfo("stripe/events");
    expect(poll.webhook).toBe(false);
    expect(requiredFor("SETUP.md", poll, partials)).toContain("setup-load");
    expect(requiredFor("SETUP.md", poll, partials)).not.toContain("setup-proxy");
    expect(requiredFor("SETUP.md", webhook, partials)).toContain("setup-proxy");
  });
});

/** A tree with one bobbin's manifest and documents copied, and docs/partials/ beside it. */
function copyTree(dir = "stripe/events"): { bobbins: string; partials: string; setup: string; agents: string } {
  const root = tempDir("hookspool-partials-");
  const bobbins = join(root, "bobbins");
  mkdirSync(join(bobbins, dir), { recursive: true });
  for (const f of ["bobbin.toml", ...DOC_FILES]) cpSync(join(BOBBINS_DIR, dir, f), join(bobbins, dir, f));
  cpSync(PARTIALS_DIR, join(root, "partials"), { recursive: true });
  return {
    bobbins,
    partials: join(root, "partials"),
    setup: join(bobbins, dir, "SETUP.md"),
    agents: join(bobbins, dir, "AGENTS.md"),
  };
}

const edit = (file: string, from: string | RegExp, to: string) => {
  const text = readFileSync(file, "utf8");
  const next = text.replace(from, to);
  if (next === text) throw new Error(`${file}: nothing to replace for ${from}`);
  writeFileSync(file, next);
};

const scan = (t: ReturnType<typeof copyTree>) => scanDocs(t.bobbins, loadPartials(t.partials));

describe("the check fails where it should", () => {
  test("a clean copy passes", () => {
    for (const d of scan(copyTree())) {
      expect(d.problems).toEqual([]);
      expect(d.drifted).toEqual([]);
    }
  });

  test("a hand-edited line inside a marked region is drift, and the generator would put it back", () => {
    const t = copyTree();
    const before = readFileSync(t.setup, "utf8");
    edit(t.setup, "`check` must report no error for", "`check` should report no error for");
    const [setup] = scan(t).filter((d) => d.where.endsWith("SETUP.md"));
    expect(setup.drifted).toHaveLength(1);
    expect(setup.drifted[0]).toMatch(
      /bobbins\/stripe\/events\/SETUP\.md:\d+: the setup-load region is not what docs\/partials\/setup-load\.md gives/,
    );
    expect(setup.expanded.text).toBe(before);
  });

  test("a partial edited without regenerating makes every document that uses it drift", () => {
    const t = copyTree();
    edit(join(t.partials, "agent-confirm.md"), "with a recent `LAST EVENT`", "with a fresh `LAST EVENT`");
    const [agents] = scan(t).filter((d) => d.where.endsWith("AGENTS.md"));
    expect(agents.drifted.map((m) => m.replace(/:\d+:/, ":N:"))).toEqual([
      "bobbins/stripe/events/AGENTS.md:N: the agent-confirm region is not what " +
        "docs/partials/agent-confirm.md gives: edit the partial or the text outside the markers, then " +
        "run make docs",
    ]);
    expect(agents.expanded.text).toContain("with a fresh `LAST EVENT`");
  });

  test("a value changed on the marker (or the document's partials line) changes what the region must be", () => {
    const t = copyTree();
    edit(t.setup, "<!-- partial:setup-probe -->", "<!-- partial:setup-probe host=hooks.example.net -->");
    const [setup] = scan(t).filter((d) => d.where.endsWith("SETUP.md"));
    expect(setup.drifted).toHaveLength(1);
    expect(setup.expanded.text).toContain("curl -si https://hooks.example.net/stripe");
  });

  test("the bobbin's own text outside the markers is free", () => {
    const t = copyTree();
    edit(t.setup, "Stripe sends no query string.", "Stripe never sends a query string.");
    for (const d of scan(t)) expect([...d.problems, ...d.drifted]).toEqual([]);
  });

  test("a required passage that is missing, or omitted without a marker, is named", () => {
    const t = copyTree();
    edit(t.agents, /<!-- partial:agent-confirm -->\n[\s\S]*?<!-- \/partial:agent-confirm -->\n/, "");
    const [agents] = scan(t).filter((d) => d.where.endsWith("AGENTS.md"));
    expect(agents.problems).toEqual([
      expect.stringContaining("bobbins/stripe/events/AGENTS.md: does not include agent-confirm"),
    ]);
    // Saying why is enough.
    edit(
      t.agents,
      "## Rolling back",
      "<!-- partial:agent-confirm omitted: a test of the omission -->\n## Rolling back",
    );
    const [again] = scan(t).filter((d) => d.where.endsWith("AGENTS.md"));
    expect(again.problems).toEqual([]);
  });

  test("malformed markers: unknown, unclosed, for the other document, both included and omitted", () => {
    const b = bobbinInfo("stripe/events");
    const run = (text: string, file: (typeof DOC_FILES)[number] = "SETUP.md") =>
      expandDoc(text, file, b, partials, "doc.md").problems;
    expect(run("<!-- partial:setup-nothing -->\n<!-- /partial:setup-nothing -->")).toEqual([
      "doc.md:1: no partial named setup-nothing in docs/partials/",
    ]);
    expect(run("<!-- partial:setup-load -->\ntext")).toEqual([
      "doc.md:1: <!-- partial:setup-load --> has no <!-- /partial:setup-load --> before the next marker",
    ]);
    expect(run("text\n<!-- /partial:setup-load -->")).toEqual(["doc.md:2: a closing marker with no opening one"]);
    expect(run("<!-- partial:agent-confirm -->\n<!-- /partial:agent-confirm -->")).toEqual([
      "doc.md:1: agent-confirm is a passage for AGENTS.md, not SETUP.md",
    ]);
    expect(
      run("<!-- partial:setup-load -->\n<!-- /partial:setup-load -->\n<!-- partial:setup-load omitted: no -->"),
    ).toEqual(["doc.md: setup-load is both included and omitted (no)"]);
    expect(run("<!-- partial:setup-secret-paste omitted: not required -->")).toEqual([
      "doc.md:1: setup-secret-paste is not required, so there is nothing to omit",
    ]);
    expect(run("<!-- partial: setup-load -->")).toEqual([
      "doc.md:1: not a marker this generator reads: <!-- partial: setup-load -->",
    ]);
    expect(run("<!-- partial:setup-probe instace=x -->\n<!-- /partial:setup-probe -->")).toEqual([
      expect.stringContaining("doc.md:1: instace is not a value a partial takes"),
    ]);
  });

  test("a passage inside a list item takes the marker's indentation, and a numbered one its step", () => {
    const b = bobbinInfo("stripe/events");
    const text = [
      "1. **Add the instance.**",
      "   <!-- partial:agent-load -->",
      "   <!-- /partial:agent-load -->",
      "",
      "<!-- partial:agent-confirm -->",
      "<!-- /partial:agent-confirm -->",
      "   Report to the human: done.",
    ].join("\n");
    const out = expandDoc(text, "AGENTS.md", b, partials, "doc.md");
    expect(out.problems).toEqual([]);
    const lines = out.text.split("\n");
    expect(lines).toContain("   sudo -u hookspool hookspool check && sudo -u hookspool hookspool reload");
    expect(lines).toContain("2. **Confirm.**");
    // The confirm step closes inside its item, so the report stays in step 2.
    expect(lines[lines.length - 2]).toBe("   <!-- /partial:agent-confirm -->");
  });
});
