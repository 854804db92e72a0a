// The Hermes gateway's completion script closes the loop, as real processes: `hookspool run`
// delivers to a gateway stand-in (test/helpers/hermes-gateway.ts) on a route with
// outcome = "await"; the gateway answers 202, runs the agent, and runs deploy/hermes/completion.sh
// with the run's envelope, which calls `hookspool outcome`. The first run fails: the batch is
// delivered again (a new delivery id, so the gateway does not take it as a duplicate), and the
// second run's success ends it. The key's next batch waits for that.
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { HermesGateway } from "../helpers/hermes-gateway.ts";
import { type Hookspool, MAIN, startHookspool, waitFor } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

// The script reads the envelope with jq, else python3 (which a Hermes host has: the gateway is Python).
const READER = Bun.which("jq") ?? Bun.which("python3");
if (!READER)
  console.log("the Hermes completion e2e test skipped: neither jq nor python3 on PATH (.ci/run installs jq)");

const ROOT = join(import.meta.dir, "..", "..");
const IN_SECRET = "hermes-completion-inbound";
const ROUTE_SECRET = `whsec_${Buffer.from("hermes-route-secret-bytes-0001").toString("base64")}`;

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

test.skipIf(!READER)(
  "a failed run reported by the completion script is retried; the second run's success ends the batch",
  async () => {
    const home = tempDir();
    // The CLI the script calls: this checkout's, under this Bun.
    const bin = join(tempDir(), "hookspool");
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${MAIN}" "$@"\n`);
    chmodSync(bin, 0o755);
    const gateway = new HermesGateway({
      routes: { ci: { secret: ROUTE_SECRET } },
      completion: {
        script: join(ROOT, "deploy", "hermes", "completion.sh"),
        env: { HOOKSPOOL_BIN: bin, HOOKSPOOL_HOME: home, HOME: home },
        status: (run) => (run === 1 ? "failure" : "success"),
      },
    });
    cleanup.push(() => gateway.stop());
    writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
    writeFileSync(
      join(home, "config.toml"),
      `[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
backoff_base_s = 0.1
backoff_cap_s = 0.4

[hermes]
base_url = "${gateway.url}"
subscriptions_path = "${gateway.subscriptionsPath}"

[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "repo", event_type = "type" }
secrets.secret = { file = "${join(home, "in-secret")}" }
quiet_s = 0
max_s = 0
max_events = 1
action = "hermes:ci"

[destinations."hermes:ci"]
outcome = "await"
`,
    );
    const hs: Hookspool = await startHookspool(home, ["run"]);
    cleanup.push(() => hs.kill("SIGKILL"));
    const port = await hs.port();
    const send = async (n: number) => {
      const body = JSON.stringify({ repo: "o/r", type: "push", n });
      const res = await fetch(`http://127.0.0.1:${port}/hooks/gh`, {
        method: "POST",
        body,
        headers: {
          "Content-Type": "application/json",
          "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}`,
        },
      });
      expect(res.status).toBe(202);
    };
    await send(1);
    await send(2);
    const db = openSpool(join(home, "spool.db"));
    cleanup.push(() => db.close());
    const batches = () =>
      db.db.query("SELECT id, state, attempts, last_class FROM batches ORDER BY id").all() as {
        id: number;
        state: string;
        attempts: number;
        last_class: string | null;
      }[];
    await waitFor(
      "three runs: the failed one, its retry, then the key's next batch",
      () => gateway.completions.length === 3 && batches().every((b) => b.state !== "retry"),
      30_000,
    );
    // Every completion script run reached hookspool and exited 0.
    expect(gateway.completions.map((c) => [c.status, c.exit])).toEqual([
      ["failure", 0],
      ["success", 0],
      ["success", 0],
    ]);
    const accepted = gateway.hits.filter((h) => h.answer === "accepted");
    expect(accepted).toHaveLength(3);
    // The retry is a new delivery id: the gateway ran it instead of answering duplicate.
    expect(new Set(accepted.map((h) => h.deliveryId)).size).toBe(3);
    const [first, second] = batches();
    expect(first).toMatchObject({ state: "delivered", attempts: 2 });
    const steps = db.db
      .query("SELECT outcome, klass, answer FROM attempts WHERE batch_id = ? ORDER BY id")
      .all(first.id);
    expect(steps).toEqual([
      { outcome: "ok", klass: "await", answer: "accepted" },
      { outcome: "retry", klass: "agent", answer: "failed" },
      { outcome: "ok", klass: "await", answer: "accepted" },
      { outcome: "ok", klass: "agent", answer: "ok" },
    ]);
    // The key's second batch went only after the first's run succeeded.
    const secondAt = (
      db.db.query("SELECT MIN(started_at) AS at FROM attempts WHERE batch_id = ?").get(second.id) as { at: number }
    ).at;
    const firstDone = (
      db.db.query("SELECT delivered_at FROM batches WHERE id = ?").get(first.id) as { delivered_at: number }
    ).delivered_at;
    expect(secondAt).toBeGreaterThanOrEqual(firstDone);
    await waitFor("the second batch delivered", () => batches()[1].state === "delivered");
  },
);
