// hookspool pull, the developer's mode, as a real process against a real upstream intake: each
// leased batch delivered to --to and printed as it goes; the throwaway home gone at the stop; a
// --home kept across restarts, and a home with a config of its own left untouched; bad usage
// refused in one line, exit 2.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PULL_MARK } from "../../src/cli/pull.ts";
import { sqliteStores } from "../../src/store/open.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { MAIN, runHookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { copy, ev } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

const TOKEN = "dev-mode-token-0123456789";

const UPSTREAM = `[sources.gh]
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "{{secret:laptop}}" }
`;

async function queue(up: TestIntake, key: string, n: number): Promise<void> {
  const stores = sqliteStores(up.db, () => {});
  for (let i = 0; i < n; i++)
    await stores.intake().enqueueAll(
      [
        ev({
          source: "gh",
          key,
          payload: JSON.stringify({ key, i }),
          copies: [copy("gh", "pull:laptop", { quiet_s: 0, max_s: 0 })],
        }),
      ],
      up.clock.now(),
    );
  const d = await stores.dispatch("test");
  await d.sealReady(await d.effectiveNow());
}

/** `hookspool pull ...` with no --home (startHookspool always gives one), its output collected. */
function spawnPull(args: string[]) {
  const proc = Bun.spawn([process.execPath, MAIN, "pull", ...args], {
    env: { PATH: process.env.PATH, HOME: tempDir(), HOOKSPOOL_ALERT_DRY: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let err = "";
  const read = async (s: ReadableStream<Uint8Array>, to: (t: string) => void) => {
    for await (const chunk of s) to(new TextDecoder().decode(chunk));
  };
  const done = Promise.all([
    read(proc.stdout as ReadableStream<Uint8Array>, (t) => (out += t)),
    read(proc.stderr as ReadableStream<Uint8Array>, (t) => (err += t)),
  ]);
  return {
    proc,
    stdout: () => out,
    stderr: () => err,
    exited: done.then(() => proc.exited),
  };
}

function tokenFile(): string {
  const f = join(tempDir(), "token");
  writeFileSync(f, TOKEN, { mode: 0o600 });
  return f;
}

describe("hookspool pull", () => {
  test("delivers each leased batch to --to, prints it, and leaves no home behind", async () => {
    const up = await startIntake(UPSTREAM, { secrets: { laptop: TOKEN } });
    const receiver = new Receiver<{ key: string; events: unknown[] }>({});
    receiver.listen();
    const p = spawnPull([
      "--from",
      up.url,
      "--destination",
      "laptop",
      "--token-file",
      tokenFile(),
      "--to",
      `http://127.0.0.1:${receiver.port}/hook`,
    ]);
    try {
      await queue(up, "owner/repo", 2);
      await waitFor("the delivery", () => receiver.accepted().length === 1, 30_000);
      expect(receiver.accepted()[0].doc.events).toEqual([
        { key: "owner/repo", i: 0 },
        { key: "owner/repo", i: 1 },
      ]);
      await waitFor("its line", () => /delivered batch \d+ attempt 1 gh -> local key=owner\/repo/.test(p.stdout()));
      await waitFor("acked upstream", () => up.count("batches", "state = 'delivered'") === 1);
      const home = /a throwaway home (\S+)/.exec(p.stderr())?.[1] as string;
      expect(existsSync(home)).toBe(true);
      p.proc.kill("SIGTERM");
      expect(await p.exited).toBe(0);
      expect(existsSync(home)).toBe(false);
    } finally {
      p.proc.kill("SIGKILL");
      receiver.stop();
      await up.stop();
    }
  });

  test("--home keeps the spool across restarts; a home with its own config.toml is refused", async () => {
    const up = await startIntake(UPSTREAM, { secrets: { laptop: TOKEN } });
    let receiverUp = false;
    const receiver = new Receiver<{ events: unknown[] }>({ answer: () => (receiverUp ? 200 : 503) });
    receiver.listen();
    const home = tempDir();
    const argv = (h: string) => [
      "pull",
      "--home",
      h,
      "--from",
      up.url,
      "--destination",
      "laptop",
      "--token-file",
      tokenFile(),
      "--to",
      `http://127.0.0.1:${receiver.port}/hook`,
    ];
    try {
      const first = await startHookspool(home, argv(home));
      await queue(up, "k", 1);
      // Taken from upstream and kept here while the endpoint is down...
      await waitFor("acked upstream", () => up.count("batches", "state = 'delivered'") === 1, 30_000);
      await waitFor("a refused delivery", () => receiver.got.length > 0, 30_000);
      first.kill("SIGTERM");
      expect(await first.exited).toBe(0);
      expect(readFileSync(join(home, "config.toml"), "utf8").startsWith(PULL_MARK)).toBe(true);
      // ...and delivered by the next start, once it answers.
      receiverUp = true;
      const second = await startHookspool(home, argv(home));
      try {
        await waitFor("delivered after the restart", () => receiver.accepted().length === 1, 60_000);
      } finally {
        second.kill("SIGTERM");
        await second.exited;
      }
      const other = tempDir();
      writeFileSync(join(other, "config.toml"), "[sources.mine]\n");
      const refused = await runHookspool(other, argv(other));
      expect(refused.code).toBe(2);
      expect(refused.err).toContain("was not written by hookspool pull");
      expect(readFileSync(join(other, "config.toml"), "utf8")).toBe("[sources.mine]\n");
    } finally {
      receiver.stop();
      await up.stop();
    }
  });

  test("bad usage: one line, exit 2", async () => {
    const home = tempDir();
    const cases: [string[], string][] = [
      [["pull", "--destination", "laptop", "--token-file", "t", "--to", "http://x/"], "--from is required"],
      [["pull", "--from", "ftp://x", "--destination", "l", "--token-file", "t", "--to", "http://x/"], "--from must be"],
      [
        ["pull", "--from", "https://x", "--destination", "pull:l", "--token-file", "t", "--to", "http://x/"],
        "--destination",
      ],
      [["pull", "--from", "https://x", "--destination", "l", "--token-file", "t"], "exactly one of"],
      [
        ["pull", "--from", "https://x", "--destination", "l", "--token-file", "t", "--to", "u", "--script", "c"],
        "exactly one of",
      ],
    ];
    for (const [args, said] of cases) {
      const r = await runHookspool(home, args);
      expect(r.code).toBe(2);
      expect(r.err).toContain(said);
      expect(r.err.trim().split("\n").length).toBeLessThanOrEqual(2);
    }
  });
});
