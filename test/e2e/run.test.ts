// hookspool run end to end, as a real process: a burst of signed requests becomes one batch per
// key after the quiet window, signed so a stock Standard Webhooks library verifies it; a receiver
// that goes down and comes back gets every batch, in order, with the breaker visible in the
// database, and nothing is dropped.
import { expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const IN_SECRET = "e2e-inbound-secret";
const OUT_SECRET = `whsec_${Buffer.from("e2e-outbound-secret-bytes").toString("base64")}`;

interface Doc {
  key: string;
  count: number;
  events: { n: number }[];
}

test("a burst coalesces per key; an outage delays, never drops, and the breaker shows it", async () => {
  let up = true;
  // Every delivery is checked with a stock Standard Webhooks library as it arrives.
  const receiver = new Receiver<Doc>({ secret: OUT_SECRET, answer: () => (up ? 200 : 503) });
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
  const hs = await startHookspool(home, ["run"]);
  let db: SqliteSpool | null = null;
  const batches = (where: string) =>
    ((db as SqliteSpool).db.query(`SELECT COUNT(*) AS n FROM batches WHERE ${where}`).get() as { n: number }).n;
  try {
    const port = await hs.port();
    // Listening means migrated: the spool is there to read.
    db = openSpool(join(home, "spool.db"));
    const send = async (topic: string, n: number) => {
      const body = JSON.stringify({ topic, type: "tick", n });
      const res = await fetch(`http://127.0.0.1:${port}/hooks/demo`, {
        method: "POST",
        body,
        headers: {
          "Content-Type": "application/json",
          "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}`,
        },
      });
      expect(res.status).toBe(202);
    };
    for (let i = 1; i <= 8; i++) await send("alpha", i);
    for (let i = 1; i <= 4; i++) await send("beta", i);
    await waitFor("both bursts delivered", () => batches("1") === 2 && batches("state <> 'delivered'") === 0);
    // One batch per key, each delivered once: one wake-up per key.
    expect(receiver.accepted()).toHaveLength(2);
    const byKey = Object.fromEntries(receiver.accepted().map((d) => [d.doc.key, d.doc]));
    expect(byKey.alpha.count).toBe(8);
    expect(byKey.alpha.events.map((e) => e.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(byKey.beta.events.map((e) => e.n)).toEqual([1, 2, 3, 4]);

    // The receiver goes down; new bursts keep spooling in sealed, bounded batches.
    up = false;
    for (let i = 9; i <= 11; i++) await send("alpha", i);
    await waitFor(
      "the first outage burst to seal",
      () => batches("key = 'alpha' AND state <> 'open' AND state <> 'delivered'") >= 1,
    );
    for (let i = 12; i <= 14; i++) await send("alpha", i);
    for (let i = 5; i <= 6; i++) await send("beta", i);
    await waitFor("the breaker to open", () => {
      const row = db?.db.query("SELECT state FROM destinations WHERE name = 'receiver'").get() as {
        state: string;
      } | null;
      return row && row.state !== "closed";
    });
    up = true;
    await waitFor("every batch delivered", () => batches("state <> 'delivered'") === 0);
    const attempts = db.db
      .query("SELECT COUNT(*) AS n FROM attempts WHERE outcome = 'retry' AND klass = 'transport'")
      .get() as { n: number };
    expect(attempts.n).toBeGreaterThanOrEqual(3);
    expect(
      (db.db.query("SELECT state FROM destinations WHERE name = 'receiver'").get() as { state: string }).state,
    ).toBe("closed");
    // Every event exactly once per key, in order, none lost.
    const later = receiver
      .accepted()
      .slice(2)
      .map((d) => d.doc);
    const seen = (key: string) => later.filter((d) => d.key === key).flatMap((d) => d.events.map((e) => e.n));
    expect(seen("alpha")).toEqual([9, 10, 11, 12, 13, 14]);
    expect(seen("beta")).toEqual([5, 6]);
    expect(receiver.unverified).toEqual([]);
  } finally {
    db?.close();
    hs.kill("SIGTERM");
    expect(await hs.exited).toBe(0);
    receiver.stop();
  }
  expect(hs.stderr()).not.toContain(IN_SECRET);
  expect(hs.stderr()).not.toContain("e2e-outbound-secret");
}, 40_000);
