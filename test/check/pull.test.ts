// hookspool check on pull's config: a clean pull destination and pull source pass; their
// tokens are secrets like any other (unreadable: an error; readable by group/other: a
// warning); a pull destination without a token, a bad name, an http:// upstream without
// allow_insecure, a URL with credentials, and a pull source that also takes webhooks are refused.
import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkConfigFile } from "../../src/check/check.ts";
import type { ConfigProblem } from "../../src/config/types.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { tempDir } from "../helpers/tmp.ts";

const TOKEN = "check-pull-token-0123456789";

function home(): { dir: string; token: string } {
  const dir = tempDir();
  const spool = openSpool(join(dir, "spool.db"), { create: true });
  migrate(spool);
  spool.close();
  const token = join(dir, "token");
  writeFileSync(token, `${TOKEN}\n`, { mode: 0o600 });
  return { dir, token };
}

async function check(dir: string, text: string): Promise<ConfigProblem[]> {
  writeFileSync(join(dir, "config.toml"), text, { mode: 0o600 });
  try {
    const report = await checkConfigFile({ home: dir, env: { PATH: process.env.PATH, HOME: dir }, cwd: dir });
    expect(JSON.stringify(report.problems)).not.toContain(TOKEN);
    return report.problems;
  } catch (e) {
    // A config the loader refuses: its problems, as check reports them.
    const problems = (e as { problems?: ConfigProblem[] }).problems;
    if (!problems) throw e;
    return problems;
  }
}

const publicSide = (token: string, extra = "") => `[sources.gh]
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "${token}" }
${extra}`;

const privateSide = (token: string, url = "https://hooks.example.org", extra = "") => `[sources.office]
action = "script:log"

[sources.office.pull]
url = "${url}"
destination = "laptop"
token = { file = "${token}" }
${extra}

[destinations."script:log"]
argv = ["/bin/true"]
`;

const keys = (ps: ConfigProblem[], level: "error" | "warning") =>
  ps.filter((p) => p.level === level).map((p) => `${p.key}: ${p.message}`);

describe("check on pull", () => {
  test("a pull destination and a pull source that pass every rule", async () => {
    const h = home();
    expect(await check(h.dir, publicSide(h.token))).toEqual([]);
    expect(await check(h.dir, privateSide(h.token))).toEqual([]);
  });

  test("their tokens are secrets: unreadable is an error, readable by group/other a warning", async () => {
    const h = home();
    chmodSync(h.token, 0o644);
    expect(keys(await check(h.dir, publicSide(h.token)), "warning").join("\n")).toContain(
      'destinations."pull:laptop".token: ',
    );
    expect(keys(await check(h.dir, privateSide(h.token)), "warning").join("\n")).toContain("sources.office.pull.token");
    const missing = join(h.dir, "nothing");
    expect(keys(await check(h.dir, publicSide(missing)), "error").join("\n")).toContain("token");
    expect(keys(await check(h.dir, privateSide(missing)), "error").join("\n")).toContain("sources.office.pull.token");
  });

  test("refused: no token, a bad name, http:// without allow_insecure, credentials, bounds, webhooks too", async () => {
    const h = home();
    expect(
      keys(await check(h.dir, '[sources.gh]\naction = "pull:laptop"\n[destinations."pull:laptop"]\n'), "error").join(),
    ).toContain("needs token");
    expect(
      keys(await check(h.dir, `[destinations."pull:a/b"]\ntoken = { file = "${h.token}" }\n`), "error").join(),
    ).toContain("name after pull:");
    expect(keys(await check(h.dir, privateSide(h.token, "http://hooks.example.org")), "error").join()).toContain(
      "allow_insecure",
    );
    expect(await check(h.dir, privateSide(h.token, "http://127.0.0.1:9", "allow_insecure = true"))).toEqual([]);
    expect(keys(await check(h.dir, privateSide(h.token, undefined, "max = 101\nwait_s = 61")), "error")).toEqual([
      "sources.office.pull.max: a lease request takes at most 100 batches",
      "sources.office.pull.wait_s: a lease request waits at most 60 s upstream",
    ]);
    expect(keys(await check(h.dir, privateSide(h.token, "https://u:p@hooks.example.org")), "error").join()).toContain(
      "no query, fragment or credentials",
    );
    const both = privateSide(h.token).replace(
      "[sources.office]\n",
      '[sources.office]\ntemplate = { scheme = "static-token", header = "X-Token", key = "k" }\n',
    );
    expect(keys(await check(h.dir, both), "error").join()).toContain("a pull source takes no webhooks");
  });
});
