// The CLI frame: --help everywhere, global flags anywhere, exit codes 0/1/2/3, one line per
// error (or one JSON object with --json).
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json";
import { makeCli } from "../../src/cli/context.ts";
import { rootCommand, runCli } from "../../src/cli/root.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { enqueueJson, initHome, inHome, oneErrorLine } from "./home.ts";
import { LATEST_SCHEMA } from "../../src/store/sqlite/migrate.ts";

const io = { out() {}, err() {}, readStdin: async () => new Uint8Array(), env: {}, cwd: "/", isTTY: false };
const COMMANDS = Object.keys(rootCommand(makeCli(io, { json: false })).subCommands as object);

describe("--help", () => {
  test("the root lists every command", async () => {
    for (const flag of ["--help", "-h"]) {
      const r = await cli([flag]);
      expect(r).toMatchObject({ code: 0, err: "" });
      expect(r.out).toStartWith("hookspool - a durable, coalescing intake for inbound webhooks\n");
      expect(r.out).toContain("\nUsage: hookspool <command> [options]\n");
      for (const name of ["init", "migrate", "enqueue", "list", "show", "status"]) expect(r.out).toContain(name);
    }
    expect(COMMANDS).toEqual(
      expect.arrayContaining(["init", "migrate", "enqueue", "list", "show", "status", "intake", "dispatch", "run"]),
    );
  });

  test.each(COMMANDS)("%s --help and -h exit 0, touch nothing, need no config", async (name) => {
    const parent = tempDir();
    const home = join(parent, "home");
    mkdirSync(home);
    writeFileSync(join(home, "config.toml"), "[intake]\nmax_body_bytes = false\n");
    for (const flag of ["--help", "-h"]) {
      const r = await cli(["--home", home, name, flag]);
      expect({ flag, code: r.code, err: r.err }).toEqual({ flag, code: 0, err: "" });
      expect(r.out).toStartWith(`hookspool ${name} - `);
      expect(r.out).toContain(`\nUsage: hookspool ${name}`);
      expect(r.out).toContain("\nGlobal options:\n  --home <dir>");
      expect(r.out).not.toMatch(/\u001b\[/);
    }
    expect(readdirSync(home)).toEqual(["config.toml"]);
  });

  test("help on a terminal may be coloured; the same words are there", async () => {
    const r = await cli(["list", "--help"], { tty: true });
    expect(r.code).toBe(0);
    expect(r.out.replace(/\u001b\[\d+m/g, "")).toContain("Usage: hookspool list");
  });
});

describe("usage errors are exit 2 with one line", () => {
  test("an unknown option, after or before the command", async () => {
    const h = await initHome();
    for (const argv of [
      ["list", "--bogus"],
      ["enqueue", "--source", "demo", "--key", "k", "--sauce", "x"],
      ["show", "1", "--payloads"],
      ["--bogus", "list"],
      ["--bogus"],
    ]) {
      const r = await inHome(h, argv, { stdin: "{}" });
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(oneErrorLine(r.err)).toMatch(/unknown option --(bogus|sauce|payloads)/);
      expect(r.out).toBe("");
    }
    expect((await inHome(h, ["list", "--json"])).out).toBe("[]\n");
  });

  test("an unknown command", async () => {
    const r = await cli(["frob", "--home", tempDir()]);
    expect(r.code).toBe(2);
    expect(oneErrorLine(r.err)).toContain("unknown command frob");
    expect(r.out).toBe("");
  });

  test("a stray argument is not silently ignored", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", {});
    for (const argv of [
      ["list", "dead"],
      ["show", "1", "2"],
      ["status", "now"],
      ["migrate", "please"],
    ]) {
      const r = await inHome(h, argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(oneErrorLine(r.err)).toContain(`unexpected argument ${argv[argv.length - 1]}`);
      expect(r.out).toBe("");
    }
  });

  test("no command prints usage and exits 2", async () => {
    const r = await cli([]);
    expect(r.code).toBe(2);
    expect(r.out).toContain("Usage: hookspool <command>");
  });

  test("a required argument or a flag's value missing", async () => {
    const h = await initHome();
    const noSource = await inHome(h, ["enqueue", "--key", "k"], { stdin: "{}" });
    expect(noSource.code).toBe(2);
    expect(oneErrorLine(noSource.err)).toContain("--source");
    const noHome = await cli(["list", "--home"]);
    expect(noHome.code).toBe(2);
    expect(oneErrorLine(noHome.err)).toContain("--home needs a value");
  });
});

describe("global flags", () => {
  test("--home works before and after the command, and as --home=DIR", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", {});
    for (const argv of [
      ["--home", h.home, "list"],
      ["list", "--home", h.home],
      [`--home=${h.home}`, "list"],
      ["list", `--home=${h.home}`],
    ]) {
      const r = await cli(argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 0 });
      expect(r.out).toMatch(/^1\s+open\s+demo/m);
    }
  });

  test("HOOKSPOOL_HOME is used without --home; --home wins over it", async () => {
    const h = await initHome();
    const other = await initHome();
    await enqueueJson(h, "demo", "in-h", {});
    await enqueueJson(other, "demo", "in-other", {});
    const env = await cli(["list"], { env: { HOOKSPOOL_HOME: h.home } });
    expect(env.out).toContain("in-h");
    const flag = await cli(["list", "--home", other.home], { env: { HOOKSPOOL_HOME: h.home } });
    expect(flag.out).toContain("in-other");
    expect(flag.out).not.toContain("in-h");
  });

  test("--json works before and after the command", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", {});
    // No dispatcher has run in this home, so status reports a problem: exit 1, document printed.
    for (const [argv, code, check] of [
      [["--json", "list"], 0, (d: unknown) => expect(d).toHaveLength(1)],
      [["list", "--json"], 0, (d: unknown) => expect(d).toHaveLength(1)],
      [["--json", "status"], 1, (d: unknown) => expect(d).toHaveProperty("schema", LATEST_SCHEMA)],
      [["status", "--json"], 1, (d: unknown) => expect(d).toHaveProperty("schema", LATEST_SCHEMA)],
      [["--json", "show", "1"], 0, (d: unknown) => expect(d).toHaveProperty("batch.id", 1)],
      [["show", "1", "--json"], 0, (d: unknown) => expect(d).toHaveProperty("batch.id", 1)],
    ] as [string[], number, (d: unknown) => void][]) {
      const r = await inHome(h, argv);
      expect({ argv, code: r.code }).toEqual({ argv, code });
      check(JSON.parse(r.out));
    }
  });

  test("--version prints the package version", async () => {
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+/);
    for (const argv of [["--version"], ["-v"], ["--json", "--version"]]) {
      const r = await cli(argv);
      expect({ argv, code: r.code, out: r.out, err: r.err }).toEqual({
        argv,
        code: 0,
        out: `${pkg.version}\n`,
        err: "",
      });
    }
  });
});

