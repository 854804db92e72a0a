// hookspool bobbin check: every built-in passes, and each row fails on the defect it exists for,
// naming the file and line and how to fix it. The subject of most cases is a private copy of
// kaneo.projects renamed acme.widgets, broken one way at a time.
import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUILTINS } from "../../src/bobbin/builtins.gen.ts";
import type { Row } from "../../src/check/bobbin/row.ts";
import { checkBobbin } from "../../src/check/bobbin/scorecard.ts";
import { subjectFromDir } from "../../src/check/bobbin/subject.ts";
import { writeTallyBobbin } from "../helpers/bobbins.ts";
import { cli } from "../helpers/cli.ts";
import { builtBinary } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");

/** A private bobbin acme.widgets under a fresh root: kaneo.projects under another name. */
function widgets(): { root: string; dir: string } {
  const root = tempDir("hookspool-bobbins-");
  const dir = join(root, "acme", "widgets");
  mkdirSync(join(root, "acme"), { mode: 0o755 });
  cpSync(join(ROOT, "bobbins", "kaneo", "projects"), dir, { recursive: true });
  for (const f of ["bobbin.toml", "README.md", "SETUP.md", "AGENTS.md"])
    edit(dir, f, (t) => t.replaceAll("kaneo.projects", "acme.widgets"));
  return { root, dir };
}

function edit(dir: string, file: string, fn: (text: string) => string): void {
  const p = join(dir, file);
  writeFileSync(p, fn(readFileSync(p, "utf8")));
}

async function rows(dir: string): Promise<Map<string, Row>> {
  const card = await checkBobbin(subjectFromDir(dir));
  return new Map(card.rows.map((r) => [r.name, r]));
}

const failing = (rs: Map<string, Row>) => [...rs.values()].filter((r) => r.outcome === "fail").map((r) => r.name);

/** A poll bobbin has no source: its source-kit row does not apply, its processor row runs the poller. */
const isPoll = (b: (typeof BUILTINS)[number]) => /^\[poll\]/m.test(b.files["bobbin.toml"] ?? "");

describe("bobbin check on the built-ins", () => {
  for (const b of BUILTINS) {
    const name = b.dir.replace("/", ".");
    test(`${name} passes, by name and by its directory`, async () => {
      const byName = await cli(["bobbin", "check", name], { cwd: ROOT });
      expect(byName.out).toContain(`${name} (builtin:${b.dir}): passes`);
      expect(byName.code).toBe(0);
      expect(byName.out).toMatch(/^\s+PASS\s+tests/m);
      // By directory every row again but the tests row: the bobbin's own tests just ran in the
      // check by name (and run once more as a file of this suite); a third run proves nothing.
      const byDir = await cli(["--json", "bobbin", "check", join("bobbins", b.dir), "--no-tests"], { cwd: ROOT });
      const card = JSON.parse(byDir.out) as { passed: boolean; rows: Row[] };
      expect(card.rows.filter((r) => r.outcome === "fail")).toEqual([]);
      expect(card.rows.find((r) => r.name === "source-kit")?.outcome).toBe(isPoll(b) ? "skip" : "pass");
      if (isPoll(b)) expect(card.rows.find((r) => r.name === "processor")?.outcome).toBe("pass");
      expect(card.rows.find((r) => r.name === "tests")?.outcome).toBe("skip");
      expect(byDir.code).toBe(0);
    }, 30_000);
  }
});

test("the compiled binary carries every built-in and serves its captures", async () => {
  const bin = await builtBinary();
  for (const b of BUILTINS) {
    const name = b.dir.replace("/", ".");
    // Outside the checkout: everything comes from inside the binary.
    const p = Bun.spawn([bin, "--json", "bobbin", "check", name], {
      cwd: tempDir(),
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: process.env.PATH, HOME: tempDir() },
    });
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
    const card = JSON.parse(out) as { rows: Row[] };
    expect({ name, failed: card.rows.filter((r) => r.outcome === "fail") }).toEqual({ name, failed: [] });
    expect({
      name,
      sourceKit: card.rows.find((r) => r.name === "source-kit")?.outcome,
      captures: card.rows.find((r) => r.name === "captures")?.outcome,
    }).toEqual({ name, sourceKit: isPoll(b) ? "skip" : "pass", captures: "pass" });
    expect(code).toBe(0);
  }
}, 60_000);

