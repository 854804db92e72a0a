// A bobbin instance's problems are said under the keys the operator wrote: an instance expands
// into [sources.<i>], destinations."script:<i>" and output routes ahead of the file's own, and
// the rules that run over those tables must not send the reader to a table they never wrote, nor
// say one problem twice.
import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { checkConfigFile } from "../../src/check/check.ts";
import type { ConfigProblem } from "../../src/config/types.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { tempDir } from "../helpers/tmp.ts";

function home(): string {
  const dir = tempDir();
  const spool = openSpool(join(dir, "spool.db"), { create: true });
  migrate(spool);
  spool.close();
  return dir;
}

function secretFile(dir: string, name: string): string {
  const path = join(dir, name);
  writeFileSync(path, "test-secret\n", { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}

async function problems(dir: string, text: string): Promise<ConfigProblem[]> {
  writeFileSync(join(dir, "config.toml"), text, { mode: 0o600 });
  const r = await checkConfigFile({ home: dir, cwd: dir, env: { PATH: process.env.PATH ?? "", HOME: dir } });
  return r.problems;
}

/** Whether `key` names a table or value the document has: its first two segments (or routes[n]). */
function written(doc: Record<string, unknown>, key: string): boolean {
  const route = /^routes\[(\d+)\]/.exec(key);
  if (route) return Number(route[1]) < ((doc.routes as unknown[]) ?? []).length;
  const m = /^([a-z_]+)(?:\.("(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+))?/.exec(key);
  if (!m) return true;
  const table = doc[m[1]] as Record<string, unknown> | undefined;
  if (m[2] === undefined) return true;
  const name = m[2].startsWith('"') ? JSON.parse(m[2]) : m[2];
  return table !== undefined && Object.hasOwn(table, name);
}

const GH = (extra: string) => `[bobbins.gh]\nbobbin = "github.repo"\n${extra}\n`;

describe("a bobbin instance's problems", () => {
  const dir = home();
  const secret = secretFile(dir, "gh.secret");
  const cases: { name: string; text: string; key: string; says: string }[] = [
    {
      name: "a secret file that is missing",
      text: GH(`secrets.secret = { file = "${join(dir, "missing")}" }\noutputs = { "*" = "hermes:gh" }`),
      key: "bobbins.gh.secrets.secret",
      says: "cannot be read",
    },
    {
      name: "a secret variable that is unset",
      text: GH(`secrets.secret = { env = "HOOKSPOOL_TEST_UNSET" }\noutputs = { "*" = "hermes:gh" }`),
      key: "bobbins.gh.secrets.secret",
      says: "is not set",
    },
    {
      name: "an output to no destination",
      text: GH(`secrets.secret = { file = "${secret}" }\noutputs = { "*" = "nope" }`),
      key: 'bobbins.gh.outputs."*"',
      says: 'destination "nope"',
    },
    {
      name: "an output to a script with no table",
      text: GH(`secrets.secret = { file = "${secret}" }\noutputs = { "*" = "script:x" }`),
      key: 'bobbins.gh.outputs."*"',
      says: 'destination "script:x"',
    },
    {
      name: "one of several outputs to no destination",
      text:
        `[bobbins.wh]\nbobbin = "hookspool.webhook"\nsecrets.secret = { file = "${secret}" }\n` +
        `settings = { scheme = "hmac-sha256-hex", key = "id", header = "X-Sig", event_type = "type" }\n` +
        `outputs = { "*" = "hermes:wh", "order.paid" = "script:gone" }\n`,
      key: 'bobbins.wh.outputs."order.paid"',
      says: 'destination "script:gone"',
    },
    {
      name: "a window that cannot close",
      text: GH(`secrets.secret = { file = "${secret}" }\noutputs = { "*" = "hermes:gh" }\nquiet_s = 900\nmax_s = 60`),
      key: "bobbins.gh",
      says: "can never fire",
    },
    {
      name: "a gateway route with no secret",
      text: GH(`secrets.secret = { file = "${secret}" }\noutputs = { "*" = "hermes:gh" }`),
      key: 'bobbins.gh.outputs."*"',
      says: 'route "gh"',
    },
  ];
  for (const c of cases) {
    test(`${c.name}: said once, at ${c.key}, and every key is one the file has`, async () => {
      const text = `[hermes]\nsubscriptions_path = "${join(dir, "subs.json")}"\n${c.text}`;
      writeFileSync(join(dir, "subs.json"), JSON.stringify({ gh: {}, wh: {} }));
      const ps = await problems(dir, text);
      const doc = parse(text) as Record<string, unknown>;
      expect(ps.filter((p) => !written(doc, p.key)).map((p) => p.key)).toEqual([]);
      const at = ps.filter((p) => p.key === c.key && p.message.includes(c.says));
      expect({ key: c.key, found: at.length, all: ps.map((p) => `${p.key}: ${p.message}`) }).toEqual({
        key: c.key,
        found: 1,
        all: expect.anything(),
      });
      const lines = ps.map((p) => p.message);
      expect(new Set(lines).size).toBe(lines.length);
    });
  }

  test("the file's own route is counted as the file counts it, after an instance's output routes", async () => {
    const text =
      `[hermes]\nsubscriptions_path = "${join(dir, "subs.json")}"\n[bobbins.wh]\nbobbin = ` +
      `"hookspool.webhook"\nsecrets.secret = { file = "${secret}" }\nsettings = { scheme = ` +
      `"hmac-sha256-hex", key = "id", header = "X-Sig", event_type = "type" }\noutputs = { "*" = ` +
      `"hermes:wh", "a" = "hermes:wh", "b" = "hermes:wh" }\n\n[[routes]]\nname = "mine"\nsource = "wh"\n` +
      `tee = true\ndestination = "script:missing"\n`;
    writeFileSync(join(dir, "subs.json"), JSON.stringify({ wh: {} }));
    const ps = await problems(dir, text);
    expect(ps.map((p) => p.key)).toContain("routes[0].destination");
    expect(ps.map((p) => p.key).filter((k) => k.startsWith("routes["))).toEqual(["routes[0].destination"]);
  });
});