describe("hookspool version", () => {
  test("prints what --version prints; --json gives an object", async () => {
    const plain = await cli(["--version"]);
    for (const argv of [["version"], ["version", "--home", tempDir()]]) {
      const r = await cli(argv);
      expect({ argv, ...r }).toEqual({ argv, code: 0, out: plain.out, err: "" });
    }
    expect(plain.out).toBe(`${pkg.version}\n`);
    for (const argv of [
      ["--json", "version"],
      ["version", "--json"],
    ]) {
      const r = await cli(argv);
      expect({ argv, code: r.code, err: r.err }).toEqual({ argv, code: 0, err: "" });
      expect(r.out).toBe(`${JSON.stringify({ version: pkg.version })}\n`);
    }
    const extra = await cli(["version", "2"]);
    expect(extra.code).toBe(2);
    expect(oneErrorLine(extra.err)).toContain("unexpected argument 2");
  });
});

describe("--json errors are one object on stdout", () => {
  /** Exactly one line on stdout, a JSON object; nothing on stderr. */
  const jsonError = (r: { code: number; out: string; err: string }) => {
    expect(r.err).toBe("");
    expect(r.out.endsWith("\n") && !r.out.slice(0, -1).includes("\n")).toBe(true);
    return JSON.parse(r.out);
  };

  test("a command's error keeps its exit code; the hint is there only when there is one", async () => {
    const h = await initHome();
    const missing = await inHome(h, ["--json", "show", "99"]);
    expect(missing.code).toBe(1);
    expect(jsonError(missing)).toEqual({ error: "no batch 99", code: "E_NOT_FOUND" });
    const noSpool = await cli(["--json", "list", "--home", join(tempDir(), "none")]);
    expect(noSpool.code).toBe(2);
    expect(jsonError(noSpool)).toMatchObject({
      code: "E_SCHEMA",
      error: expect.stringContaining("no spool database"),
      hint: "run hookspool init or hookspool migrate first",
    });
    // the same error without --json: one line on stderr, nothing on stdout
    const human = await inHome(h, ["show", "99"]);
    expect(human).toMatchObject({ code: 1, out: "" });
    expect(oneErrorLine(human.err)).toBe("hookspool: no batch 99");
  });

  test("usage errors: an unknown command or option, a missing argument or value, a bare group", async () => {
    const h = await initHome();
    const cases: [string[], Record<string, unknown>][] = [
      [["--json", "frob"], { error: "unknown command frob", code: "E_USAGE", hint: "see hookspool --help" }],
      [["list", "--json", "--bogus"], { error: "unknown option --bogus", code: "E_USAGE", hint: "see --help" }],
      [["list", "dead", "--json"], { error: "unexpected argument dead", code: "E_USAGE", hint: "see --help" }],
      [
        ["--json", "show"],
        { error: "Missing required positional argument: BATCH", code: "E_USAGE", hint: "see --help" },
      ],
      [["--json", "show", "x"], { error: 'batch must be a positive integer, got "x"', code: "E_USAGE" }],
      [["--json", "list", "--home"], { error: "--home needs a value", code: "E_USAGE" }],
      [
        ["--json", "source"],
        { error: "hookspool source needs a command", code: "E_USAGE", hint: "see hookspool source --help" },
      ],
      [["--json"], { error: "hookspool needs a command", code: "E_USAGE", hint: "see hookspool --help" }],
    ];
    for (const [argv, doc] of cases) {
      const r = await inHome(h, argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect({ argv, doc: jsonError(r) }).toEqual({ argv, doc });
    }
  });

  test("a config error carries its file, key and every problem", async () => {
    const home = tempDir();
    const file = join(home, "config.toml");
    writeFileSync(file, '[intake]\nmax_body_bytes = "big"\nlisten = 7\n');
    const r = await cli(["--home", home, "--json", "migrate"]);
    expect(r.code).toBe(2);
    const doc = jsonError(r);
    expect(doc).toEqual({
      error: "expected an integer, got a string",
      code: "E_CONFIG",
      file,
      key: "intake.max_body_bytes",
      problems: [
        { level: "error", key: "intake.max_body_bytes", message: "expected an integer, got a string" },
        { level: "error", key: "intake.listen", message: "expected a string, got a number" },
      ],
    });
    expect(existsSync(join(home, "spool.db"))).toBe(false);
  });

  test("a bug still prints its stack on stderr, and the object says E_INTERNAL", async () => {
    const h = await initHome();
    for (const json of [true, false]) {
      let out = "";
      let err = "";
      const broken = {
        out: (t: string) => void (out += `${t}\n`),
        err: (t: string) => void (err += `${t}\n`),
        readStdin: async () => {
          throw new TypeError("stdin went away");
        },
        env: { PATH: process.env.PATH },
        cwd: process.cwd(),
        isTTY: false,
      };
      const code = await runCli(
        ["--home", h.home, ...(json ? ["--json"] : []), "enqueue", "--source", "demo", "--key", "k"],
        broken,
      );
      expect({ json, code }).toEqual({ json, code: 1 });
      expect(err).toStartWith("hookspool: internal error: TypeError: stdin went away\n    at ");
      expect(out).toBe(json ? `${JSON.stringify({ error: "stdin went away", code: "E_INTERNAL" })}\n` : "");
    }
  });
});

describe("config errors are exit 2 with one line naming the file and the key", () => {
  const badHome = (toml: string) => {
    const home = tempDir();
    writeFileSync(join(home, "config.toml"), toml);
    return home;
  };

  test("a value of the wrong type, for every command that needs the config", async () => {
    const home = badHome('[intake]\nmax_body_bytes = "big"\n');
    const file = join(home, "config.toml");
    for (const argv of [
      ["migrate"],
      ["enqueue", "--source", "demo", "--key", "k"],
      ["replay", "1"],
      ["metrics"],
      ["prune"],
    ]) {
      const r = await cli(["--home", home, ...argv], { stdin: "{}" });
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(oneErrorLine(r.err)).toBe(`hookspool: ${file}: intake.max_body_bytes: expected an integer, got a string`);
    }
    expect(existsSync(join(home, "spool.db"))).toBe(false);
  });

  test("a nested key path", async () => {
    const home = badHome('[sources.gh]\naction = "hermes:gh"\nquiet_s = "soon"\n');
    const r = await cli(["--home", home, "migrate"]);
    expect(r.code).toBe(2);
    expect(oneErrorLine(r.err)).toBe(
      `hookspool: ${join(home, "config.toml")}: sources.gh.quiet_s: expected a number, got a string`,
    );
  });

  test("TOML that does not parse names the file and the line", async () => {
    const home = badHome("[intake\nlisten = 1\n");
    const r = await cli(["--home", home, "migrate"]);
    expect(r.code).toBe(2);
    const line = oneErrorLine(r.err);
    expect(line).toContain(join(home, "config.toml"));
    expect(line).toContain("line 1");
    expect(line).toContain("invalid TOML");
    expect(existsSync(join(home, "spool.db"))).toBe(false);
  });

  test("--config naming a missing file", async () => {
    const home = tempDir();
    const missing = join(home, "nope.toml");
    const r = await cli(["--home", home, "--config", missing, "list"]);
    expect(r.code).toBe(2);
    expect(oneErrorLine(r.err)).toContain(missing);
  });
});

describe("config warnings", () => {
  test("an unknown key is a warning on stderr at run time, and the command still runs", async () => {
    const home = tempDir();
    expect((await cli(["--home", home, "migrate"])).code).toBe(0);
    writeFileSync(join(home, "config.toml"), "[dispatch]\nparalel = 2\n");
    const r = await cli(["--home", home, "list", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual([]);
    expect(r.err).toContain("warning:");
    expect(r.err).toContain("dispatch.paralel: unknown key (did you mean parallel?)");
  });
});

describe("a verb that names a source or an instance, and no config file", () => {
  test("says there is no config, and where it looked, rather than that the name is missing", async () => {
    const home = tempDir();
    expect((await cli(["--home", home, "migrate"])).code).toBe(0);
    const capture = join(home, "req.http");
    writeFileSync(capture, "POST /hooks/gh HTTP/1.1\nContent-Type: application/json\n\n{}\n");
    const verbs: [string[], string?][] = [
      [["send", "gh", "--data", "{}"]],
      [["source", "test", "gh", "--request", capture]],
      [["source", "arm", "gh"]],
      [["enqueue", "--source", "gh", "--key", "k"], "{}"],
      [["route", "test", "--source", "gh", "--request", capture]],
      [["bobbin", "expand", "gh"]],
      [["bobbin", "expand"]],
      [["sweep", "gh", "--repo", "o/r", "--hook", "1"]],
    ];
    for (const [argv, stdin] of verbs) {
      const r = await cli(["--home", home, ...argv], { stdin });
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect({ argv, line: oneErrorLine(r.err) }).toEqual({
        argv,
        line: expect.stringContaining(`no config file at ${join(home, "config.toml")}`),
      });
    }
  });
});

describe("root in a home another user owns", () => {
  test("a warning before the command runs; none for root's own home or another user's run", async () => {
    const { foreignHome } = await import("../../src/cli/context.ts");
    const home = tempDir();
    expect(foreignHome(1000, home)).toBeNull();
    expect(foreignHome(0, join(home, "missing"))).toBeNull();
    if (process.getuid?.() !== 0) return;
    expect(foreignHome(0, home)).toBeNull();
    const { chownSync } = await import("node:fs");
    expect((await cli(["--home", home, "migrate"])).code).toBe(0);
    chownSync(home, 54321, 54321);
    const r = await cli(["--home", home, "list"]);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`hookspool: warning: running as root in ${home}, which uid 54321 owns`);
    expect(r.err).toContain("sudo -u '#54321' hookspool");
  });
});
