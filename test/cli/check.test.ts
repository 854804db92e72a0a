// hookspool check and reload: the report's lines and exit codes, --json, secrets never
// printed, the spool's file modes, and reload touching the config only when the check passes.
import { describe, expect, test } from "bun:test";
import {
  appendFileSync,
  chmodSync,
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { ConfigProblem } from "../../src/config/types.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";

const SENTINEL = "s3ntinel-4b7e0d";

interface Home {
  home: string;
  config: string;
  db: string;
}

/** `hookspool init` in a temp dir: a starter config, its demo secret and script, a spool. */
async function initHome(): Promise<Home> {
  const home = join(tempDir(), "home");
  expect(await cli(["--home", home, "init"])).toMatchObject({ code: 0, err: "" });
  return { home, config: join(home, "config.toml"), db: join(home, "spool.db") };
}

function run(h: Home, argv: string[], env: Record<string, string> = {}) {
  return cli(["--home", h.home, ...argv], { env: { HOME: h.home, ...env } });
}

/** Two errors (an unknown key, a route to quarantine) and one warning (intake.threads). */
const BROKEN = `
[intake]
threads = 4
lisen = "127.0.0.1:1"

[[routes]]
name = "q"
source = "demo"
destination = "quarantine"
`;

describe("hookspool check", () => {
  test("a fresh home passes: exit 0 and a summary line", async () => {
    const h = await initHome();
    const r = await run(h, ["check"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out).toBe(`${h.config}: 0 errors, 0 warnings\n`);
  });

  test("problems print as `level: key: what (how)`, errors first, then the counts; exit 2", async () => {
    const h = await initHome();
    appendFileSync(h.config, BROKEN);
    const r = await run(h, ["check"]);
    expect(r.code).toBe(2);
    const lines = r.out.trimEnd().split("\n");
    expect(lines).toEqual([
      "error: intake.lisen: unknown key (did you mean listen?)",
      'error: routes[0].destination: destination "quarantine": quarantine is reserved and never delivers',
      "warning: intake.threads: is accepted and ignored: Bun serves every request on one event loop (remove the key)",
      `${h.config}: 2 errors, 1 warning`,
    ]);
  });

  test("warnings alone exit 0", async () => {
    const h = await initHome();
    appendFileSync(h.config, "\n[intake]\nthreads = 4\n");
    const r = await run(h, ["check"]);
    expect(r.code).toBe(0);
    expect(r.out).toEndWith(": 0 errors, 1 warning\n");
  });

  test(
    "--json: errors are one error object with the problems, as every verb's error is; a pass is a " + "report",
    async () => {
      const h = await initHome();
      const clean = await run(h, ["--json", "check"]);
      expect(clean.code).toBe(0);
      expect(JSON.parse(clean.out)).toMatchObject({ file: h.config, errors: 0, problems: [], paces: {} });
      appendFileSync(h.config, BROKEN);
      const r = await run(h, ["--json", "check"]);
      expect(r.code).toBe(2);
      const doc = JSON.parse(r.out) as { error: string; code: string; file: string; problems: ConfigProblem[] };
      expect(doc).toMatchObject({ error: "2 errors in the config", code: "E_CONFIG", file: h.config });
      const problems = doc.problems;
      expect(problems.map((p) => [p.level, p.key])).toEqual([
        ["error", "intake.lisen"],
        ["error", "routes[0].destination"],
        ["warning", "intake.threads"],
      ]);
    },
  );

  test(
    "a deployment of GitHub, Trello, Kaneo and a signed JSON service by bobbins passes, and check " +
      "says which senders do not retry",
    async () => {
      const h = await initHome();
      const secret = join(h.home, "github-secret");
      writeFileSync(secret, "s3cret", { mode: 0o600 });
      const trello = join(h.home, "trello-secret");
      writeFileSync(trello, "s3cret", { mode: 0o600 });
      const config = readFileSync(h.config, "utf8");
      writeFileSync(
        h.config,
        `${config}
[bobbins.github-ci]
bobbin = "github.repo"
secrets.secret = { file = "${secret}" }
outputs = { "*" = "script:demo-log" }

[bobbins.trello]
bobbin = "atlassian.trello"
secrets.secret = { file = "${trello}" }
settings = { callback_url = "https://hooks.example.net/hooks/trello" }
outputs = { "*" = "script:demo-log" }

[bobbins.kaneo]
bobbin = "kaneo.projects"
secrets.secret = { file = "${trello}" }
outputs = { "*" = "script:demo-log" }

[bobbins.billing]
bobbin = "hookspool.webhook"
secrets.secret = { file = "${trello}" }
settings = { scheme = "standard-webhooks", key = ["customer.id"], event_type = "type" }
outputs = { "*" = "script:demo-log" }
`,
      );
      const r = await run(h, ["check"]);
      expect({ code: r.code, out: r.out }).toMatchObject({ code: 0 });
      const out = r.out.split("\n");
      expect(out).toContain(
        "note: source kaneo: the sender does not retry a failed delivery: a sweep must recover what is " +
          "missed (its bobbin's README says how)",
      );
      expect(out).toContain(
        "note: source github-ci: the sender does not retry a failed delivery: a sweep must recover what " +
          "is missed (its bobbin's README says how)",
      );
      expect(out).toContain("info: source trello: the sender retries a failed delivery");
      // The summary counts the notes: the senders whose misses only a sweep recovers.
      expect(r.out.trim().split("\n").at(-1)).toMatch(/: 0 errors, 0 warnings, 3 notes$/);
      const json = JSON.parse((await run(h, ["--json", "check"])).out);
      expect(json).toMatchObject({
        errors: 0,
        notes: 3,
        senders: { kaneo: false, "github-ci": false, billing: false, trello: true },
      });
    },
  );

  test("a corrupt spool fails the check (it is the intake's ExecStartPre)", async () => {
    const h = await initHome();
    const spool = openSpool(h.db);
    spool.db.run("CREATE TABLE filler (x TEXT)");
    for (let i = 0; i < 200; i++) spool.db.run("INSERT INTO filler VALUES (?)", ["z".repeat(500)]);
    spool.db.run("PRAGMA wal_checkpoint(TRUNCATE)");
    spool.close();
    const fd = openSync(h.db, "r+");
    writeSync(fd, Buffer.alloc(8192, 0x5a), 0, 8192, Math.floor(statSync(h.db).size / 2 / 4096) * 4096);
    closeSync(fd);
    const r = await run(h, ["check"]);
    expect(r.code).toBe(2);
    expect(r.out).toContain("error: spool.db: database corrupt");
  });

  test("a named config file that does not exist is an error", async () => {
    const h = await initHome();
    const r = await run(h, ["--config", join(h.home, "nope.toml"), "check"]);
    expect(r.code).toBe(2);
    expect(r.out).toContain("no config file here");
  });

  test("has --help text", async () => {
    expect((await cli(["check", "--help"])).out).toContain("ExecStartPre");
    expect((await cli(["reload", "--help"])).out).toStartWith("hookspool reload - check the config, then touch it");
  });

  test("no config file at the default place is an error saying where it looked", async () => {
    const home = join(tempDir(), "empty");
    const where = join(home, "config.toml");
    const r = await cli(["--home", home, "check"]);
    expect(r.code).toBe(2);
    expect(r.err).toBe("");
    const lines = r.out.trimEnd().split("\n");
    expect(lines[0]).toBe(
      `error: config: no config file at ${where} (hookspool init writes a starter config there; or ` +
        `point --home, --config or HOOKSPOOL_CONFIG at yours)`,
    );
    expect(lines.at(-1)).toMatch(/^\(no config file\): 1 error, \d+ warnings?$/);
    const j = await cli(["--home", home, "--json", "check"]);
    expect(j.code).toBe(2);
    expect(JSON.parse(j.out).problems[0]).toEqual({
      level: "error",
      key: "config",
      message: `no config file at ${where}`,
      hint: expect.stringContaining("hookspool init"),
    });
    // HOOKSPOOL_HOME is where it looks too
    const env = await cli(["check"], { env: { HOOKSPOOL_HOME: home } });
    expect(env.code).toBe(2);
    expect(env.out).toContain(`no config file at ${where}`);
  });

  test("a home or spool open to group/other is a warning with the chmod that fixes it", async () => {
    const h = await initHome();
    chmodSync(h.home, 0o755);
    chmodSync(h.db, 0o644);
    writeFileSync(`${h.db}-wal`, "", { mode: 0o640 });
    chmodSync(`${h.db}-wal`, 0o640);
    const r = await run(h, ["check"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out.trimEnd().split("\n")).toEqual([
      `warning: spool.home: ${h.home} is open to group/other (mode 0755); it holds the spool (chmod 700 ${h.home})`,
      `warning: spool.db: ${h.db} is open to group/other (mode 0644); it holds every payload (chmod 600 ${h.db})`,
      `warning: spool.db: ${h.db}-wal is open to group/other (mode 0640); it holds every payload ` +
        `(chmod 600 ${h.db}-wal)`,
      `${h.config}: 0 errors, 3 warnings`,
    ]);
    chmodSync(h.home, 0o700);
    chmodSync(h.db, 0o600);
    // the check's own look at the database checkpointed and removed that -wal
    expect(existsSync(`${h.db}-wal`)).toBe(false);
    expect((await run(h, ["check"])).out).toBe(`${h.config}: 0 errors, 0 warnings\n`);
  });
});

test("no secret value appears in any output", async () => {
  const h = await initHome();
  const secretFile = join(h.home, "secrets", "demo");
  writeFileSync(secretFile, `${SENTINEL}\n`);
  chmodSync(secretFile, 0o644);
  writeFileSync(join(h.home, "subs.json"), JSON.stringify({ other: { secret: SENTINEL } }));
  appendFileSync(
    h.config,
    `
[hermes]
subscriptions_path = "~/subs.json"

[sources.env]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { env = "DEMO_TOKEN" }
action = "hermes:missing"

[destinations.web]
type = "http"
url = "https://example.invalid/hook"
secret = { env = "DEMO_TOKEN" }
`,
  );
  const env = { DEMO_TOKEN: `whsec_${SENTINEL}` };
  const runs = [
    await run(h, ["check"], env),
    await run(h, ["--json", "check"], env),
    await run(h, ["reload"], env),
    await run(h, ["--json", "reload"], env),
  ];
  for (const r of runs) {
    expect(r.code).toBe(2);
    expect(r.out + r.err).not.toContain(SENTINEL);
  }
  expect(runs[0].out).toContain("readable by group/other");
  expect(runs[0].out).toContain("env references do not rotate");
  expect(readFileSync(secretFile, "utf8")).toContain(SENTINEL);
});

describe("pacing in check", () => {
  test("says which rate each paced destination is delivered at, and where it comes from", async () => {
    const h = await initHome();
    const subs = join(h.home, "subs.json");
    writeFileSync(
      subs,
      JSON.stringify({ ci: { secret: "s3cret-route" }, busy: { secret: "s3cret-route", rate_limit: 12 } }),
    );
    appendFileSync(
      h.config,
      `
[hermes]
subscriptions_path = "~/subs.json"
rate_limit = 20

[sources.a]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "secrets/demo" }
action = "hermes:ci"

[[routes]]
name = "busy"
source = "a"
tee = true
destination = "hermes:busy"

[[routes]]
name = "web"
source = "a"
tee = true
destination = "web"

[destinations.web]
type = "http"
url = "https://example.invalid/hook"
unsigned = true
rate = "5/s"
`,
    );
    const r = await run(h, ["check"], { HOME: h.home });
    expect(r.out).toContain(
      "info: destination hermes:ci: paced at 20 per 60 s, from the gateway's rate_limit ([hermes] rate_limit = 20)\n",
    );
    expect(r.out).toContain(`destination hermes:busy: paced at 12 per 60 s, from the route's rate_limit in ${subs}\n`);
    expect(r.out).toContain("destination web: paced at 5 per 1 s, from its rate\n");
    // The demo script is not paced, and says nothing.
    expect(r.out).not.toContain("destination script:demo-log");
  });

  test("a rate that does not parse is a one-line error naming the key", async () => {
    const h = await initHome();
    appendFileSync(
      h.config,
      '\n[destinations.web]\ntype = "http"\nurl = "https://example.invalid/hook"\nunsigned = true\n' +
        'rate = "thirty a minute"\n',
    );
    const r = await run(h, ["check"]);
    expect(r.code).toBe(2);
    expect(r.out).toContain('error: destinations.web.rate: "thirty a minute" is not a rate: write N/<window>');
  });
});

describe("hookspool reload", () => {
  const OLD = 1_000_000;

  test("touches the config when the check passes, and says so", async () => {
    const h = await initHome();
    utimesSync(h.config, OLD, OLD);
    const before = Date.now();
    const r = await run(h, ["reload"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out).toContain(`touched ${h.config}`);
    const mtime = statSync(h.config).mtimeMs;
    expect(mtime).toBeGreaterThanOrEqual(before - 1000);
    expect(mtime).toBeLessThanOrEqual(Date.now() + 1000);
  });

  test("leaves the config alone when the check fails: exit 2, the errors printed", async () => {
    const h = await initHome();
    appendFileSync(h.config, BROKEN);
    utimesSync(h.config, OLD, OLD);
    const r = await run(h, ["reload"]);
    expect(r.code).toBe(2);
    expect(r.out).toContain("error: routes[0].destination");
    expect(r.out).toContain("not reloaded");
    expect(statSync(h.config).mtimeMs).toBe(OLD * 1000);
  });

  test("--json says whether it reloaded", async () => {
    const h = await initHome();
    expect(JSON.parse((await run(h, ["--json", "reload"])).out)).toMatchObject({
      reloaded: true,
      config: h.config,
      problems: [],
    });
  });

  test("exit 1 when there is no config file", async () => {
    const home = join(tempDir(), "empty");
    const r = await cli(["--home", home, "reload"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("no config file to reload");
  });
});
