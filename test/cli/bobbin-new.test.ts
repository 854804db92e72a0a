// hookspool bobbin new: a scaffold for every template scheme, as a template and as code, fails
// `bobbin check` on exactly the provider and todos rows, and passes once the placeholders are
// filled in; settings the template source refuses write nothing.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkBobbin } from "../../src/check/bobbin/scorecard.ts";
import { subjectFromDir } from "../../src/check/bobbin/subject.ts";
import { cli } from "../helpers/cli.ts";
import { builtBinary } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const SCHEMES: Record<string, string[]> = {
  "hmac-sha256-hex": [
    "header=X-Widget-Signature",
    "prefix=sha256=",
    'key=["widget.id"]',
    "event_type=type",
    "dedup=header:X-Widget-Delivery",
  ],
  "hmac-sha1-hex": ["header=X-Signature", 'key=["a.b.c", "header:X-Org"]'],
  "hmac-sha256-base64": ["header=X-Hmac", "key=shop", "dedup=body_sha256"],
  "hmac-sha1-base64-url": [
    "header=X-Trello-Webhook",
    "callback_url=https://hooks.example.com/widgets",
    "key=model.id",
    "head_handshake=true",
  ],
  "standard-webhooks": ['key=["data.id"]', "event_type=type"],
  timestamped: ["header=Stripe-Signature", "key=data.object.id", "event_type=type"],
  "static-token": ["param=token", "key=subscription", "dedup=message.messageId"],
};

function walk(dir: string, root = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name), root) : [join(dir, e.name).slice(root.length + 1)],
  );
}

