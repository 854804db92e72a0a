// The script destination: stdin, the exact environment, state_dir, group kill on timeout, exit
// codes, cannot-start, the stdout cap and emit lines.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseEmits } from "../../src/destinations/emits.ts";
import { ScriptDestination, type ScriptDestinationOptions } from "../../src/destinations/script.ts";
import { writeTallyBobbin } from "../helpers/bobbins.ts";
import { tempDir } from "../helpers/tmp.ts";
import { documentFor, events, makeCtx, SENTINEL, timed, writeScript } from "./support.ts";

const PARENT = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: "/home/dispatcher",
  LANG: "C.UTF-8",
  USER: "hookspool",
  AWS_SECRET_ACCESS_KEY: SENTINEL,
  HOOKSPOOL_HOME: "/x",
};

function script(text: string, o: Partial<ScriptDestinationOptions> = {}): { dest: ScriptDestination; dir: string } {
  const dir = tempDir();
  const argv = [writeScript(dir, "run.sh", text)];
  return { dest: new ScriptDestination({ name: "script:t", argv, cwd: dir, parentEnv: PARENT, ...o }), dir };
}

/** Whether a process is running (a zombie or a missing /proc entry is not). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

describe("script input and environment", () => {
  test("stdin is the document, byte for byte, in the configured cwd", async () => {
    const { dest, dir } = script("#!/bin/sh\ncat > stdin.bin\n");
    const body = documentFor(events(50));
    const o = await dest.deliver(body, makeCtx());
    expect(o).toMatchObject({ kind: "ok", klass: null, status: 0, reason: "exit 0", emits: [] });
    expect(readFileSync(join(dir, "stdin.bin"), "utf8")).toBe(body);
  });

  test("the environment is exactly PATH, HOME, LANG, env_file, env and HOOKSPOOL_*", async () => {
    const files = tempDir();
    const envFile = join(files, "script.env");
    writeFileSync(envFile, "# comment\nFROM_FILE=1\nexport SHARED=file\nHOOKSPOOL_BATCH_ID=spoofed\n");
    const { dest, dir } = script("#!/bin/sh\ntr '\\000' '\\n' < /proc/$$/environ > environ.txt\n", {
      envFile,
      env: { SHARED: "table", EXTRA: "x" },
      stateDir: join(files, "state", "deep"),
    });
    const o = await dest.deliver("{}", makeCtx({ batchId: 41, deliveryId: "hs_inst1_41" }));
    expect(o.kind).toBe("ok");
    const env = Object.fromEntries(
      readFileSync(join(dir, "environ.txt"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    expect(Object.keys(env).sort()).toEqual([
      "EXTRA",
      "FROM_FILE",
      "HOME",
      "HOOKSPOOL_BATCH_ID",
      "HOOKSPOOL_DELIVERY_ID",
      "HOOKSPOOL_STATE_DIR",
      "LANG",
      "PATH",
      "SHARED",
    ]);
    expect(env).toMatchObject({
      HOME: "/home/dispatcher",
      LANG: "C.UTF-8",
      SHARED: "table",
      HOOKSPOOL_BATCH_ID: "41",
      HOOKSPOOL_DELIVERY_ID: "hs_inst1_41",
      HOOKSPOOL_STATE_DIR: join(files, "state", "deep"),
    });
  });

  test("state_dir is created with mode 0700", async () => {
    const state = join(tempDir(), "a", "b");
    const { dest } = script('#!/bin/sh\ntest -d "$HOOKSPOOL_STATE_DIR" && touch "$HOOKSPOOL_STATE_DIR/ran"\n', {
      stateDir: state,
    });
    expect((await dest.deliver("{}", makeCtx())).kind).toBe("ok");
    expect(statSync(state).mode & 0o777).toBe(0o700);
    expect(existsSync(join(state, "ran"))).toBe(true);
  });

  test("an unreadable env_file is config, and the script does not run", async () => {
    const { dest, dir } = script("#!/bin/sh\ntouch ran\n", { envFile: join(tempDir(), "missing.env") });
    expect(await dest.deliver("{}", makeCtx())).toMatchObject({
      kind: "retry",
      klass: "config",
      reason: "env file unreadable",
    });
    expect(existsSync(join(dir, "ran"))).toBe(false);
    expect(dest.check()[0]).toContain("cannot be read");
  });
});

describe("script exits and failures", () => {
  test("exit 65 is permanent; exit 3 is a batch failure", async () => {
    expect(await script("#!/bin/sh\nexit 65\n").dest.deliver("{}", makeCtx())).toMatchObject({
      kind: "dead",
      klass: "permanent",
      status: 65,
      reason: "exit 65",
    });
    expect(await script("#!/bin/sh\nexit 3\n").dest.deliver("{}", makeCtx())).toMatchObject({
      kind: "retry",
      klass: "batch",
      status: 3,
      reason: "exit 3",
    });
  });

  test("a missing or non-executable script cannot start: transport", async () => {
    const dir = tempDir();
    const missing = new ScriptDestination({ name: "script:m", argv: [join(dir, "nope.sh")], parentEnv: PARENT });
    expect(await missing.deliver("{}", makeCtx())).toMatchObject({
      kind: "retry",
      klass: "transport",
      reason: "cannot start script",
    });
    const plain = join(dir, "plain.sh");
    writeFileSync(plain, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    const noexec = new ScriptDestination({ name: "script:n", argv: [plain], parentEnv: PARENT });
    expect(await noexec.deliver("{}", makeCtx())).toMatchObject({
      kind: "retry",
      klass: "transport",
      reason: "cannot start script",
    });
    expect(missing.check()).toEqual([`argv[0] ${join(dir, "nope.sh")} is not an executable file`]);
    expect(noexec.check()).toHaveLength(1);
  });

  test("a timeout kills the whole process group", async () => {
    const { dest, dir } = script("#!/bin/sh\nsleep 30 &\necho $! > child.pid\necho $$ > self.pid\nwait\n", {
      timeoutS: 0.6,
    });
    const { value: o, ms } = await timed(() => dest.deliver("{}", makeCtx({ timeoutS: dest.timeoutS })));
    expect(o).toMatchObject({ kind: "retry", klass: "transport", reason: "script timeout" });
    expect(ms).toBeLessThan(2000);
    const pids = ["self.pid", "child.pid"].map((f) => Number(readFileSync(join(dir, f), "utf8")));
    for (let i = 0; i < 20 && pids.some(alive); i++) await Bun.sleep(50);
    expect(pids.map(alive)).toEqual([false, false]);
  });

  test("stderr is neither stored nor returned, only its size", async () => {
    const o = await script(`#!/bin/sh\necho "${SENTINEL}" >&2\nexit 4\n`).dest.deliver("{}", makeCtx());
    expect(o.detail).toContain(`stderr ${SENTINEL.length + 1} bytes`);
    expect(o.detail).not.toContain(SENTINEL);
  });

  test(
    "a processor destination runs `hookspool __processor <instance>`: its emits, and a Permanent's " + "reason kept",
    async () => {
      const root = tempDir();
      const dir = writeTallyBobbin(root);
      const env = (mode: string) => ({
        HOOKSPOOL_BOBBIN: "acme.tally",
        HOOKSPOOL_BOBBIN_INSTANCE: "tally",
        HOOKSPOOL_BOBBIN_DIR: dir,
        HOOKSPOOL_SETTINGS: JSON.stringify({ mode }),
        HOOKSPOOL_DELTA_ROUTES: JSON.stringify({ tally: "hermes:tally" }),
        HOOKSPOOL_SECRET_REFS: "{}",
      });
      const logged: string[] = [];
      const dest = (mode: string) =>
        new ScriptDestination({
          name: "script:tally",
          processor: "tally",
          env: env(mode),
          stateDir: join(root, `state-${mode}`),
          parentEnv: PARENT,
          processorLog: (l) => logged.push(l),
        });
      expect(dest("ok").check()).toEqual([]);
      const body = documentFor(events(4));
      const ok = await dest("ok").deliver(body, makeCtx());
      expect(ok).toMatchObject({ kind: "ok", reason: "exit 0" });
      expect(
        ok.emits.map((e) => [e.source, e.event_type, e.destination, (e.payload as { count: number }).count]),
      ).toEqual([
        ["tally", "tally", "hermes:tally", 4],
        ["tally", "tally", "hermes:tally", 0],
      ]);
      const dead = await dest("permanent").deliver(body, makeCtx());
      expect(dead).toMatchObject({ kind: "dead", klass: "permanent", reason: "exit 65" });
      expect(dead.detail).toContain("exit 65 (permanent: the tally is closed)");
      expect(dead.deadReason).toBe("processor_permanent");
      const retry = await dest("throw").deliver(body, makeCtx());
      expect(retry).toMatchObject({ kind: "retry", klass: "batch", reason: "exit 75" });
      expect(retry.detail).not.toContain("secret-value-in-message");
      // The runtime's own lines reach the dispatcher's log: the batch's counts, the verdicts.
      expect(logged).toContain("hookspool-processor: tally: batch 7: 4 event(s) -> 2 emit(s)");
      expect(logged).toContain("hookspool-processor: tally: retry: TypeError");
      expect(logged.every((l) => l.startsWith("hookspool-processor: "))).toBe(true);
    },
  );

  test("a plain script's permanent exit keeps no stderr, not even a line that looks like a processor's", async () => {
    const o = await script(`#!/bin/sh
echo "hookspool-permanent: ${SENTINEL}" >&2
exit 65
`).dest.deliver("{}", makeCtx());
    expect(o).toMatchObject({ kind: "dead", reason: "exit 65" });
    expect(o.detail).not.toContain(SENTINEL);
    // A plain script's refusal is the receiver's verdict, not a processor's.
    expect(o.deadReason).toBeUndefined();
  });

  test("defaults: per batch, one in flight, unbounded body, 300 s", () => {
    const { dest } = script("#!/bin/sh\n");
    expect([dest.type, dest.idempotency, dest.maxInflight, dest.maxBodyBytes, dest.timeoutS, dest.unwrap]).toEqual([
      "script",
      "per-batch",
      1,
      Number.POSITIVE_INFINITY,
      300,
      false,
    ]);
    expect(dest.check()).toEqual([]);
  });
});

describe("script stdout and emits", () => {
  const EMIT = '{"enqueue": {"source": "cal", "key": "k1", "event_type": "changed", "payload": {"n": 1}}}';

  test("emit lines are returned; other lines are ignored", async () => {
    const { dest, dir } = script("#!/bin/sh\ncat emits.txt\n");
    writeFileSync(
      join(dir, "emits.txt"),
      ["starting", EMIT, '{"other": 1}', "", `  ${EMIT.replace('"n": 1', '"n": 2')}\r`, "[1,2]", "done"].join("\n"),
    );
    const o = await dest.deliver("{}", makeCtx());
    expect(o).toMatchObject({ kind: "ok", badEmit: false });
    expect(o.emits).toEqual([
      { source: "cal", key: "k1", event_type: "changed", payload: { n: 1 } },
      { source: "cal", key: "k1", event_type: "changed", payload: { n: 2 } },
    ]);
  });

  test('a malformed {"enqueue" line fails the attempt as bad emit', async () => {
    for (const line of ['{"enqueue": {"source": "cal",', "{'enqueue': {}}", "{ enqueue: {} }", '{ "enqueue" : 5 }']) {
      const { dest, dir } = script("#!/bin/sh\ncat emits.txt\n");
      writeFileSync(join(dir, "emits.txt"), `${EMIT}\n${line}\n`);
      const o = await dest.deliver("{}", makeCtx());
      expect(o).toMatchObject({ kind: "retry", klass: "batch", reason: "bad emit", badEmit: true, emits: [] });
    }
  });

  test("invalid UTF-8 on an emit line is bad emit; on another line it is ignored", async () => {
    const { dest, dir } = script("#!/bin/sh\ncat emits.txt\n");
    const bad = Buffer.concat([
      Buffer.from('{"enqueue": {"source": "cal", "key": "'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('", "payload": {}}}\n'),
    ]);
    writeFileSync(join(dir, "emits.txt"), bad);
    expect(await dest.deliver("{}", makeCtx())).toMatchObject({ klass: "batch", badEmit: true });
    writeFileSync(join(dir, "emits.txt"), Buffer.concat([Buffer.from([0xff, 0x0a]), Buffer.from(`${EMIT}\n`)]));
    const o = await dest.deliver("{}", makeCtx());
    expect(o).toMatchObject({ kind: "ok", badEmit: false });
    expect(o.emits).toHaveLength(1);
  });

  test("stdout over 1 MiB fails the attempt as batch; nothing is truncated into emits", async () => {
    const { dest, dir } = script("#!/bin/sh\ncat emits.txt\nhead -c 1100000 /dev/zero | tr '\\000' x\n");
    writeFileSync(join(dir, "emits.txt"), `${EMIT}\n`);
    const o = await dest.deliver("{}", makeCtx());
    expect(o).toMatchObject({ kind: "retry", klass: "batch", reason: "stdout over 1 MiB", emits: [] });
  });

  test("parseEmits reads the last line without a newline and reports line numbers only", () => {
    const out = parseEmits(new TextEncoder().encode(`x\n${EMIT}`));
    expect(out.emits).toHaveLength(1);
    expect(out.bad).toBeNull();
    expect(parseEmits(new TextEncoder().encode(`x\n{"enqueue": ${SENTINEL}`)).bad).toBe("line 2: invalid JSON");
    expect(parseEmits(new TextEncoder().encode('{"enqueuer": 1}\n{"enqueue_at": 2}')).bad).toBeNull();
  });
});
