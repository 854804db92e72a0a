// hookspool dispatch and run as commands: the lock, the corruption refusal.
import { describe, expect, test } from "bun:test";
import { openSync, readFileSync, writeSync, closeSync, writeFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { acquireLock } from "../../src/lock.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { cli } from "../helpers/cli.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

function home(): string {
  const h = tempDir();
  writeFileSync(join(h, "config.toml"), '[intake]\nlisten = "127.0.0.1:0"\n');
  const s = openSpool(join(h, "spool.db"), { create: true });
  migrate(s);
  for (let i = 0; i < 50; i++) s.db.run(`INSERT INTO meta (key, value) VALUES ('pad${i}', '${"x".repeat(2000)}')`);
  s.close();
  return h;
}

describe("hookspool dispatch", () => {
  test("a second dispatcher (the lock is held) exits 3", async () => {
    const h = home();
    const lock = acquireLock(join(h, "dispatch.lock"));
    try {
      for (const verb of ["dispatch", "run", "migrate"]) {
        const r = await cli(["--home", h, verb]);
        expect([verb, r.code]).toEqual([verb, 3]);
        expect(r.err).toContain("dispatch.lock");
      }
    } finally {
      lock.release();
    }
  });

  test("a corrupt database: refuse to start, exit 2, nothing moved aside", async () => {
    const h = home();
    const db = join(h, "spool.db");
    const size = statSync(db).size;
    const fd = openSync(db, "r+");
    // Scribble over the middle of the file, past the header, where table pages live.
    writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, Math.floor(size / 2 / 4096) * 4096);
    closeSync(fd);
    const r = await cli(["--home", h, "dispatch"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/quick_check|malformed|corrupt/i);
    expect(statSync(db).size).toBe(size);
  });
});

test("a file that is not a database at all is refused the same way (exit 2)", async () => {
  const h = home();
  writeFileSync(join(h, "spool.db"), "this is not sqlite ".repeat(500));
  const r = await cli(["--home", h, "dispatch"]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("corrupt");
});

describe("hookspool run as a newcomer starts it", () => {
  test("an address in use is one line naming it, exit 2, no stack trace", async () => {
    const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    try {
      const h = home();
      writeFileSync(join(h, "config.toml"), `[intake]\nlisten = "127.0.0.1:${taken.port}"\n`);
      const r = await cli(["--home", h, "run"]);
      expect(r.code).toBe(2);
      const lines = r.err
        .trim()
        .split("\n")
        .filter((l) => l.startsWith("hookspool:"));
      expect(lines).toEqual([
        `hookspool: intake.listen: cannot listen on 127.0.0.1:${taken.port}: the address is in use ` +
          `(stop whatever holds it (another hookspool?) or change intake.listen)`,
      ]);
      expect(r.err).not.toMatch(/\n\s+at /);
    } finally {
      taken.stop();
    }
  });

  test("run and intake log the address as listen= and each source's hook URL once", async () => {
    const h = home();
    writeFileSync(join(h, "secret"), "s3cret", { mode: 0o600 });
    writeFileSync(
      join(h, "config.toml"),
      `[intake]\nlisten = "127.0.0.1:0"\n\n[sources.demo]\ntemplate = { scheme = "static-token", ` +
        `header = "X-Token", key = "topic" }\nsecrets.secret = { file = "${join(h, "secret")}" }\naction ` +
        `= "script:x"\n\n[destinations."script:x"]\nargv = ["/bin/true"]\n`,
    );
    const p = await startHookspool(h, ["run"]);
    try {
      const port = await p.port();
      await waitFor("the source's URL line", () => p.stderr().includes("source ready"));
      expect(p.stderr()).toContain(`listening listen=127.0.0.1:${port}`);
      expect(p.stderr()).toContain(`source ready source=demo url=http://127.0.0.1:${port}/hooks/demo`);
      expect(p.stderr().match(/source ready/g)).toHaveLength(1);
    } finally {
      p.kill();
      await p.exited;
    }
  });
});

test("under run, a sender waits the intake's busy timeout, not the dispatcher's 30 s, then gets 503", async () => {
  const h = home();
  writeFileSync(join(h, "secret"), "s3cret", { mode: 0o600 });
  writeFileSync(
    join(h, "config.toml"),
    `[intake]\nlisten = "127.0.0.1:0"\nbusy_timeout_s = 1\n\n[sources.demo]\ntemplate = { scheme = ` +
      `"static-token", header = "X-Token", key = "topic" }\nsecrets.secret = { file ` +
      `= "${join(h, "secret")}" }\naction = "script:x"\n\n[destinations."script:x"]\nargv = ` +
      `["/bin/true"]\n`,
  );
  const p = await startHookspool(h, ["run"]);
  const holder = openSpool(join(h, "spool.db"), { busyTimeoutS: 5 });
  try {
    const port = await p.port();
    holder.db.run("BEGIN IMMEDIATE"); // another process holds the write lock
    const t0 = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/hooks/demo`, {
      method: "POST",
      body: '{"topic":"a"}',
      headers: { "X-Token": "s3cret" },
      signal: AbortSignal.timeout(15_000),
    });
    const waited = performance.now() - t0;
    expect(res.status).toBe(503);
    // The request's own busy timeout, counted from its arrival (a dispatcher write queued in front
    // of it waits its own): far from the dispatcher's 30 s.
    expect(waited).toBeGreaterThanOrEqual(950);
    expect(waited).toBeLessThan(2_000);
    expect(res.headers.get("retry-after")).toBe("1");
    holder.db.run("ROLLBACK");
    const again = await fetch(`http://127.0.0.1:${port}/hooks/demo`, {
      method: "POST",
      body: '{"topic":"a"}',
      headers: { "X-Token": "s3cret" },
    });
    expect(again.status).toBe(202);
  } finally {
    if (holder.db.inTransaction) holder.db.run("ROLLBACK");
    holder.close();
    p.kill();
    await p.exited;
  }
}, 30_000);

