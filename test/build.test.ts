// The newcomer's binary: `bun scripts/build.ts` gives one executable that inits a home,
// migrates it, enqueues from stdin and lists the batch, from anywhere on the disk.
import { expect, test } from "bun:test";
import { copyFileSync, cpSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../package.json";
import { tempDir } from "./helpers/tmp.ts";
import { LATEST_SCHEMA, MIGRATIONS } from "../src/store/sqlite/migrate.ts";

const root = join(import.meta.dir, "..");

test("dist/hookspool runs init, migrate, enqueue, list and show outside the repository", async () => {
  const build = Bun.spawnSync([process.execPath, "scripts/build.ts"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  expect({ code: build.exitCode, err: build.stderr.toString() }).toMatchObject({ code: 0 });

  // A copy in a directory of its own, far from migrations/ and src/: whatever it needs must be inside it.
  const dir = tempDir("hookspool-bin-");
  const bin = join(dir, "hookspool");
  copyFileSync(join(root, "dist", "hookspool"), bin);
  expect(statSync(bin).mode & 0o111).not.toBe(0);
  const home = join(dir, "home");
  const env = { PATH: "/usr/bin:/bin", HOME: dir, TZ: "UTC" };
  const run = (argv: string[], stdin?: string) => {
    const r = Bun.spawnSync([bin, ...argv], {
      cwd: dir,
      env,
      stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin),
      stdout: "pipe",
      stderr: "pipe",
    });
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };

  expect(run(["--version"])).toEqual({ code: 0, out: `${pkg.version}\n`, err: "" });

  const init = run(["--home", home, "init"]);
  expect(init).toMatchObject({ code: 0, err: "" });
  expect(init.out).toContain(`at schema ${LATEST_SCHEMA}`);
  // The binary that ran, as typed from where it ran.
  expect(init.out).toContain(`next: ./hookspool --home home run`);

  // A second, separate database: migrate builds it from the embedded SQL alone.
  mkdirSync(join(dir, "fresh"), { mode: 0o700 });
  const fresh = run(["--home", join(dir, "fresh"), "migrate"]);
  expect(fresh).toMatchObject({ code: 0, err: "" });
  expect(fresh.out).toContain(`applied ${MIGRATIONS.map((m) => m.name).join(", ")} (schema 0 -> ${LATEST_SCHEMA})`);
  expect(run(["--home", home, "migrate"]).out).toContain("nothing to apply");

  const enq = run(
    ["--home", home, "enqueue", "--source", "demo", "--key", "topic-1", "--event-type", "push"],
    '{"topic":"topic-1","n":1}',
  );
  expect(enq).toMatchObject({ code: 0, err: "" });
  expect(enq.out.trim()).toBe("queued event 1 in batch 1 (route demo -> script:demo-log)");

  const list = run(["list", "--home", home]);
  expect(list.code).toBe(0);
  expect(list.out).toMatch(/^1\s+open\s+demo\s+demo\s+topic-1\s+script:demo-log\s+1\s/m);
  const json = run(["--json", "--home", home, "list"]);
  expect(JSON.parse(json.out)).toMatchObject([{ id: 1, state: "open", key: "topic-1", count: 1 }]);

  const show = run(["--home", home, "show", "1", "--events"]);
  expect(show.code).toBe(0);
  expect(show.out).toMatch(/^key\s+topic-1$/m);
  expect(show.out).toMatch(/^1\s+push\s/m);

  const bad = run(["--home", home, "enqueue", "--source", "demo", "--key", "k"], "not json");
  expect(bad.code).toBe(2);
  expect(bad.err).toBe("hookspool: the payload is not valid JSON\n");
  expect(run(["--home", home, "show", "2"]).code).toBe(1);

  // The operator verbs, each once through the binary.
  const check = run(["--home", home, "check"]);
  expect(check.code).toBe(0);
  expect(check.out).toContain("0 errors");
  expect(JSON.parse(run(["--home", home, "--json", "status"]).out)).toMatchObject({
    schema: LATEST_SCHEMA,
    batches: { open: 1 },
  });
  expect(run(["--home", home, "metrics"]).out).toContain('hookspool_batches{state="open"} 1');
  expect(run(["--home", home, "pause", "script:demo-log", "--reason", "test"]).code).toBe(0);
  expect(run(["--home", home, "issues"]).out).toContain("delivery:script:demo-log:paused");
  expect(run(["--home", home, "resume", "script:demo-log"]).code).toBe(0);
  expect(run(["--home", home, "drop", "1"]).code).toBe(2);
  expect(run(["--home", home, "drop", "1", "--yes"]).code).toBe(0);
  expect(run(["--home", home, "replay", "1"]).code).toBe(1);
  const exported = run(["--home", home, "export", "--state", "dropped"]);
  expect(exported.code).toBe(0);
  expect(JSON.parse(exported.out.trim())).toMatchObject({ batch: { id: 1, state: "dropped" } });
  expect(run(["--home", home, "prune"]).code).toBe(0);
  expect(run(["--home", home, "reload"]).code).toBe(0);

  // bobbin check on a built-in's own directory checks the compiled-in copy (the binary cannot
  // load the directory's code); a private bobbin whose code imports a package the binary does
  // not carry gets a one-line reason, never a stack.
  const builtinDir = run(["--home", home, "bobbin", "check", join(root, "bobbins", "zoom", "meetings")]);
  expect({ code: builtinDir.code, err: builtinDir.err }).toEqual({ code: 0, err: "" });
  // By name: its captures and documents are files embedded in the binary, read when the kit asks.
  const byName = run(["--home", home, "bobbin", "check", "github.repo", "--json"]);
  expect({ code: byName.code, err: byName.err }).toEqual({ code: 0, err: "" });
  const rows = (JSON.parse(byName.out) as { rows: { name: string; outcome: string; note?: string }[] }).rows;
  expect(rows.find((r) => r.name === "captures")).toMatchObject({ outcome: "pass", note: "3 captures" });
  expect(rows.find((r) => r.name === "docs")).toMatchObject({ outcome: "pass" });
  const priv = join(dir, "private", "acme", "widgets");
  mkdirSync(join(dir, "private", "acme"), { recursive: true });
  cpSync(join(root, "bobbins", "zoom", "meetings"), priv, { recursive: true });
  writeFileSync(
    join(priv, "bobbin.toml"),
    readFileSync(join(priv, "bobbin.toml"), "utf8").replace('name = "zoom.meetings"', 'name = "acme.widgets"'),
  );
  writeFileSync(join(priv, "source.ts"), `import { decodeJwt } from "jose";\nexport default { decodeJwt };\n`);
  const privCheck = run(["--home", home, "bobbin", "check", priv]);
  expect(privCheck.out).toContain(
    "the hookspool binary cannot load this code: it imports jose, which the binary does not carry",
  );
  expect(privCheck.out + privCheck.err).not.toContain("    at ");
}, 60_000);
