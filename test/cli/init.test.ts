// hookspool init: the starter home a newcomer (and a real deployment) begins with.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { makeDestination } from "../../src/destinations/registry.ts";
import { makeCtx } from "../destinations/support.ts";
import { MAIN, startHookspool } from "../helpers/proc.ts";
import { loadConfig } from "../../src/config/load.ts";
import { acquireLock } from "../../src/lock.ts";
import { LATEST_SCHEMA } from "../../src/store/sqlite/migrate.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { metaValue, oneErrorLine, userVersion } from "./home.ts";

const mode = (path: string) => statSync(path).mode & 0o777;

async function init(argv: string[] = []) {
  const home = join(tempDir(), "home");
  const r = await cli(["--home", home, "init", ...argv]);
  return { home, r };
}

describe("init", () => {
  test("writes a private home: config, demo secret, demo script, spool", async () => {
    const { home, r } = await init();
    expect(r.code).toBe(0);
    expect(r.err).toBe("");
    expect(r.out).toContain(join(home, "config.toml"));
    expect(mode(home)).toBe(0o700);
    expect(mode(join(home, "config.toml"))).toBe(0o600);
    expect(mode(join(home, "secrets"))).toBe(0o700);
    expect(mode(join(home, "secrets", "demo"))).toBe(0o600);
    expect(readFileSync(join(home, "secrets", "demo"), "utf8").trim()).toMatch(/^[0-9a-f]{48}$/);
    const script = join(home, "scripts", "append-batch.sh");
    expect(mode(script) & 0o100).toBe(0o100);
    expect(readFileSync(script, "utf8")).toStartWith("#!/bin/sh\n");
    expect(mode(join(home, "spool.db"))).toBe(0o600);
  });

  test("tightens an existing home directory to 0700", async () => {
    const home = join(tempDir(), "home");
    mkdirSync(home, { mode: 0o755 });
    expect(mode(home)).toBe(0o755);
    const r = await cli(["init", "--home", home]);
    expect(r.code).toBe(0);
    expect(mode(home)).toBe(0o700);
  });

  test("migrates the spool to the latest schema; user_version and meta agree", async () => {
    const { home, r } = await init();
    expect(r.code).toBe(0);
    const db = join(home, "spool.db");
    expect(LATEST_SCHEMA).toBe(14);
    expect(userVersion(db)).toBe(14);
    expect(metaValue(db, "schema_version")).toBe(String(LATEST_SCHEMA));
    expect(metaValue(db, "instance_id")).toMatch(/^[0-9a-f]{12}$/);
  });

  test("instance_id is minted once: a later migrate keeps it", async () => {
    const { home } = await init();
    const db = join(home, "spool.db");
    const before = metaValue(db, "instance_id");
    expect(before).not.toBeNull();
    expect((await cli(["--home", home, "migrate"])).code).toBe(0);
    expect(metaValue(db, "instance_id")).toBe(before);
  });

  test("--json says where everything went", async () => {
    const home = join(tempDir(), "home");
    const r = await cli(["--home", home, "--json", "init"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      home,
      config: join(home, "config.toml"),
      db: join(home, "spool.db"),
      schema: LATEST_SCHEMA,
    });
  });

  test("HOOKSPOOL_HOME names the home when --home is absent", async () => {
    const home = join(tempDir(), "from-env");
    const r = await cli(["init"], { env: { HOOKSPOOL_HOME: home } });
    expect(r.code).toBe(0);
    expect(existsSync(join(home, "config.toml"))).toBe(true);
  });

  test("the written config loads without a single warning, even strictly", async () => {
    const { home } = await init();
    const loaded = loadConfig({ home, env: {} });
    expect(loaded.problems).toEqual([]);
    expect(loaded.paths.config).toBe(join(home, "config.toml"));
    expect(Object.keys(loaded.config.sources)).toEqual(["demo"]);
    expect(() => loadConfig({ home, env: {}, strict: true })).not.toThrow();
  });

  test("refuses to overwrite an existing config.toml (exit 1) and changes nothing", async () => {
    const { home } = await init();
    const config = join(home, "config.toml");
    writeFileSync(config, `${readFileSync(config, "utf8")}\n# mine\n`);
    const secret = readFileSync(join(home, "secrets", "demo"), "utf8");
    const r = await cli(["--home", home, "init"]);
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.err)).toContain("already exists");
    expect(r.err).toContain("--force");
    expect(readFileSync(config, "utf8")).toEndWith("# mine\n");
    expect(readFileSync(join(home, "secrets", "demo"), "utf8")).toBe(secret);
  });

  test("--force rewrites the config but keeps the secret and the spool's identity", async () => {
    const { home } = await init();
    const config = join(home, "config.toml");
    writeFileSync(config, "# mine\n");
    const secret = readFileSync(join(home, "secrets", "demo"), "utf8");
    const id = metaValue(join(home, "spool.db"), "instance_id");
    const r = await cli(["--home", home, "init", "--force"]);
    expect(r.code).toBe(0);
    expect(readFileSync(config, "utf8")).toContain("[sources.demo]");
    expect(mode(config)).toBe(0o600);
    expect(readFileSync(join(home, "secrets", "demo"), "utf8")).toBe(secret);
    expect(metaValue(join(home, "spool.db"), "instance_id")).toBe(id);
  });

  test("while dispatch.lock is held: exit 3 and nothing written", async () => {
    const home = join(tempDir(), "home");
    mkdirSync(home, { mode: 0o700 });
    const lock = acquireLock(join(home, "dispatch.lock"));
    try {
      const r = await cli(["--home", home, "init"]);
      expect(r.code).toBe(3);
      expect(oneErrorLine(r.err)).toContain("dispatch.lock");
      expect(existsSync(join(home, "config.toml"))).toBe(false);
      expect(existsSync(join(home, "spool.db"))).toBe(false);
    } finally {
      lock.release();
    }
    expect((await cli(["--home", home, "init"])).code).toBe(0);
  });
});