describe("each row fails on its defect", () => {
  test("the copy passes as it is", async () => {
    expect(failing(await rows(widgets().dir))).toEqual([]);
  });

  test("name: the hookspool. namespace, and a built-in's name, are not a private bobbin's", async () => {
    const { root } = widgets();
    const dir = join(root, "hookspool", "widgets");
    mkdirSync(join(root, "hookspool"));
    cpSync(join(root, "acme", "widgets"), dir, { recursive: true });
    edit(dir, "bobbin.toml", (t) => t.replace('name = "acme.widgets"', 'name = "hookspool.widgets"'));
    expect((await rows(dir)).get("name")?.problems[0]).toMatchObject({
      file: "bobbin.toml",
      line: expect.any(Number),
      message: expect.stringContaining("reserved"),
    });
    const shadow = join(root, "kaneo", "projects");
    mkdirSync(join(root, "kaneo"));
    cpSync(join(ROOT, "bobbins", "kaneo", "projects"), shadow, { recursive: true });
    expect((await rows(shadow)).get("name")?.problems.map((p) => p.message)).toEqual([
      "kaneo.projects is the name of a built-in bobbin",
    ]);
  });

  test("manifest: an unknown key, at its line", async () => {
    const { dir } = widgets();
    appendFileSync(join(dir, "bobbin.toml"), '\ncolour = "blue"\n');
    const r = await rows(dir);
    expect(failing(r)).toEqual(["manifest"]);
    const lines = readFileSync(join(dir, "bobbin.toml"), "utf8").split("\n");
    expect(lines[(r.get("manifest")?.problems[0].line ?? 0) - 1]).toBe('colour = "blue"');
  });

  test("provider: a page on a test host, plain http, and a frontmatter that disagrees", async () => {
    const { dir } = widgets();
    edit(dir, "bobbin.toml", (t) =>
      t
        .replace(/homepage = "[^"]+"/, 'homepage = "https://kaneo.example.com/"')
        .replace(/webhook_docs = "https:/, 'webhook_docs = "http:'),
    );
    edit(dir, "SETUP.md", (t) => t.replace("bobbin: acme.widgets", "bobbin: acme.gadgets"));
    const r = await rows(dir);
    expect(failing(r)).toContain("provider");
    const messages = r.get("provider")?.problems.map((p) => `${p.file}: ${p.message}`) ?? [];
    expect(messages).toContain("bobbin.toml: provider.homepage is on a test or example host, not the provider's");
    expect(messages).toContain("bobbin.toml: provider.webhook_docs is not https");
    expect(messages.some((m) => m.startsWith('SETUP.md: frontmatter bobbin is "acme.gadgets"'))).toBe(true);
  });

  test("files and docs: a stray file, a missing SETUP.md", async () => {
    const { dir } = widgets();
    writeFileSync(join(dir, "notes.txt"), "x");
    rmSync(join(dir, "SETUP.md"));
    const r = await rows(dir);
    expect(
      r
        .get("files")
        ?.problems.map((p) => p.file)
        .sort(),
    ).toEqual(["SETUP.md", "notes.txt"]);
    expect(r.get("docs")?.problems.map((p) => `${p.file}: ${p.message}`)).toEqual(["SETUP.md: missing"]);
  });

  test("todos: each placeholder at its line", async () => {
    const { dir } = widgets();
    appendFileSync(join(dir, "README.md"), "\nTODO: say what the sweep writes\n");
    const r = await rows(dir);
    expect(failing(r)).toEqual(["todos"]);
    const p = r.get("todos")?.problems[0];
    expect(readFileSync(join(dir, "README.md"), "utf8").split("\n")[(p?.line ?? 0) - 1]).toBe(
      "TODO: say what the sweep writes",
    );
  });

  test("core-only: a forbidden call in a module, and a file in the vendor directory", async () => {
    const { root, dir } = widgets();
    writeFileSync(
      join(dir, "helpers.ts"),
      "export async function poke() {\n  return fetch('https://kaneo.example.com');\n}\n",
    );
    writeFileSync(join(root, "acme", "shared.ts"), "export const x = 1;\n");
    const problems = (await rows(dir)).get("core-only")?.problems ?? [];
    expect(problems.map((p) => `${p.file}:${p.line ?? "-"}`)).toEqual(["helpers.ts:2", "../shared.ts:-"]);
  });

  test("docs: a secret SETUP.md never names, no Needs from the human, a config block that does not load", async () => {
    const { dir } = widgets();
    edit(dir, "AGENTS.md", (t) => t.replace(/^#+\s*Needs from the human/m, "## What we need"));
    edit(dir, "SETUP.md", (t) => t.replace(/bobbin = "acme\.widgets"/, 'bobbin = "acme.widget"'));
    const problems = (await rows(dir)).get("docs")?.problems.map((p) => `${p.file}: ${p.message}`) ?? [];
    expect(problems).toContain("AGENTS.md: has no Needs from the human list");
    expect(problems.some((m) => /^SETUP\.md: the config block does not load: bobbins\.\S+\.bobbin: /.test(m))).toBe(
      true,
    );
  });

  test(
    "captures: an expectation that does not hold, a real-looking address, a secret that is not a " + "test value",
    async () => {
      const { dir } = widgets();
      edit(dir, "captures/accepted.http", (t) => t.replace(/^# expect-key: .*$/m, "# expect-key: not-the-key"));
      edit(dir, "captures/rejected.http", (t) =>
        t.replace(/^# expect: .*$/m, "# expect: 401\n# from jane.doe@gmail.com"),
      );
      const kit = readFileSync(join(dir, "captures/kit.toml"), "utf8");
      edit(dir, "captures/kit.toml", (t) => t.replace(/^secret = "[^"]*"/m, 'secret = "s3cr3t-v4lu3"'));
      const messages = (await rows(dir)).get("captures")?.problems.map((p) => `${p.file}: ${p.message}`) ?? [];
      expect(
        messages.some((m) => m.startsWith("captures/rejected.http: holds a real-looking e-mail address ja…")),
      ).toBe(true);
      expect(messages.some((m) => /^captures\/kit\.toml: secrets\.\w+ does not look like a test value$/.test(m))).toBe(
        true,
      );
      // With those put right, the captures are sent, and the accepted one's key is not what it says.
      writeFileSync(join(dir, "captures/kit.toml"), kit);
      edit(dir, "captures/rejected.http", (t) => t.replace("# from jane.doe@gmail.com\n", ""));
      const sent = (await rows(dir)).get("captures")?.problems.map((p) => `${p.file}: ${p.message}`) ?? [];
      expect(sent).toEqual([
        expect.stringMatching(/^captures\/accepted\.http: queued under key "[^"]+", # expect-key: says "not-the-key"$/),
      ]);
    },
  );

  test("captures: a JWT is a credential as a bearer token, not as a signature header", async () => {
    const { dir } = widgets();
    const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpYXQiOjE3MDAwMDAwMDB9.c2lnbmF0dXJlLWJ5dGVz";
    edit(dir, "captures/rejected.http", (t) =>
      t.replace("Content-Type:", `Plaid-Verification: ${jwt}\nAuthorization: Bearer ${jwt}\nContent-Type:`),
    );
    const problems = (await rows(dir)).get("captures")?.problems ?? [];
    const lines = readFileSync(join(dir, "captures/rejected.http"), "utf8").split("\n");
    expect(problems.map((p) => lines[(p.line ?? 0) - 1].split(":")[0])).toEqual(["Authorization"]);
  });

  test("source-kit and tests: a code source that verifies nothing, with no tests", async () => {
    const { dir } = widgets();
    edit(dir, "bobbin.toml", (t) => t.replace(/^template = .*$/m, 'module = "source"'));
    writeFileSync(
      join(dir, "source.ts"),
      'export default {\n  secrets: ["secret"],\n  authHeaders: ["X-Kaneo-Signature"],\n  verify: () ' +
        '=> true,\n  key: () => "k",\n};\n',
    );
    const r = await rows(dir);
    expect(r.get("source-kit")?.problems.map((p) => p.message)).toContain(
      "unsigned: 401, empty body, nothing stored: without its signature: 202, expected 401",
    );
    expect(r.get("tests")?.problems.map((p) => p.message)).toEqual(["a bobbin with code has no tests of its own"]);
  });

  test(
    "tests: a private bobbin's own tests run, with the plugin API importable; a failing one fails " + "the row",
    async () => {
      const { dir } = widgets();
      edit(dir, "bobbin.toml", (t) => t.replace(/^template = .*$/m, 'module = "source"'));
      writeFileSync(
        join(dir, "source.ts"),
        'import { defineSource, hmacPrefixedWhy } from "hookspool/plugin";\n\nexport default ' +
          'defineSource({\n  secrets: ["secret"],\n  authHeaders: ["X-Kaneo-Signature"],\n  verify: (req, ' +
          'secrets) => hmacPrefixedWhy(req.header("X-Kaneo-Signature"), "", secrets.get("secret"), ' +
          'req.body, { algorithm: "sha256", encoding: "hex" }) ?? true,\n  key: () => "k",\n});\n',
      );
      mkdirSync(join(dir, "tests"));
      const test = (body: string) =>
        writeFileSync(
          join(dir, "tests", "source.test.ts"),
          `import { expect, test } from "bun:test";\nimport source from "../source.ts";\n\ntest("the ` +
            `key", () => {\n  expect(source.key({}, {} as never)).toBe(${body});\n});\n`,
        );
      test('"k"');
      expect((await rows(dir)).get("tests")).toMatchObject({ outcome: "pass", note: "tests/source.test.ts" });
      test('"other"');
      expect((await rows(dir)).get("tests")?.problems.map((p) => p.message)).toEqual([
        "1 fail (bun test exited 1); first: the key",
      ]);
      expect(
        (await checkBobbin(subjectFromDir(dir), { runTests: false })).rows.find((r) => r.name === "tests"),
      ).toMatchObject({ outcome: "skip", note: "tests/source.test.ts: not run (--no-tests)" });
    },
  );

  test("processor: run twice under one batch id; an undeclared output, or a failure, is named", async () => {
    const { dir } = widgets();
    const processor = readFileSync(writeTallyBobbin(tempDir()) + "/processor.ts", "utf8");
    writeFileSync(join(dir, "processor.ts"), processor);
    const outputs = (extra: string) =>
      edit(
        dir,
        "bobbin.toml",
        (t) =>
          `${t.replace(/\[outputs\.[^\]]+\][^[]*/g, "")}\n[processor]\nmodule = "processor"\nstate = ` +
          `true\n\n[settings.mode]\ndescription = "how the tally behaves"\ntype = "string"\ndefault = ` +
          `"ok"\n\n[outputs.tally]\ndescription = "a count"\n${extra}`,
      );
    outputs("");
    const undeclared = (await rows(dir)).get("processor");
    expect(undeclared?.problems.map((p) => p.message)).toEqual([
      "items of event type unmapped-type, which [outputs] does not declare",
    ]);
    edit(dir, "bobbin.toml", (t) => `${t}\n[outputs.unmapped-type]\ndescription = "the other one"\n`);
    expect((await rows(dir)).get("processor")).toMatchObject({
      outcome: "pass",
      note: "1 capture(s) run twice under one batch id",
    });
    edit(dir, "captures/kit.toml", (t) => t.replace("[instance]", '[instance]\nsettings = { mode = "permanent" }'));
    expect((await rows(dir)).get("processor")?.problems.map((p) => p.message)).toEqual([
      "the processor exited 65: the tally is closed",
    ]);
  }, 20_000);

  test("a poll bobbin: no webhook pages, no request captures, and its poller's items are the capture's", async () => {
    const root = tempDir("hookspool-poll-");
    expect((await cli(["bobbin", "new", "acme.filings", "--poll", "--dir", root])).code).toBe(0);
    const dir = join(root, "acme", "filings");
    for (const f of [
      "bobbin.toml",
      "README.md",
      "SETUP.md",
      "AGENTS.md",
      "poller.ts",
      "captures/poll-example.json",
      "tests/poller.test.ts",
    ]) {
      edit(dir, f, (t) =>
        t
          .replaceAll("https://TODO", "https://www.sec.gov/edgar")
          .replaceAll("TODO TODO", "Acme Filings")
          .replace('vendor = "TODO"', 'vendor = "Acme"')
          .replace('product = "TODO"', 'product = "Filings"')
          .split("\n")
          .filter((l) => !/^(#|\/\/).*TODO/.test(l))
          .map((l) => l.replaceAll("TODO", "Answered"))
          .join("\n"),
      );
    }
    expect(failing(await rows(dir))).toEqual([]);
    edit(dir, "captures/poll-example.json", (t) =>
      t.replace('"title": "The second entry"', '"title": "Another title"'),
    );
    expect((await rows(dir)).get("processor")?.problems.map((p) => p.message)).toEqual([
      'the poller returned other items than the capture\'s "items"',
    ]);
    writeFileSync(join(dir, "captures/accepted.http"), "# expect: 202 queued\nPOST /hooks/filings HTTP/1.1\n\n{}\n");
    edit(dir, "bobbin.toml", (t) =>
      t.replace("[provider]\n", '[provider]\nwebhook_docs = "https://www.sec.gov/edgar/hooks"\n'),
    );
    const r = await rows(dir);
    expect(r.get("captures")?.problems.map((p) => p.message)).toContain("a poll bobbin takes no requests");
    expect(r.get("provider")?.problems.map((p) => p.message)).toContain(
      "provider.webhook_docs is for a webhook bobbin; a poll bobbin has no webhook",
    );
  }, 20_000);

  test("advisory rows count only under --strict", async () => {
    const s = subjectFromDir(widgets().dir);
    const loose = await checkBobbin(s, {
      online: true,
      fetchPage: async () => 404,
      changed: ["bobbins/acme/widgets/bobbin.toml", "src/intake/server.ts"],
    });
    expect(loose.rows.find((r) => r.name === "provider-links")?.outcome).toBe("fail");
    expect(loose.rows.find((r) => r.name === "scope")?.problems.map((p) => p.file)).toEqual(["src/intake/server.ts"]);
    expect(loose.passed).toBe(true);
    expect((await checkBobbin(s, { online: true, strict: true, fetchPage: async () => 404 })).passed).toBe(false);
  });
});

describe("the command", () => {
  test("exit 2 and file:line with a fix in text; md and json carry the same rows", async () => {
    const { dir } = widgets();
    appendFileSync(join(dir, "README.md"), "\nTODO: fill in\n");
    const text = await cli(["bobbin", "check", dir]);
    expect(text.code).toBe(2);
    expect(text.out).toMatch(/ {2}FAIL {2}todos\n {8}README\.md:\d+: a placeholder is left: TODO: fill in\n {10}fix: /);
    const md = await cli(["bobbin", "check", dir, "--report", "md"]);
    expect(md.out).toContain("| todos | fail | 1 problem |");
    const json = JSON.parse((await cli(["bobbin", "check", dir, "--report", "json"])).out) as { passed: boolean };
    expect(json.passed).toBe(false);
  });

  test("a name it does not know, a file that is not a directory, a bad --report: one line each", async () => {
    expect((await cli(["bobbin", "check", "acme.nothing"])).err).toMatch(/^hookspool: no bobbin "acme\.nothing"/);
    expect((await cli(["bobbin", "check", join(ROOT, "README.md")])).code).toBe(2);
    expect((await cli(["bobbin", "check", "github.repo", "--report", "html"])).err).toContain(
      "--report html: expected text, md or json",
    );
  });
});
