// hookspool run end to end, as a real process: a burst of signed requests becomes one batch per
// key after the quiet window, signed so a stock Standard Webhooks library verifies it; a receiver
// that goes down and comes back gets every batch, in order, with the breaker visible in the
// database, and nothing is dropped (issue 4, "Done when").
import { expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { openSpool } from "../../src/store/db.ts";
import { tempDir } from "../helpers/tmp.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");
const IN_SECRET = "e2e-inbound-secret";
const OUT_SECRET = `whsec_${Buffer.from("e2e-outbound-secret-bytes").toString("base64")}`;

interface Received {
  body: string;
  headers: Record<string, string>;
}

async function waitFor<T>(what: string, fn: () => T | undefined | false, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

test("a burst coalesces per key; an outage delays, never drops, and the breaker shows it", async () => {
  const received: Received[] = [];
  let up = true;
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (!up) return new Response("down", { status: 503 });
      received.push({ body: await req.text(), headers: Object.fromEntries(req.headers.entries()) });
      return new Response("ok");
    },
  });
  const home = tempDir();
  writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "out-secret"), OUT_SECRET, { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
heartbeat_s = 1
backoff_base_s = 0.1
backoff_cap_s = 0.4
lease_grace_s = 5
breaker = { trip_after = 3, cooldown_initial_s = 0.3, cooldown_max_s = 1 }

[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "type" }
secrets.secret = { file = "${join(home, "in-secret")}" }
quiet_s = 0.6
max_s = 5
action = "receiver"

[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${receiver.port}/hook"
allow_insecure = true
secret = { file = "${join(home, "out-secret")}" }
timeout_s = 2
`,
  );
  const proc = Bun.spawn([process.execPath, MAIN, "--home", home, "run"], {
    env: { PATH: process.env.PATH, HOME: home, HOOKSPOOL_ALERT_DRY: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderr = "";
  const reader = (async () => {
    for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk);
  })();
  try {
    const port = await waitFor("the intake to listen", () => /listening listen=127\.0\.0\.1:(\d+)/.exec(stderr)?.[1]);
    const send = async (topic: string, n: number) => {
      const body = JSON.stringify({ topic, type: "tick", n });
      const res = await fetch(`http://127.0.0.1:${port}/hooks/demo`, {
        method: "POST",
        body,
        headers: { "Content-Type": "application/json", "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}` },
      });
      expect(res.status).toBe(202);
    };
    for (let i = 1; i <= 8; i++) await send("alpha", i);
    for (let i = 1; i <= 4; i++) await send("beta", i);
    await waitFor("two batches", () => received.length >= 2 && received);
    await Bun.sleep(300);
    expect(received.length).toBe(2); // one wake-up per key
    const wh = new Webhook(OUT_SECRET);
    const docs = received.map((r) => wh.verify(r.body, r.headers) as { key: string; count: number; events: { n: number }[] });
    const byKey = Object.fromEntries(docs.map((d) => [d.key, d]));
    expect(byKey.alpha.count).toBe(8);
    expect(byKey.alpha.events.map((e) => e.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(byKey.beta.events.map((e) => e.n)).toEqual([1, 2, 3, 4]);

    // The receiver goes down; new bursts keep spooling in sealed, bounded batches.
    up = false;
    for (let i = 9; i <= 11; i++) await send("alpha", i);
    await Bun.sleep(700);
    for (let i = 12; i <= 14; i++) await send("alpha", i);
    for (let i = 5; i <= 6; i++) await send("beta", i);
    const db = openSpool(join(home, "spool.db"));
    try {
      await waitFor("the breaker to open", () => {
        const row = db.db.query("SELECT state FROM destinations WHERE name = 'receiver'").get() as { state: string } | null;
        return row && row.state !== "closed";
      });
      up = true;
      await waitFor("every batch delivered", () => {
        const left = db.db.query("SELECT COUNT(*) AS n FROM batches WHERE state <> 'delivered'").get() as { n: number };
        return left.n === 0;
      });
      const attempts = db.db.query("SELECT COUNT(*) AS n FROM attempts WHERE outcome = 'retry' AND klass = 'transport'").get() as { n: number };
      expect(attempts.n).toBeGreaterThanOrEqual(3);
      expect((db.db.query("SELECT state FROM destinations WHERE name = 'receiver'").get() as { state: string }).state).toBe("closed");
    } finally {
      db.close();
    }
    // Every event exactly once per key, in order, none lost.
    const later = received.slice(2).map((r) => wh.verify(r.body, r.headers) as { key: string; events: { n: number }[] });
    const seen = (key: string) => later.filter((d) => d.key === key).flatMap((d) => d.events.map((e) => e.n));
    expect(seen("alpha")).toEqual([9, 10, 11, 12, 13, 14]);
    expect(seen("beta")).toEqual([5, 6]);
  } finally {
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    await reader;
    receiver.stop(true);
  }
  expect(stderr).not.toContain(IN_SECRET);
  expect(stderr).not.toContain("e2e-outbound-secret");
}, 40_000);
