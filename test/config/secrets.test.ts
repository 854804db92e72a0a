// Secret references: read at use time, never cached, and never in an error message.
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, readlinkSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeSecretRef, parseEnvFile, resolveSecret } from "../../src/config/secrets.ts";
import type { SecretRef } from "../../src/config/types.ts";
import { HookspoolError } from "../../src/errors.ts";
import { tempDir } from "../helpers/tmp.ts";
import { thrownBy } from "./support.ts";

const SENTINEL = "S3NTINEL-4b1e0a77-never-print-me";

function fileWith(text: string, name = "secret"): string {
  const path = join(tempDir(), name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** The error resolving `ref` gives, checked to name the reference and to hold no secret. */
function failure(ref: SecretRef, env: Record<string, string | undefined> = {}): HookspoolError {
  const e = thrownBy(HookspoolError, () => resolveSecret(ref, env));
  expect(e.code).toBe("E_CONFIG");
  const shown = [e.message, e.describe(), e.hint ?? "", String(e), e.stack ?? ""].join("\n");
  expect(shown).toContain(describeSecretRef(ref));
  expect(shown).not.toContain(SENTINEL);
  return e;
}

describe("{ file }", () => {
  test("reads the file and drops one trailing newline", () => {
    expect(resolveSecret({ file: fileWith(`${SENTINEL}\n`) })).toBe(SENTINEL);
  });

  test("drops only one trailing newline (CRLF counts as one)", () => {
    expect(resolveSecret({ file: fileWith("abc\n\n") })).toBe("abc\n");
    expect(resolveSecret({ file: fileWith("abc\r\n") })).toBe("abc");
  });

  test("keeps everything else: no newline, inner and leading whitespace", () => {
    expect(resolveSecret({ file: fileWith(" a b") })).toBe(" a b");
  });

  test("a rotated file is read fresh on the next call", () => {
    const path = fileWith("first\n");
    expect(resolveSecret({ file: path })).toBe("first");
    writeFileSync(path, "second\n");
    expect(resolveSecret({ file: path })).toBe("second");
  });

  describe("read through a held descriptor, checked by a stat each time", () => {
    /**
     * The descriptors of this process open on `path` (Linux: /proc/self/fd; a removed file reads "<path> (deleted)").
     */
    const heldOn = (path: string) =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === path;
        } catch {
          return false;
        }
      });

    test("one descriptor per file, however often it is read; a rewrite in place is read fresh", () => {
      const path = fileWith("aaaa\n");
      for (let i = 0; i < 20; i++) expect(resolveSecret({ file: path })).toBe("aaaa");
      expect(heldOn(path)).toHaveLength(1);
      // Same inode, same size: the next read sees the new bytes (nothing of the content is kept).
      writeFileSync(path, "bbbb\n");
      expect(resolveSecret({ file: path })).toBe("bbbb");
      writeFileSync(path, "a longer secret\n");
      expect(resolveSecret({ file: path })).toBe("a longer secret");
      expect(heldOn(path)).toHaveLength(1);
    });

    test("a file renamed over the path is opened afresh; the old one is let go", () => {
      const path = fileWith("old-secret\n");
      expect(resolveSecret({ file: path })).toBe("old-secret");
      const next = `${path}.new`;
      writeFileSync(next, "new-secret\n", { mode: 0o600 });
      renameSync(next, path);
      expect(resolveSecret({ file: path })).toBe("new-secret");
      expect(heldOn(path)).toHaveLength(1);
      expect(heldOn(`${path} (deleted)`)).toEqual([]);
    });

    test("a removed file fails the next read, and no descriptor stays open on it", () => {
      const path = fileWith(`${SENTINEL}\n`);
      expect(resolveSecret({ file: path })).toBe(SENTINEL);
      unlinkSync(path);
      expect(failure({ file: path }).message).toBe(`secret (file ${path}) cannot be read (ENOENT)`);
      expect(heldOn(`${path} (deleted)`)).toEqual([]);
    });

    test("a child process (a script destination, an alert command) inherits no descriptor on it", () => {
      const path = fileWith(`${SENTINEL}\n`);
      expect(resolveSecret({ file: path })).toBe(SENTINEL);
      expect(heldOn(path)).toHaveLength(1);
      const child = Bun.spawnSync(["sh", "-c", "ls -l /proc/$$/fd"], { stdout: "pipe" });
      expect(child.exitCode).toBe(0);
      expect(child.stdout.toString()).toContain("0 -> ");
      expect(child.stdout.toString()).not.toContain(path);
    });

    test("at most 64 secret files are held open, the least recently read let go first", () => {
      const paths = Array.from({ length: 70 }, (_, i) => fileWith(`s${i}\n`, `many-${i}`));
      for (const [i, p] of paths.entries()) expect(resolveSecret({ file: p })).toBe(`s${i}`);
      expect(paths.filter((p) => heldOn(p).length > 0)).toHaveLength(64);
      expect(heldOn(paths[0])).toEqual([]);
      expect(heldOn(paths[69])).toHaveLength(1);
      expect(resolveSecret({ file: paths[0] })).toBe("s0");
    });

    test.skipIf(process.getuid?.() === 0)("a chmod 000 after a read fails the next read (EACCES)", () => {
      const path = fileWith(SENTINEL);
      expect(resolveSecret({ file: path })).toBe(SENTINEL);
      chmodSync(path, 0o000);
      expect(failure({ file: path }).message).toContain("cannot be read (EACCES)");
    });
  });

  test("a missing file is an E_CONFIG error naming the file", () => {
    const path = join(tempDir(), "absent");
    const e = failure({ file: path });
    expect(e.message).toBe(`secret (file ${path}) cannot be read (ENOENT)`);
  });

  test("an unreadable path (a directory) is an E_CONFIG error naming it", () => {
    const dir = tempDir();
    mkdirSync(join(dir, "sub"));
    writeFileSync(join(dir, "sub", "inside"), SENTINEL);
    const e = failure({ file: join(dir, "sub") });
    expect(e.message).toContain("cannot be read (EISDIR)");
  });

  // root reads any file, so this one only runs as an ordinary user.
  test.skipIf(process.getuid?.() === 0)("a file without read permission is an E_CONFIG error naming it", () => {
    const path = fileWith(SENTINEL);
    chmodSync(path, 0o000);
    expect(failure({ file: path }).message).toContain("cannot be read (EACCES)");
  });

  test("an empty file, or one holding only a newline, is refused", () => {
    expect(failure({ file: fileWith("") }).message).toEndWith("is empty");
    expect(failure({ file: fileWith("\n") }).message).toEndWith("is empty");
  });
});