/** What the author does next: the provider's names and pages, and every TODO answered. */
function fillIn(dir: string): void {
  for (const f of walk(dir)) {
    const p = join(dir, f);
    const text = readFileSync(p, "utf8")
      .replaceAll("https://TODO", "https://developer.acme-widgets.io/webhooks")
      .replaceAll("TODO TODO", "Acme Widgets")
      .replace('vendor = "TODO"', 'vendor = "Acme"')
      .replace('product = "TODO"', 'product = "Widgets"')
      .split("\n")
      .filter((l) => !/^(#|\/\/).*TODO/.test(l))
      .map((l) => l.replaceAll("TODO", "Answered"))
      .join("\n");
    writeFileSync(p, text);
  }
}

const failing = async (dir: string) =>
  (await checkBobbin(subjectFromDir(dir))).rows.filter((r) => r.outcome === "fail").map((r) => r.name);

async function scaffolded(scheme: string, extra: string[] = []): Promise<string> {
  const root = tempDir("hookspool-new-");
  const sets = [`scheme=${scheme}`, ...SCHEMES[scheme]].flatMap((s) => ["--set", s]);
  const r = await cli(["bobbin", "new", "acme.widgets", "--dir", root, ...sets, ...extra]);
  expect(r.err).toBe("");
  expect(r.code).toBe(0);
  return join(root, "acme", "widgets");
}

describe("bobbin new", () => {
  for (const scheme of Object.keys(SCHEMES)) {
    test(`${scheme}: fails only provider and todos, then passes once filled in`, async () => {
      const dir = await scaffolded(scheme);
      expect(await failing(dir)).toEqual(["provider", "todos"]);
      fillIn(dir);
      expect(await failing(dir)).toEqual([]);
    });
  }

  for (const scheme of ["timestamped", "static-token", "hmac-sha1-base64-url"]) {
    test(`--code, ${scheme}: a source.ts on hookspool/plugin that passes the same kit`, async () => {
      const dir = await scaffolded(scheme, ["--code"]);
      expect(readFileSync(join(dir, "source.ts"), "utf8")).toContain('from "hookspool/plugin"');
      expect(readFileSync(join(dir, "bobbin.toml"), "utf8")).toContain('module = "source"');
      expect(await failing(dir)).toEqual(["provider", "todos"]);
      fillIn(dir);
      const card = await checkBobbin(subjectFromDir(dir));
      expect(card.rows.filter((r) => r.outcome === "fail")).toEqual([]);
      // The matrix ran on the code itself, the quarantine case from its own capture.
      expect(card.rows.find((r) => r.name === "source-kit")?.note).not.toContain("cannot classify");
    });
  }

  test("--processor: a processor.ts the kit runs twice under one batch id, passing once filled in", async () => {
    const dir = await scaffolded("hmac-sha256-hex", ["--processor"]);
    expect(readFileSync(join(dir, "bobbin.toml"), "utf8")).toContain('[processor]\nmodule = "processor"');
    expect(await failing(dir)).toEqual(["provider", "todos"]);
    fillIn(dir);
    const card = await checkBobbin(subjectFromDir(dir));
    expect(card.rows.filter((r) => r.outcome === "fail")).toEqual([]);
    expect(card.rows.find((r) => r.name === "processor")).toMatchObject({
      outcome: "pass",
      note: "1 capture(s) run twice under one batch id",
    });
  });

  test("--poll: a feed poller the kit runs on its poll capture, passing once filled in", async () => {
    const root = tempDir("hookspool-new-");
    const r = await cli(["bobbin", "new", "acme.filings", "--poll", "--dir", root]);
    expect(r.code).toBe(0);
    const dir = join(root, "acme", "filings");
    expect(readFileSync(join(dir, "bobbin.toml"), "utf8")).toContain("[poll]");
    expect(await failing(dir)).toEqual(["provider", "todos"]);
    fillIn(dir);
    const card = await checkBobbin(subjectFromDir(dir));
    expect(card.rows.filter((x) => x.outcome === "fail")).toEqual([]);
    expect(card.rows.find((x) => x.name === "processor")).toMatchObject({
      outcome: "pass",
      note: "1 poll capture(s) run twice under one batch id",
    });
    expect(card.rows.find((x) => x.name === "source-kit")?.outcome).toBe("skip");
    expect((await cli(["bobbin", "new", "acme.other", "--poll", "--code", "--dir", root])).err).toContain(
      "--poll takes no --set, --code or --processor",
    );
  });

  test("the compiled binary loads a private code source that imports hookspool/plugin", async () => {
    const dir = await scaffolded("standard-webhooks", ["--code"]);
    fillIn(dir);
    const p = Bun.spawn([await builtBinary(), "bobbin", "check", dir], {
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: process.env.PATH, HOME: tempDir() },
    });
    const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
    expect(out).toMatch(/PASS {2}source-kit: 11 of 15 cases ran/);
    // The whole scorecard on failure: which row the binary failed.
    expect({ code, failed: out.split("\n").filter((l) => l.includes("FAIL")) }).toEqual({ code: 0, failed: [] });
  }, 60_000);

  test("directories are not group- or other-writable, whatever the umask", async () => {
    const dir = await scaffolded("hmac-sha256-hex");
    for (const d of [dir, join(dir, ".."), join(dir, "captures")]) expect(statSync(d).mode & 0o022).toBe(0);
  });

  test(
    "settings the template refuses, a bad name, an existing directory, --processor: one line, " + "nothing written",
    async () => {
      const root = tempDir("hookspool-new-");
      const run = (...argv: string[]) => cli(["bobbin", "new", ...argv, "--dir", root]);
      const cases = [
        [["acme.widgets", "--set", "scheme=hmac-sha512-hex", "--set", "key=id"], /^hookspool: scheme: /],
        [["acme.widgets", "--set", "scheme=hmac-sha256-hex", "--set", "key=id"], /^hookspool: header: /],
        [["acme.widgets", "--set", "scheme=static-token"], /^hookspool: key: required/],
        [
          ["acme.widgets", "--set", "scheme=static-token", "--set", "key=id", "--set", "colour=blue"],
          /^hookspool: colour: not a template setting/,
        ],
        [["acme.widgets", "--set", "scheme"], /^hookspool: --set scheme: expected NAME=VALUE/],
        [
          ["hookspool.widgets", "--set", "scheme=static-token", "--set", "key=id", "--set", "header=X-T"],
          /^hookspool: name: the hookspool\. namespace/,
        ],
        [
          ["Acme", "--set", "scheme=static-token", "--set", "key=id"],
          /^hookspool: name: "Acme" is not <vendor>\.<product>/,
        ],
      ] as const;
      for (const [argv, message] of cases) {
        const r = await run(...argv);
        expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
        expect(r.err.split("\n")[0]).toMatch(message);
      }
      expect(readdirSync(root)).toEqual([]);
      expect(
        (await run("acme.widgets", "--set", "scheme=static-token", "--set", "key=id", "--set", "header=X-T")).code,
      ).toBe(0);
      const again = await run("acme.widgets", "--set", "scheme=static-token", "--set", "key=id", "--set", "header=X-T");
      expect(again.err).toContain("exists already");
      expect(existsSync(join(root, "acme", "widgets", "bobbin.toml"))).toBe(true);
    },
  );
});
