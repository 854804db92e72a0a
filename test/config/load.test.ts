// loadConfig: which file is read and where home, the database and the lock live
// (a CLI flag, then env, then config, then the default; the database is relative to home).
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig, resolvePaths } from "../../src/config/load.ts";
import { HookspoolError } from "../../src/errors.ts";
import { tempDir } from "../helpers/tmp.ts";
import { clean, thrownBy } from "./support.ts";

/** A directory holding a config.toml with `text`. */
function homeWith(text: string): string {
  const dir = tempDir();
  writeFileSync(join(dir, "config.toml"), text);
  return dir;
}

const PARALLEL_9 = "[dispatch]\nparallel = 9\n";

describe("home", () => {
  test("--home wins over HOOKSPOOL_HOME, and the config is looked for in the flag's home", () => {
    const flagHome = tempDir();
    const envHome = homeWith(PARALLEL_9);
    const { paths, config } = loadConfig({ home: flagHome, env: { HOOKSPOOL_HOME: envHome } });
    expect(paths.home).toBe(flagHome);
    expect(paths.config).toBeNull();
    expect(config.dispatch.parallel).toBe(4);
  });

  test("HOOKSPOOL_HOME is used without a flag: its config.toml is read", () => {
    const envHome = homeWith(PARALLEL_9);
    const { paths, config } = loadConfig({ env: { HOOKSPOOL_HOME: envHome } });
    expect(paths.home).toBe(envHome);
    expect(paths.config).toBe(join(envHome, "config.toml"));
    expect(config.dispatch.parallel).toBe(9);
  });

  test("HOOKSPOOL_HOME wins over spool.home in the file", () => {
    const envHome = homeWith('[spool]\nhome = "/srv/elsewhere"\n');
    expect(loadConfig({ env: { HOOKSPOOL_HOME: envHome } }).paths.home).toBe(envHome);
  });

  test("spool.home in the file wins over the default", () => {
    const dir = homeWith('[spool]\nhome = "/srv/spool-home"\n');
    const { paths } = loadConfig({ config: join(dir, "config.toml"), env: {} });
    expect(paths.home).toBe("/srv/spool-home");
    expect(paths.spoolFile).toBe("/srv/spool-home/spool.db");
  });

  test("a relative spool.home is relative to the config file's directory", () => {
    const dir = homeWith('[spool]\nhome = "state"\n');
    expect(loadConfig({ config: join(dir, "config.toml"), env: {}, cwd: "/" }).paths.home).toBe(join(dir, "state"));
  });

  test("a ~ in spool.home is the user's home directory", () => {
    const dir = homeWith('[spool]\nhome = "~/hookspool"\n');
    expect(loadConfig({ config: join(dir, "config.toml"), env: { HOME: "/home/ops" } }).paths.home).toBe(
      "/home/ops/hookspool",
    );
  });

  test("a relative --home is relative to the working directory", () => {
    const cwd = tempDir();
    mkdirSync(join(cwd, "h"));
    writeFileSync(join(cwd, "h", "config.toml"), PARALLEL_9);
    const { paths, config } = loadConfig({ home: "h", env: {}, cwd });
    expect(paths.home).toBe(join(cwd, "h"));
    expect(config.dispatch.parallel).toBe(9);
  });

  test("nothing set: /var/lib/hookspool, with spool.db and dispatch.lock in it", () => {
    const paths = resolvePaths(clean(""), { env: {}, cwd: "/tmp" }, null);
    expect(paths).toEqual({
      home: "/var/lib/hookspool",
      config: null,
      spoolFile: "/var/lib/hookspool/spool.db",
      lock: "/var/lib/hookspool/dispatch.lock",
    });
  });
});