describe("{ env }", () => {
  test("reads the variable from the environment given", () => {
    expect(resolveSecret({ env: "HOOK_SECRET" }, { HOOK_SECRET: SENTINEL })).toBe(SENTINEL);
  });

  test("an unset variable is an error naming it, not its neighbours' values", () => {
    const e = failure({ env: "HOOK_SECRET" }, { OTHER_SECRET: SENTINEL, HOOK_SECRET_2: SENTINEL });
    expect(e.message).toBe("secret (environment variable HOOK_SECRET) is not set");
  });

  test("an empty variable is refused", () => {
    expect(failure({ env: "HOOK_SECRET" }, { HOOK_SECRET: "" }).message).toEndWith("is empty");
  });
});

describe("{ env_file, key }", () => {
  const ENV_FILE = [
    "# plaid credentials",
    "",
    "PLAID_CLIENT_ID=client-123",
    "export PLAID_SECRET=exported-value",
    'QUOTED="a value # with a hash"',
    "SINGLE='single quoted'",
    "  SPACED  =  spaced out  ",
    "#COMMENTED=nope",
    "EMPTY=",
    `BROKEN ${SENTINEL}`,
    `OTHER=${SENTINEL}`,
  ].join("\n");

  test.each([
    ["PLAID_CLIENT_ID", "client-123"],
    ["PLAID_SECRET", "exported-value"],
    ["QUOTED", "a value # with a hash"],
    ["SINGLE", "single quoted"],
    ["SPACED", "spaced out"],
    ["OTHER", SENTINEL],
  ])("%s", (key, want) => {
    expect(resolveSecret({ env_file: fileWith(ENV_FILE), key })).toBe(want);
  });

  test("a commented-out key is not set", () => {
    const path = fileWith(ENV_FILE);
    expect(failure({ env_file: path, key: "COMMENTED" }).message).toBe(
      `secret (COMMENTED in ${path}) is not set in the file`,
    );
  });

  test("a key whose line is malformed is not set, and the line is not echoed", () => {
    failure({ env_file: fileWith(ENV_FILE), key: "BROKEN" });
  });

  test("a key set to nothing is refused", () => {
    expect(failure({ env_file: fileWith(ENV_FILE), key: "EMPTY" }).message).toEndWith("is empty");
  });

  test("a missing env file is an error naming it", () => {
    const path = join(tempDir(), "absent.env");
    expect(failure({ env_file: path, key: "PLAID_SECRET" }).message).toBe(
      `secret (PLAID_SECRET in ${path}) cannot be read (ENOENT)`,
    );
  });

  test("a rotated env file is read fresh on the next call", () => {
    const path = fileWith("TOKEN=old\n");
    expect(resolveSecret({ env_file: path, key: "TOKEN" })).toBe("old");
    writeFileSync(path, "TOKEN=new\n");
    expect(resolveSecret({ env_file: path, key: "TOKEN" })).toBe("new");
  });

  test("CRLF line endings are read like LF", () => {
    expect(parseEnvFile("A=1\r\nB=2\r\n")).toEqual(
      new Map([
        ["A", "1"],
        ["B", "2"],
      ]),
    );
  });

  test("a later line for the same key wins", () => {
    expect(parseEnvFile("A=1\nA=2\n").get("A")).toBe("2");
  });
});

describe("describeSecretRef", () => {
  test("says where a secret lives, in words an operator can act on", () => {
    expect(describeSecretRef({ file: "/etc/s" })).toBe("file /etc/s");
    expect(describeSecretRef({ env: "TOKEN" })).toBe("environment variable TOKEN");
    expect(describeSecretRef({ env_file: "/etc/p.env", key: "K" })).toBe("K in /etc/p.env");
  });
});
