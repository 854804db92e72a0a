// A source's secret rotation, through a real intake: a list of secrets, newest first, each
// older one with its until. Requests signed with any secret in force pass, and only the newest
// after an old one's until; every secret is tried every time (no early exit that says which
// matched); /metrics counts verifications per position; an old secret still in use within a
// day of its until opens an issue, resolved once only the newest is in force; send signs with
// the newest; a bobbin instance's secrets rotate the same way; check warns of an entry past its until; a malformed
// until is a config error.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkConfigFile } from "../../src/check/check.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { IntakeSource, SecretPosition } from "../../src/config/sources.ts";
import { evaluate } from "../../src/intake/evaluate.ts";
import { oldSecretFingerprint } from "../../src/intake/rotation.ts";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import type { SourcePlugin } from "../../src/plugin/types.ts";
import { cli } from "../helpers/cli.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

const NEW = "rotation-new-secret-0123456789";
const OLD = "rotation-old-secret-9876543210";
/** The old secret stops verifying two days after the test's clock starts. */
const UNTIL = T0 + 2 * 86_400;
const iso = (t: number) => new Date(t * 1000).toISOString().replace(/\.000Z$/, "Z");

const CONFIG = `[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "repo" }
secrets.secret = [{ file = "{{secret:new}}" }, { file = "{{secret:old}}", until = "${iso(UNTIL)}" }]
action = "script:log"

[destinations."script:log"]
argv = ["/bin/true"]
`;

let n = 0;
async function post(t: TestIntake, secret: string, path = "/hooks/gh", header = "X-Sig"): Promise<number> {
  const body = JSON.stringify({ repo: "o/r", n: n++ });
  const sig = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
  const r = await t.post(path, body, {
    "Content-Type": "application/json",
    [header]: sig,
    "X-GitHub-Event": "push",
    "X-GitHub-Delivery": `d-${n}`,
  });
  return r.status;
}

const issue = (t: TestIntake, source: string) =>
  t.db.db
    .query("SELECT state, kind, last_error FROM issues WHERE fingerprint = ?")
    .get(oldSecretFingerprint(source)) as {
    state: string;
    kind: string;
    last_error: string;
  } | null;