describe("config file", () => {
  test("--config wins over HOOKSPOOL_CONFIG and over the home's config.toml", () => {
    const home = homeWith("[dispatch]\nparallel = 5\n");
    const envFile = join(homeWith("[dispatch]\nparallel = 6\n"), "config.toml");
    const flagFile = join(homeWith("[dispatch]\nparallel = 7\n"), "config.toml");
    const loaded = loadConfig({ home, config: flagFile, env: { HOOKSPOOL_CONFIG: envFile } });
    expect(loaded.paths.config).toBe(flagFile);
    expect(loaded.config.dispatch.parallel).toBe(7);
  });

  test("HOOKSPOOL_CONFIG wins over the home's config.toml, and does not move home", () => {
    const home = homeWith("[dispatch]\nparallel = 5\n");
    const envFile = join(homeWith("[dispatch]\nparallel = 6\n"), "config.toml");
    const loaded = loadConfig({ home, env: { HOOKSPOOL_CONFIG: envFile } });
    expect(loaded.paths.config).toBe(envFile);
    expect(loaded.config.dispatch.parallel).toBe(6);
    expect(loaded.paths.home).toBe(home);
  });

  test("a relative --config is relative to the working directory", () => {
    const cwd = homeWith(PARALLEL_9);
    const loaded = loadConfig({ config: "config.toml", env: {}, cwd });
    expect(loaded.paths.config).toBe(join(cwd, "config.toml"));
    expect(loaded.config.dispatch.parallel).toBe(9);
  });

  test("no config.toml at the default place means every default, and no file to watch", () => {
    const home = tempDir();
    const loaded = loadConfig({ home, env: {} });
    // Every default, with its one path made absolute (~ is the user's home).
    const defaults = clean("");
    expect(loaded.config).toEqual({
      ...defaults,
      hermes: { ...defaults.hermes, subscriptions_path: join(homedir(), ".hermes", "webhook_subscriptions.json") },
    });
    expect(loaded.paths.config).toBeNull();
    expect(loaded.mtimeMs).toBeNull();
    expect(loaded.problems).toEqual([]);
  });

  test("a file that was read reports its mtime for reload-on-change", () => {
    const home = homeWith(PARALLEL_9);
    const { mtimeMs } = loadConfig({ home, env: {} });
    expect(typeof mtimeMs).toBe("number");
    expect(mtimeMs).toBeGreaterThan(0);
  });

  test.each([
    ["--config", (missing: string) => ({ config: missing, env: {} })],
    ["HOOKSPOOL_CONFIG", (missing: string) => ({ env: { HOOKSPOOL_CONFIG: missing } })],
  ])("a file named by %s that does not exist is an E_CONFIG error naming it", (_how, opts) => {
    const missing = join(tempDir(), "nope.toml");
    const e = thrownBy(HookspoolError, () => loadConfig({ home: tempDir(), ...opts(missing) }));
    expect(e.code).toBe("E_CONFIG");
    expect(e.exitCode).toBe(2);
    expect(e.file).toBe(missing);
    expect(e.describe()).toContain(missing);
  });

  test("a config path that cannot be read (a directory) is an E_CONFIG error", () => {
    const dir = tempDir();
    const e = thrownBy(HookspoolError, () => loadConfig({ config: dir, env: {} }));
    expect(e.code).toBe("E_CONFIG");
    expect(e.file).toBe(dir);
  });

  test("an invalid file is a ConfigError naming the file that was read", () => {
    const home = homeWith('[dispatch]\nparallel = "many"\n');
    const e = thrownBy(ConfigError, () => loadConfig({ home, env: {} }));
    expect(e.file).toBe(join(home, "config.toml"));
    expect(e.key).toBe("dispatch.parallel");
  });

  test("strict turns the warnings of a file into errors", () => {
    const home = homeWith("[dispatch]\nparalel = 8\n");
    expect(loadConfig({ home, env: {} }).problems.map((p) => p.key)).toEqual(["dispatch.paralel"]);
    const e = thrownBy(ConfigError, () => loadConfig({ home, env: {}, strict: true }));
    expect(e.key).toBe("dispatch.paralel");
  });
});