describe("a home that moves", () => {
  test("keeps working: the starter config's paths are relative to it", async () => {
    const { home, r } = await init();
    expect(r.code).toBe(0);
    const text = readFileSync(join(home, "config.toml"), "utf8");
    expect(text).not.toContain(home);
    const moved = join(tempDir(), "elsewhere");
    renameSync(home, moved);
    expect((await cli(["--home", moved, "check"])).code).toBe(0);
    // The demo source verifies with its secret file and the demo script runs, both found from the new place.
    const secret = readFileSync(join(moved, "secrets", "demo"), "utf8").trim();
    const body = '{"topic":"t","type":"greeting"}';
    const capture = join(moved, "req.http");
    writeFileSync(
      capture,
      `POST /hooks/demo HTTP/1.1\nContent-Type: application/json\nX-Demo-Signature: ` +
        `sha256=${createHmac("sha256", secret).update(body).digest("hex")}\n\n${body}`,
    );
    const tested = await cli(["--home", moved, "--json", "source", "test", "demo", "--request", capture]);
    expect(tested.code).toBe(0);
    expect(JSON.parse(tested.out)).toMatchObject({ outcome: "classified" });
    const loaded = loadConfig({ home: moved, env: {} });
    const dest = makeDestination(loaded.config, "script:demo-log", {
      env: { PATH: process.env.PATH },
      clock: new FakeClock(),
      instanceId: "i",
    });
    const o = await dest?.deliver('{"events":[]}', makeCtx({ deliveryId: "d", batchId: 1, events: [], timeoutS: 30 }));
    expect(o?.kind).toBe("ok");
    expect(readFileSync(join(moved, "batches.jsonl"), "utf8")).toContain('{"events":[]}');
  });

  test("init names the command that was actually run, with the home as given", async () => {
    const dir = tempDir();
    const elsewhere = Bun.spawnSync([process.execPath, MAIN, "--home", "my-home", "init"], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(elsewhere.exitCode).toBe(0);
    expect(elsewhere.stdout.toString()).toContain(`next: bun ${MAIN} --home my-home run`);
    // From the checkout, as the README has it.
    const root = join(MAIN, "..", "..");
    const home = join(dir, "second");
    const fromRoot = Bun.spawnSync([process.execPath, MAIN, "--home", home, "init"], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: dir },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(fromRoot.stdout.toString()).toContain(`next: bun ${join("src", "main.ts")} --home ${home} run`);
  });

  test("the lines init prints, followed as printed, deliver the demo: no README needed", async () => {
    const dir = tempDir();
    const init = Bun.spawnSync([process.execPath, MAIN, "--home", "h", "init"], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(init.exitCode).toBe(0);
    const out = init.stdout.toString();
    expect(out).not.toContain("README");
    const then = /then, in another terminal: (.+?) {3}\(/.exec(out)?.[1];
    expect(then).toBe(`bun ${MAIN} --home h send demo --follow`);
    // The starter listens on a fixed port; this test needs its own.
    const config = join(dir, "h", "config.toml");
    writeFileSync(
      config,
      readFileSync(config, "utf8").replace("[sources.demo]", '[intake]\nlisten = "127.0.0.1:0"\n\n[sources.demo]'),
    );
    const hs = await startHookspool(join(dir, "h"), ["run"]);
    try {
      const port = await hs.port();
      const argv = (then as string).split(" ").slice(1);
      const sent = Bun.spawn([process.execPath, ...argv, "--url", `http://127.0.0.1:${port}/hooks/demo`], {
        cwd: dir,
        env: { PATH: process.env.PATH, HOME: dir },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(await sent.exited).toBe(0);
      const text = await new Response(sent.stdout).text();
      expect(text).toContain("queued");
      expect(text).toMatch(/batch \d+ delivered/);
      expect(readFileSync(join(dir, "h", "batches.jsonl"), "utf8")).toContain('"sent_by":"hookspool send"');
    } finally {
      hs.kill("SIGTERM");
      await hs.exited;
    }
  }, 30_000);
});