describe("a source's secret rotation", () => {
  test("either secret until the old one's until, then only the newest; the issue opens and resolves", async () => {
    const t = await startIntake(CONFIG, { secrets: { new: NEW, old: OLD } });
    try {
      expect(await post(t, NEW)).toBe(202);
      expect(await post(t, OLD)).toBe(202);
      expect(await post(t, "neither-secret-at-all-000")).toBe(401);
      // send signs as the sender does now: with the newest.
      const sent = await cli([
        "--home",
        t.home,
        "send",
        "gh",
        "--data",
        '{"repo":"o/r"}',
        "--url",
        `${t.url}/hooks/gh`,
      ]);
      expect(sent.code).toBe(0);
      // Two days left: no issue yet.
      expect(issue(t, "gh")).toBeNull();
      const metrics = await (await fetch(`${t.url}/metrics`)).text();
      expect(metrics).toContain('hookspool_verified_total{source="gh",secret="0"} 2');
      expect(metrics).toContain('hookspool_verified_total{source="gh",secret="1"} 1');
      // Within a day of its until, the old secret still in use opens the issue.
      t.clock.set(UNTIL - 3600);
      expect(await post(t, OLD)).toBe(202);
      await waitFor("the issue", () => issue(t, "gh")?.state === "open");
      expect(issue(t, "gh")?.kind).toBe("config");
      expect(issue(t, "gh")?.last_error).toContain(iso(UNTIL).slice(0, 19));
      expect(issue(t, "gh")?.last_error).not.toContain(OLD);
      // Past its until: the old secret is refused, the newest verifies and the issue is over.
      t.clock.set(UNTIL);
      expect(await post(t, OLD)).toBe(401);
      expect(await post(t, NEW)).toBe(202);
      await waitFor("the issue resolved", () => issue(t, "gh")?.state === "resolved");
    } finally {
      await t.stop();
    }
  });

  test("a bobbin instance's secret rotates the same way", async () => {
    const t = await startIntake(
      `[bobbins.github]
bobbin = "github.repo"
secrets.secret = [{ file = "{{secret:new}}" }, { file = "{{secret:old}}", until = "${iso(UNTIL)}" }]
outputs = { "*" = "script:log" }

[destinations."script:log"]
argv = ["/bin/true"]
`,
      { secrets: { new: NEW, old: OLD } },
    );
    try {
      const gh = (secret: string) => post(t, secret, "/hooks/github", "X-Hub-Signature-256");
      expect(await gh(NEW)).toBe(202);
      expect(await gh(OLD)).toBe(202);
      t.clock.set(UNTIL + 1);
      expect(await gh(OLD)).toBe(401);
      expect(await gh(NEW)).toBe(202);
    } finally {
      await t.stop();
    }
  });

  test("every position is tried, whichever verifies; the newest that does counts", async () => {
    const calls: string[] = [];
    const plugin = {
      verify: async (_req: unknown, secrets: { get(n: string): string }) => {
        calls.push(secrets.get("secret"));
        return secrets.get("secret") !== "old";
      },
      key: () => "k",
      authHeaders: [],
    } as unknown as SourcePlugin;
    const position = (p: number, value: string, until: number | null): SecretPosition => ({
      position: p,
      until,
      secrets: { get: () => value },
    });
    const src = {
      name: "s",
      plugin,
      secrets: { get: () => "new" },
      secretsAt: () => [position(0, "new", null), position(1, "new2", UNTIL), position(2, "old", UNTIL)],
    } as unknown as IntakeSource;
    const home = tempDir();
    writeFileSync(join(home, "config.toml"), '[sources.s]\naction = "x"\n');
    const config = loadConfig({ home, env: {}, cwd: home }).config;
    const req = hookRequest({
      method: "POST",
      url: "/hooks/s",
      headers: [],
      body: new Uint8Array(),
      peer: "p",
      now: T0,
    });
    const ev = await evaluate(config, src, req);
    expect(calls).toEqual(["new", "new2", "old"]);
    expect(ev.verifiedWith).toEqual({ position: 0, until: null, of: 3 });
  });

  test("check: an entry past its until is a warning to remove it; a malformed until an error", async () => {
    const home = tempDir();
    const file = (name: string, v: string) => {
      writeFileSync(join(home, name), v, { mode: 0o600 });
      return join(home, name);
    };
    const text = (until: string) => `[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "repo" }
secrets.secret = [{ file = "${file("new", NEW)}" }, { file = "${file("old", OLD)}", until = ${until} }]
action = "script:log"

[destinations."script:log"]
argv = ["/bin/true"]
`;
    const problems = async (until: string) => {
      writeFileSync(join(home, "config.toml"), text(until), { mode: 0o600 });
      try {
        return (
          await checkConfigFile({ home, env: { PATH: process.env.PATH, HOME: home }, cwd: home, skipDatabase: true })
        ).problems;
      } catch (e) {
        return (e as { problems: { level: string; key: string; message: string }[] }).problems;
      }
    };
    const past = await problems('"2020-01-01T00:00:00Z"');
    expect(past.map((p) => `${p.level} ${p.key}: ${p.message}`)).toContain(
      "warning sources.gh.secrets.secret[1]: past its until (2020-01-01T00:00:00.000Z): " +
        "requests signed with it are refused now",
    );
    // A TOML date-time is taken as well as a quoted one; far off, nothing to say.
    expect(await problems("2999-01-01T00:00:00Z")).toEqual([]);
    expect((await problems('"next week"')).map((p) => p.key)).toContain("sources.gh.secrets.secret[1].until");
  });
});