describe("database and lock", () => {
  test("the default database is spool.db in home, with dispatch.lock beside it", () => {
    const home = tempDir();
    const { paths } = loadConfig({ home, env: {} });
    expect(paths.spoolFile).toBe(join(home, "spool.db"));
    expect(paths.lock).toBe(join(home, "dispatch.lock"));
  });

  test("a relative spool.db is relative to home, not to the config file or the working directory", () => {
    const configDir = homeWith('[spool]\ndb = "data/hooks.db"\n');
    const home = tempDir();
    const { paths } = loadConfig({ home, config: join(configDir, "config.toml"), env: {}, cwd: "/" });
    expect(paths.spoolFile).toBe(join(home, "data", "hooks.db"));
  });

  test("an absolute spool.db is kept, and the lock moves with it", () => {
    const home = homeWith('[spool]\ndb = "/srv/db/hooks.db"\n');
    const { paths } = loadConfig({ home, env: {} });
    expect(paths.home).toBe(home);
    expect(paths.spoolFile).toBe("/srv/db/hooks.db");
    expect(paths.lock).toBe("/srv/db/dispatch.lock");
  });

  test("HOOKSPOOL_DB wins over spool.db", () => {
    const home = homeWith('[spool]\ndb = "from-config.db"\n');
    const { paths } = loadConfig({ home, env: { HOOKSPOOL_DB: "/srv/env/from-env.db" } });
    expect(paths.spoolFile).toBe("/srv/env/from-env.db");
    expect(paths.lock).toBe("/srv/env/dispatch.lock");
  });

  test("the database follows home when home comes from the flag", () => {
    const home = tempDir();
    const { paths } = loadConfig({ home, env: { HOOKSPOOL_HOME: "/srv/other" } });
    expect(paths.spoolFile).toBe(join(home, "spool.db"));
  });
});

describe("paths in the config", () => {
  test("are relative to config.toml's directory, not to where the process starts; ~ is HOME", () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, "config.toml"),
      `[sources.a]
module = "plugins/a.ts"
secrets.secret = { file = "secrets/a" }
secrets.other = { env_file = "env/a.env", key = "K" }
secrets.env = { env = "NAME" }

[destinations."script:s"]
argv = ["bin/run.sh", "arg/not/a/path"]
cwd = "work"
env_file = "env/s.env"
state_dir = "~/state"

[destinations."script:bare"]
argv = ["logger", "x"]

[destinations.web]
url = "https://example.invalid/h"
secret = { file = "secrets/web" }
secret_previous = [{ file = "/abs/old" }, { env_file = "env/w.env", key = "W" }]

[sources.rotating]
secrets.secret = [{ file = "secrets/new" }, { file = "secrets/old", until = "2026-12-08T00:00:00Z" }]

[sources.office]
action = "web"
pull = { url = "https://hooks.example.org", destination = "laptop", token = { file = "secrets/pull" } }

[destinations."pull:laptop"]
token = [{ file = "secrets/laptop" }, { file = "/abs/laptop.old" }]

[hermes]
subscriptions_path = "hermes/subs.json"

[alerts]
argv = ["./alert.sh", "--now"]
`,
    );
    const { config } = loadConfig({ home: dir, env: { HOME: "/home/u" }, cwd: "/somewhere/else" });
    expect(config.sources.a.module).toBe(join(dir, "plugins/a.ts"));
    expect(config.sources.a.secrets).toEqual({
      secret: { file: join(dir, "secrets/a") },
      other: { env_file: join(dir, "env/a.env"), key: "K" },
      env: { env: "NAME" },
    });
    // A relative program runs from the script's cwd, as from a shell there; a bare name is looked up on PATH.
    expect(config.destinations["script:s"]).toMatchObject({
      argv: [join(dir, "work/bin/run.sh"), "arg/not/a/path"],
      cwd: join(dir, "work"),
      env_file: join(dir, "env/s.env"),
      state_dir: "/home/u/state",
    });
    expect(config.destinations["script:bare"].argv).toEqual(["logger", "x"]);
    expect(config.destinations.web.secret).toEqual({ file: join(dir, "secrets/web") });
    expect(config.destinations.web.secret_previous).toEqual([
      { file: "/abs/old" },
      { env_file: join(dir, "env/w.env"), key: "W" },
    ]);
    // A rotation's list keeps each entry's until; pull's tokens are anchored as any secret is.
    expect(config.sources.rotating.secrets?.secret).toEqual([
      { file: join(dir, "secrets/new") },
      { file: join(dir, "secrets/old"), until: Date.parse("2026-12-08T00:00:00Z") / 1000 },
    ]);
    expect(config.sources.office.pull?.token).toEqual({ file: join(dir, "secrets/pull") });
    expect(config.destinations["pull:laptop"].token).toEqual([
      { file: join(dir, "secrets/laptop") },
      { file: "/abs/laptop.old" },
    ]);
    expect(config.hermes.subscriptions_path).toBe(join(dir, "hermes/subs.json"));
    expect(config.alerts.argv).toEqual([join(dir, "alert.sh"), "--now"]);
  });
});
