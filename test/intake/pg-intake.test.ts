// The intake on PostgreSQL, in-process on a real server: a signed request is committed before
// its 202, a duplicate is 200, a request the source cannot classify is quarantined (202) in the
// database, /healthz proves the database takes writes, and when the database goes away the
// intake answers 503 (the sender keeps the event), never a 5xx of its own and never an ack.
import type { StatusDoc } from "../../src/obs/status.ts";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { Intake } from "../../src/intake/server.ts";
import { createLogger } from "../../src/log.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { LOG_LINES, SECRET_SENTINEL } from "../helpers/logs.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "../helpers/pg.ts";
import { T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

const SECRET = "pg-intake-secret";

describe.skipIf(!PG_BIN)("the intake on PostgreSQL", () => {
  const server = serverForSuite();

  test("commit before ack, dedup, quarantine, /healthz; 503 when the database is gone", async () => {
    await server().createDatabase("intake");
    // The password is the planted secret: the suite-wide check fails any log line that carries it.
    const url = `postgres://${server().user}:${SECRET_SENTINEL}@localhost/intake?host=${server().socketDir}`;
    const look = new PgSpool({ path: server().socket, user: server().user, database: "intake" });
    await migratePg(look, "0123456789ab");
    const home = tempDir();
    writeFileSync(join(home, "in-secret"), SECRET, { mode: 0o600 });
    writeFileSync(
      join(home, "config.toml"),
      `[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n\n[intake]\nlisten = "127.0.0.1:0"\n\n` +
        `[sources.load]\ntemplate = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", ` +
        `event_type = "type", dedup = "id" }\nsecrets.secret = { file = "${join(home, "in-secret")}" }\n` +
        `action = "hermes:a"\n`,
    );
    const env = { PATH: process.env.PATH, HOME: home, HOOKSPOOL_PG_URL: url };
    const logged = LOG_LINES.length;
    const clock = new FakeClock(T0);
    const loadOptions = { home, env, cwd: home };
    const intake = new Intake({
      loaded: loadConfig(loadOptions),
      loadOptions,
      clock,
      log: createLogger("intake", { clock }),
      env,
    });
    await intake.start();
    const post = (body: string) =>
      fetch(`${intake.url}/hooks/load`, {
        method: "POST",
        body,
        headers: { "X-Sig": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}` },
      });
    try {
      const first = await post(JSON.stringify({ id: "e1", key: "k", type: "t" }));
      expect([first.status, ((await first.json()) as { status: string }).status]).toEqual([202, "queued"]);
      expect((await look.sql`SELECT COUNT(*)::int AS n FROM events`)[0].n).toBe(1);
      const dup = await post(JSON.stringify({ id: "e1", key: "k", type: "t" }));
      expect([dup.status, ((await dup.json()) as { status: string }).status]).toEqual([200, "duplicate"]);
      // Verified, but not JSON the template can read: kept as a dead quarantine batch, acked.
      const bad = await post("{not json");
      expect([bad.status, ((await bad.json()) as { status: string }).status]).toEqual([202, "quarantined"]);
      expect(
        (await look.sql`SELECT destination, state FROM batches ORDER BY id`).map(
          (r: Record<string, unknown>) => `${r.destination}:${r.state}`,
        ),
      ).toEqual(["hermes:a:open", "quarantine:dead"]);
      const health = await fetch(`${intake.url}/healthz`);
      expect(health.status).toBe(200);
      // The whole status document, as on SQLite and as `status` gives it: the quarantined batch and
      // the missing dispatcher are soft problems (200), each named.
      const doc = (await health.json()) as StatusDoc;
      expect(doc).toMatchObject({
        ok: false,
        backend: "postgres",
        batches: { open: 1, quarantined: 1 },
        dispatcher: { alive: false },
      });
      expect(doc.degraded).toEqual(["dispatcher: no heartbeat yet", "batches: 1 quarantined"]);
      expect(Object.keys(doc.destinations)).toEqual(["hermes:a"]);
      expect(doc.spool.writable_checked_age_s).toBe(0);
      expect(Object.keys(doc).sort()).toEqual([
        "backend",
        "batches",
        "dead_by_reason",
        "degraded",
        "destinations",
        "disk_free_bytes",
        "dispatcher",
        "dispatchers",
        "issues_open",
        "maintenance",
        "ok",
        "oldest_pending_age_s",
        "schema",
        "sources",
        "spool",
        "spool_bytes",
      ]);
      expect((await look.sql`SELECT COUNT(*)::int AS n FROM meta WHERE key = 'write_probe_at'`)[0].n).toBe(1);
      // /metrics: the intake's own counters and the spool's figures, read from the database.
      const metrics = await (await fetch(`${intake.url}/metrics`)).text();
      expect(metrics).toContain('hookspool_batches{state="quarantined"} 1');
      expect(metrics).toContain('hookspool_batches{state="open"} 1');
      // An open breaker and a dead batch show on /healthz as they do in status.
      await look.sql`INSERT INTO destinations (name, state, opened_at, cooldown_s)
        VALUES ('hermes:a', 'open', ${clock.now()}, 30)`;
      await look.sql`UPDATE batches SET state = 'dead', dead_reason = 'rejected', content_hash = 'sha256:x'
        WHERE destination = 'hermes:a'`;
      const worse = (await (await fetch(`${intake.url}/healthz`)).json()) as StatusDoc;
      expect(worse.degraded).toEqual([
        "dispatcher: no heartbeat yet",
        "batches: 1 dead (1 rejected)",
        "batches: 1 quarantined",
        "destination hermes:a: breaker open",
      ]);
      expect(worse.destinations["hermes:a"]).toMatchObject({ state: "open", cooldown_s: 30 });

      // The database goes (its sessions ended, the database dropped): a request is a 503, not an
      // ack, and /healthz says the spool is unwritable.
      await look.close();
      const admin = new PgSpool({ path: server().socket, user: server().user, database: "postgres" });
      await admin.sql`DROP DATABASE intake WITH (FORCE)`;
      await admin.close();
      const refused = await post(JSON.stringify({ id: "e2", key: "k", type: "t" }));
      // Read as the database busy, not full: a 503 with a short Retry-After, so the sender retries soon.
      expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
      clock.advance(60);
      const down = await fetch(`${intake.url}/healthz`);
      expect(down.status).toBe(503);
      expect(((await down.json()) as { degraded: string[] }).degraded.join(" ")).toContain("spool:");
    } finally {
      await intake.stop();
    }
    // The URL reached no log line (its password is the sentinel the suite checks every line for).
    expect(LOG_LINES.slice(logged).filter((l) => l.includes(server().socketDir))).toEqual([]);
  });
});
