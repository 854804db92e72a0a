// File modes (database 0600, directory 0700), checked on real processes started under
// umask 000, so every mode comes from hookspool and none from a kind umask: the state directory
// and spool made by migrate, the WAL and shared-memory files a running dispatcher opens,
// dispatch.lock, and the secret and config that init writes.
import { describe, expect, test } from "bun:test";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAIN, waitFor } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const mode = (path: string) => statSync(path).mode & 0o777;

/** A config file of defaults, outside any home. */
function emptyConfig(): string {
  const file = join(tempDir(), "config.toml");
  writeFileSync(file, "", { mode: 0o600 });
  return file;
}
const octal = (m: number) => `0${m.toString(8)}`;

/** `hookspool --home <home> <argv>` to completion under umask 000. */
async function underUmask0(home: string, argv: string[]): Promise<{ code: number; err: string }> {
  const p = Bun.spawn(["sh", "-c", 'umask 000 && exec "$@"', "sh", process.execPath, MAIN, "--home", home, ...argv], {
    // HOME elsewhere: bun itself makes $HOME/.bun (0755) when HOME does not exist yet.
    env: { PATH: process.env.PATH, HOME: tempDir(), HOOKSPOOL_ALERT_DRY: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
  return { code, err };
}

describe("under umask 000", () => {
  test("migrate makes the state directory 0700, spool.db 0600, dispatch.lock not world-writable", async () => {
    const home = join(tempDir(), "state", "hookspool");
    // A config names the home (a home nobody named is refused as a typo).
    const r = await underUmask0(home, ["--config", emptyConfig(), "migrate"]);
    expect(r).toMatchObject({ code: 0 });
    expect(octal(mode(home))).toBe("0700");
    expect(octal(mode(join(home, "spool.db")))).toBe("0600");
    const lock = join(home, "dispatch.lock");
    expect(existsSync(lock)).toBe(true);
    expect(mode(lock) & 0o002).toBe(0);
    expect(mode(lock) & 0o077).toBe(0);
  });

  test(
    "a running dispatcher's WAL and shared-memory files are 0600 too, and nothing it made is " +
      "group/other accessible",
    async () => {
      const home = join(tempDir(), "state");
      expect((await underUmask0(home, ["--config", emptyConfig(), "migrate"])).code).toBe(0);
      writeFileSync(
        join(home, "config.toml"),
        `[intake]\nlisten = "127.0.0.1:0"\n\n[dispatch]\npoll_s = 0.05\nheartbeat_s = 0.2\n`,
      );
      // startHookspool has no umask knob, so the command is wrapped in sh here.
      const proc = Bun.spawn(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", process.execPath, MAIN, "--home", home, "run"],
        {
          env: { PATH: process.env.PATH, HOME: tempDir(), HOOKSPOOL_ALERT_DRY: "1" },
          stdout: "ignore",
          stderr: "pipe",
        },
      );
      try {
        const db = join(home, "spool.db");
        await waitFor("the WAL and shm files", () => existsSync(`${db}-wal`) && existsSync(`${db}-shm`));
        for (const f of [db, `${db}-wal`, `${db}-shm`]) expect([f, octal(mode(f))]).toEqual([f, "0600"]);
        expect(mode(join(home, "dispatch.lock")) & 0o077).toBe(0);
        expect(octal(mode(home))).toBe("0700");
      } finally {
        proc.kill("SIGTERM");
        await proc.exited;
      }
    },
  );

  test("init writes its secret and config 0600 and its directories 0700", async () => {
    const home = join(tempDir(), "fresh-home");
    const r = await underUmask0(home, ["init"]);
    expect(r).toMatchObject({ code: 0 });
    expect(octal(mode(home))).toBe("0700");
    expect(octal(mode(join(home, "secrets")))).toBe("0700");
    expect(octal(mode(join(home, "secrets", "demo")))).toBe("0600");
    expect(octal(mode(join(home, "config.toml")))).toBe("0600");
    expect(octal(mode(join(home, "spool.db")))).toBe("0600");
    expect(mode(join(home, "dispatch.lock")) & 0o077).toBe(0);
    // The demo script is executable by its owner only: nobody else may swap what it runs.
    expect(mode(join(home, "scripts", "append-batch.sh")) & 0o022).toBe(0);
  });
});
