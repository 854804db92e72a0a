// hookspool dispatch and run as commands: the lock, the corruption refusal (spec 2, 12).
import { describe, expect, test } from "bun:test";
import { openSync, writeSync, closeSync, writeFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { acquireLock } from "../../src/store/lock.ts";
import { openSpool } from "../../src/store/db.ts";
import { migrate } from "../../src/store/migrate.ts";
import { cli } from "../helpers/cli.ts";
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