describe("the services check their config as hookspool check does", () => {
  test("a config check refuses: each service prints check's errors and does not start (exit 2)", async () => {
    const h = home();
    writeFileSync(
      join(h, "config.toml"),
      '[intake]\nlisten = "127.0.0.1:0"\nlisen = "typo"\n\n[sources.s]\naction = "nowhere"\n',
    );
    const checked = await cli(["--home", h, "check"]);
    expect(checked.code).toBe(2);
    const checkErrors = checked.out.split("\n").filter((l) => l.startsWith("error: "));
    expect(checkErrors.length).toBeGreaterThanOrEqual(2);
    for (const verb of ["intake", "dispatch", "run"]) {
      const r = await cli(["--home", h, verb]);
      expect([verb, r.code]).toEqual([verb, 2]);
      for (const line of checkErrors)
        expect([verb, r.err]).toEqual([verb, expect.stringContaining(`hookspool: ${line}`)]);
      expect(r.err).toContain("not starting: ");
      // With --json the error is one object on stdout, the problems in it.
      const j = await cli(["--home", h, "--json", verb]);
      expect(j.code).toBe(2);
      const doc = JSON.parse(j.out);
      expect(doc).toMatchObject({ code: "E_CONFIG", error: expect.stringContaining("not starting") });
      expect(doc.problems.filter((p: { level: string }) => p.level === "error").length).toBe(checkErrors.length);
    }
  });

  test("check's warnings are printed when a service starts, once", async () => {
    const h = home();
    writeFileSync(join(h, "config.toml"), '[intake]\nlisten = "127.0.0.1:0"\nthreads = 4\n');
    const p = await startHookspool(h, ["run"]);
    try {
      await p.port();
      expect(p.stderr()).toContain("hookspool: warning: intake.threads: is accepted and ignored");
    } finally {
      p.kill();
      await p.exited;
    }
    expect(p.stderr().match(/intake\.threads/g)).toHaveLength(1);
  });

  test("a newcomer's home with an http destination added with defaults passes check", async () => {
    const parent = tempDir();
    const h = join(parent, "home");
    expect((await cli(["--home", h, "init"])).code).toBe(0);
    writeFileSync(join(h, "secrets", "receiver"), "receiver-secret\n", { mode: 0o600 });
    const cfg = join(h, "config.toml");
    // Route the demo to a plain https receiver: no size setting touched anywhere.
    writeFileSync(
      cfg,
      `${readFileSync(cfg, "utf8").replace('action = "script:demo-log"', 'action = "receiver"')}\n` +
        `[destinations.receiver]\nurl = "https://receiver.example/hook"\n` +
        `secret = { file = "${join(h, "secrets", "receiver")}" }\n`,
    );
    const r = await cli(["--home", h, "check"]);
    expect(r.out.split("\n").filter((l) => l.startsWith("error"))).toEqual([]);
    expect(r.code).toBe(0);
  });
});
