// The intake over real HTTP, on both backends: routing and tees, backpressure, /healthz,
// /metrics, listen rules, the schema gate, config reload, and what reaches the logs.
import { buildDocument } from "../../src/dispatch/document.ts";
import type { BatchRow } from "../../src/store/batches.ts";
import { HttpDestination } from "../../src/destinations/http.ts";
import { makeCtx } from "../destinations/support.ts";
import { cli } from "../helpers/cli.ts";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { isHookspoolError } from "../../src/errors.ts";
import { parseListen } from "../../src/config/listen.ts";
import { Intake } from "../../src/intake/server.ts";
import { createLogger } from "../../src/log.ts";
import { LOG_LINES, startIntake } from "../helpers/intake.ts";
import { tempDir } from "../helpers/tmp.ts";
import { spoolTable, startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { onBothWorlds } from "../helpers/world.ts";
import { waitFor } from "../helpers/proc.ts";

setDefaultTimeout(30_000);

const SECRET = "route-test-secret";
const sig = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;

const GH_TEMPLATE =
  'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "repo", ' +
  'event_type = "kind", attrs = { repo = "repo", class = "class" } }';

const ROUTED = `[sources.gh]
${GH_TEMPLATE}
secrets.secret = { file = "{{secret:gh}}" }
action = "hermes:gh-default"

[[routes]]
name = "gh-audit"
source = "gh"
tee = true
destination = "http:audit"

[[routes]]
name = "gh-ci"
source = "gh"
match = { class = "ci" }
destination = "hermes:gh-ci"

[[routes]]
name = "gh-ci-twice"
source = "gh"
match = { class = "ci" }
destination = "hermes:never"

[[routes]]
name = "gh-mirror"
source = "gh"
tee = true
match = { class = "ci" }
destination = "hermes:gh-ci"

[[routes]]
name = "gh-log"
source = "gh"
tee = true
match = { event_type = "push" }
destination = "script:log"

[destinations."http:audit"]
type = "http"
url = "https://audit.example.invalid/hook"

[destinations."script:log"]
argv = ["/bin/true"]
`;

async function send(t: WorldIntake, payload: object, headers: Record<string, string> = {}) {
  const body = JSON.stringify(payload);
  return t.post("/hooks/gh", body, { "X-Sig": sig(body), ...headers });
}

async function placed(t: WorldIntake, n: number) {
  const sql =
    "SELECT e.route, b.destination FROM events e JOIN batches b ON b.id = e.batch_id ORDER BY e.id DESC LIMIT ?";
  return (await t.world.rows.all(sql, n)).reverse();
}

describe("listen rules", () => {
  test("loopback only unless allow_non_loopback; unix sockets need absolute paths", () => {
    expect(parseListen("127.0.0.1:8650", false)).toEqual({ hostname: "127.0.0.1", port: 8650 });
    expect(parseListen("[::1]:1", false)).toEqual({ hostname: "::1", port: 1 });
    expect(parseListen("unix:/run/h.sock", false)).toEqual({ unix: "/run/h.sock" });
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return isHookspoolError(e) ? e.code : "other";
      }
    };
    expect(code(() => parseListen("0.0.0.0:8650", false))).toBe("E_CONFIG");
    expect(code(() => parseListen("192.168.1.5:8650", false))).toBe("E_CONFIG");
    expect(parseListen("0.0.0.0:8650", true)).toEqual({ hostname: "0.0.0.0", port: 8650 });
    expect(code(() => parseListen("unix:relative.sock", false))).toBe("E_CONFIG");
    expect(code(() => parseListen("nonsense", false))).toBe("E_CONFIG");
    expect(code(() => parseListen("127.0.0.1:70000", false))).toBe("E_CONFIG");
  });
});

describe("log lines", () => {
  test("JSON lines carry the fixed fields and nothing else", () => {
    const lines: string[] = [];
    const { setLogSink } = require("../../src/log.ts") as typeof import("../../src/log.ts");
    const restore = setLogSink((l) => lines.push(l));
    try {
      const log = createLogger("intake", { json: true, clock: new FakeClock(5) });
      log.info("queued", {
        source: "s",
        route: "r",
        batch: 1,
        event: 2,
        destination: "d",
        bytes: 3,
        tee: true,
        body: "SECRET",
      } as never);
    } finally {
      restore();
    }
    expect(JSON.parse(lines[0])).toEqual({
      ts: 5,
      level: "info",
      component: "intake",
      msg: "queued",
      source: "s",
      route: "r",
      batch: 1,
      event: 2,
      destination: "d",
      bytes: 3,
      tee: true,
    });
  });
});

onBothWorlds((open, backend) => {
  describe("route resolution through the intake", () => {
    test("first matching non-tee route wins; tees in file order; never two copies to one destination", async () => {
      const t = await startIntakeOn(open, ROUTED, { secrets: { gh: SECRET } });
      const before = LOG_LINES.length;
      try {
        const res = await send(t, { repo: "o/r", class: "ci", kind: "push" });
        expect(res.status).toBe(202);
        // primary gh-ci; tees: gh-audit, then gh-log; gh-mirror is skipped (hermes:gh-ci has a copy)
        expect(await placed(t, 3)).toEqual([
          { route: "gh-ci", destination: "hermes:gh-ci" },
          { route: "gh-audit", destination: "http:audit" },
          { route: "gh-log", destination: "script:log" },
        ]);
        expect(await t.count("events")).toBe(3);
        const lines = LOG_LINES.slice(before).filter((l) => l.includes("queued") && l.includes("source=gh"));
        expect(lines.filter((l) => l.includes("tee=true")).length).toBe(2);
        expect(lines.some((l) => l.includes("route=gh-ci") && !l.includes("tee=true"))).toBe(true);
      } finally {
        await t.stop();
      }
    });

    test("no matching non-tee route: the implicit route <source> with the action", async () => {
      const t = await startIntakeOn(open, ROUTED, { secrets: { gh: SECRET } });
      try {
        expect((await send(t, { repo: "o/r", class: "pr", kind: "issue" })).status).toBe(202);
        expect(await placed(t, 2)).toEqual([
          { route: "gh", destination: "hermes:gh-default" },
          { route: "gh-audit", destination: "http:audit" },
        ]);
      } finally {
        await t.stop();
      }
    });

    test("X-Hookspool-Route names the source when the proxy forwards another path; unknown names are 404", async () => {
      const t = await startIntakeOn(open, ROUTED, { secrets: { gh: SECRET } });
      try {
        const body = JSON.stringify({ repo: "o/r", class: "pr", kind: "x" });
        const res = await fetch(`${t.url}/provider/stable/url`, {
          method: "POST",
          body,
          headers: { "X-Sig": sig(body), "X-Hookspool-Route": "gh" },
        });
        expect(res.status).toBe(202);
        expect((await t.post("/hooks/nope", body, { "X-Sig": sig(body) })).status).toBe(404);
        expect((await fetch(`${t.url}/somewhere`, { method: "POST", body })).status).toBe(404);
        expect((await fetch(`${t.url}/hooks/gh`)).status).toBe(405);
      } finally {
        await t.stop();
      }
    });
  });

  const DEMO = `[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic" }
secrets.secret = { file = "{{secret:demo}}" }
action = "hermes:demo"
`;

  describe("backpressure and health", () => {
    // PostgreSQL keeps its own disk: the intake reads no free space there (its spoolFile is null).
    test.skipIf(backend === "postgres")(
      "free disk under limits.min_free_bytes: 503 with Retry-After 60; /healthz 503 naming the limit",
      async () => {
        let free = 10 * 1024 ** 3;
        const t = await startIntake(`[limits]\nmin_free_bytes = 1000000\n\n${DEMO}`, {
          secrets: { demo: SECRET },
          diskFree: () => free,
        });
        try {
          const body = JSON.stringify({ topic: "a" });
          expect((await t.post("/hooks/demo", body, { "X-Sig": sig(body) })).status).toBe(202);
          const ok = await fetch(`${t.url}/healthz`);
          expect(ok.status).toBe(200);
          free = 999_999;
          t.clock.advance(6); // the statfs reading is cached for 5 s
          const refused = await t.post("/hooks/demo", body, { "X-Sig": sig(body) });
          expect(refused.status).toBe(503);
          expect(refused.headers.get("retry-after")).toBe("60");
          const h = await fetch(`${t.url}/healthz`);
          expect(h.status).toBe(503);
          const doc = (await h.json()) as { ok: boolean; degraded: string[]; disk_free_bytes: number };
          expect(doc.ok).toBe(false);
          expect(doc.degraded.join(" ")).toContain("min_free_bytes");
          expect(doc.disk_free_bytes).toBe(999_999);
          free = 10 * 1024 ** 3;
          t.clock.advance(6);
          expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
        } finally {
          await t.stop();
        }
      },
    );

    // SQLite's max_page_count on the intake's own connection makes the refusal; a PostgreSQL pool has no such switch.
    test.skipIf(backend === "postgres")(
      "a write refused while free space is above the limit (a quota): 503, and the spool issue opens at once",
      async () => {
        const t = await startIntake(`[limits]\nmin_free_bytes = 1000000\n\n${DEMO}`, {
          secrets: { demo: SECRET },
          diskFree: () => 10 * 1024 ** 3,
          shareSpool: true,
        });
        // The intake's own connection may grow the file by a few pages only: SQLite answers
        // SQLITE_FULL for a 300 KB body whatever statfs says, while a small write still fits.
        const conn = intakeConnection(t);
        try {
          const pages = (conn.query("PRAGMA page_count").get() as { page_count: number }).page_count;
          conn.run(`PRAGMA max_page_count = ${pages + 8}`);
          // Under spool.inline_max_bytes, so the body goes into the row the quota refuses.
          const big = JSON.stringify({ topic: "b", pad: "y".repeat(200_000) });
          expect((await t.post("/hooks/demo", big, { "X-Sig": sig(big) })).status).toBe(503);
          expect(
            await t.count("issues", "fingerprint = 'spool:write_failed' AND kind = 'spool' AND state = 'open'"),
          ).toBe(1);
          expect(await (await fetch(`${t.url}/metrics`)).text()).toContain(
            'hookspool_caught_errors_total{component="intake",class="SQLITE_FULL"} 1',
          );
        } finally {
          conn.run("PRAGMA max_page_count = 1073741823");
          await t.stop();
        }
      },
    );

    // SQLite's max_page_count on the intake's own connection makes the refusal; a PostgreSQL pool has no such switch.
    test.skipIf(backend === "postgres")(
      "after a refused write /healthz is 503 with a fresh disk reading; " +
        "the probe's own write ends it, no enqueue needed",
      async () => {
        let free = 10 * 1024 ** 3;
        let reads = 0;
        const t = await startIntake(`[limits]\nmin_free_bytes = 1000000\n\n${DEMO}`, {
          secrets: { demo: SECRET },
          diskFree: () => {
            reads++;
            return free;
          },
          shareSpool: true,
        });
        const conn = intakeConnection(t);
        try {
          expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
          // Not one more page: every write is refused, the issue's own write included.
          const pages = (conn.query("PRAGMA page_count").get() as { page_count: number }).page_count;
          conn.run(`PRAGMA max_page_count = ${pages}`);
          // Under spool.inline_max_bytes, so the body goes into the row the quota refuses.
          const big = JSON.stringify({ topic: "b", pad: "y".repeat(200_000) });
          expect((await t.post("/hooks/demo", big, { "X-Sig": sig(big) })).status).toBe(503);
          const readsBefore = reads;
          free = 2 * 1024 ** 3;
          const h = await fetch(`${t.url}/healthz`);
          expect(reads).toBeGreaterThan(readsBefore); // measured after the failure, not cached from before it
          expect(h.status).toBe(503);
          const doc = (await h.json()) as { degraded: string[]; disk_free_bytes: number };
          expect(doc.disk_free_bytes).toBe(2 * 1024 ** 3);
          expect(doc.degraded.join(" ")).toContain("SQLITE_FULL");
          // The space is back and no sender writes: a quiet source must not show an outage for hours.
          conn.run("PRAGMA max_page_count = 1073741823");
          t.clock.advance(11);
          expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
          expect(await t.count("issues", "fingerprint = 'spool:write_failed' AND state = 'open'")).toBe(1);
        } finally {
          conn.run("PRAGMA max_page_count = 1073741823");
          await t.stop();
        }
      },
    );

    test(
      "/healthz: the status document, 200 when only soft problems;" +
        " writability proven by a recent enqueue or a probe",
      async () => {
        const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET } });
        try {
          const h = await fetch(`${t.url}/healthz`);
          expect(h.status).toBe(200);
          const doc = (await h.json()) as Record<string, unknown>;
          for (const k of [
            "ok",
            "degraded",
            "schema",
            "dispatcher",
            "spool",
            "batches",
            "oldest_pending_age_s",
            "destinations",
            "sources",
            "issues_open",
            "spool_bytes",
            "disk_free_bytes",
          ])
            expect(doc).toHaveProperty(k);
          expect((doc.degraded as string[]).join(" ")).toContain("dispatcher");
          expect((doc.spool as { writable_checked_age_s: number }).writable_checked_age_s).toBe(0);
          const probes = async () =>
            (await t.world.rows.get("SELECT value FROM meta WHERE key = 'write_probe_at'"))?.value;
          const first = await probes();
          expect(first).toBeDefined();
          t.clock.advance(10);
          await fetch(`${t.url}/healthz`);
          expect(await probes()).toBe(first); // at most one probe write per 30 s
          t.clock.advance(25);
          await fetch(`${t.url}/healthz`);
          expect(await probes()).not.toBe(first);
        } finally {
          await t.stop();
        }
      },
    );

    test("a verify that cannot run (secret unreadable) is 503, not 401, and logs no secret path content", async () => {
      const t = await startIntakeOn(open, DEMO.replace("{{secret:demo}}", "/nonexistent/secret"), {});
      try {
        const body = JSON.stringify({ topic: "a" });
        const res = await t.post("/hooks/demo", body, { "X-Sig": sig(body) });
        expect(res.status).toBe(503);
        expect(await t.count("events")).toBe(0);
      } finally {
        await t.stop();
      }
    });
  });

  describe("header bytes", () => {
    test(
      "a kept header sent as UTF-8 is kept as the sender wrote it;" + " one that is not UTF-8 is read as Latin-1",
      async () => {
        const t = await startIntakeOn(
          open,
          `${DEMO.replace("[sources.demo]", '[sources.demo]\nkeep_headers = ["X-Note", "X-Old"]')}`,
          { secrets: { demo: SECRET } },
        );
        try {
          const body = JSON.stringify({ topic: "h" });
          // fetch sends a header string byte for byte: these are the UTF-8 bytes of the text.
          const wire = (text: string) => Buffer.from(text, "utf8").toString("latin1");
          const res = await t.post("/hooks/demo", body, {
            "X-Sig": sig(body),
            "X-Note": wire("café \u2713 \u{1F600}"),
            "X-Old": "\u00e9t\u00e9",
          });
          expect(res.status).toBe(202);
          const row = (await t.world.rows.get("SELECT headers FROM events")) as { headers: string };
          expect(JSON.parse(row.headers)).toEqual({ "X-Note": "café \u2713 \u{1F600}", "X-Old": "\u00e9t\u00e9" });
        } finally {
          await t.stop();
        }
      },
    );
  });

  describe("a body that starts with a byte-order mark", () => {
    test(
      "stored as received (show --payload, export and an unwrap" +
        " delivery give it back), left out of a batch document",
      async () => {
        const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET } });
        try {
          const text = JSON.stringify({ topic: "bom", n: 1 });
          const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
          const res = await t.post("/hooks/demo", new Uint8Array(body), {
            "X-Sig": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`,
          });
          expect(res.status).toBe(202);
          const row = (await t.world.rows.get("SELECT payload, raw, raw_is_payload FROM events")) as {
            payload: string;
            raw: Uint8Array | null;
            raw_is_payload: number;
          };
          expect(Buffer.from(row.payload, "utf8").equals(body)).toBe(true);
          // The payload is the body byte for byte, so the raw body is stored once, as the payload.
          expect([row.raw, Number(row.raw_is_payload)]).toEqual([null, 1]);
          const [shown] = await t.world.operator.batchPayloads(1);
          expect(Buffer.from(shown.raw ?? new Uint8Array()).equals(body)).toBe(true);
          // The document is JSON: the mark cannot stand inside it.
          const doc = buildDocument({
            batch: (await t.world.operator.getBatch(1)) as BatchRow,
            content: await (await t.world.dispatch()).batchContent(1),
            deliveryId: "hs_x_1",
            attempt: 1,
          });
          expect(doc.body).not.toContain("\uFEFF");
          expect(JSON.parse(doc.body).events).toEqual([{ topic: "bom", n: 1 }]);
          // Unwrap sends the payload exactly as received.
          const hits: Uint8Array[] = [];
          const rx = Bun.serve({
            hostname: "127.0.0.1",
            port: 0,
            fetch: async (r) => (hits.push(new Uint8Array(await r.arrayBuffer())), new Response("ok")),
          });
          try {
            const dest = new HttpDestination({
              name: "relay",
              url: `http://127.0.0.1:${rx.port}/in`,
              allowInsecure: true,
              unsigned: true,
              unwrap: true,
              instanceId: "i",
            });
            const o = await dest.deliver(doc.body, makeCtx({ events: doc.events }));
            expect(o.kind).toBe("ok");
            expect(Buffer.from(hits[0]).equals(body)).toBe(true);
          } finally {
            rx.stop(true);
          }
          for (const argv of [["show", "1", "--payload"], ["export"]]) {
            const r = await cli(["--home", t.home, ...argv], { env: t.env });
            expect({ argv, bom: r.out.includes("\uFEFF") }).toEqual({ argv, bom: true });
          }
        } finally {
          await t.stop();
        }
      },
    );
  });

  describe("log fields a sender controls", () => {
    test("a long X-Forwarded-For or user agent is cut in every log line, never carried whole", async () => {
      const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET } });
      try {
        const before = LOG_LINES.length;
        const long = `198.51.100.${"9".repeat(5000)}`;
        const body = JSON.stringify({ topic: "x" });
        // Unverified: the refusal's log line names the remote, which is the proxy's forwarded address.
        const res = await t.post("/hooks/demo", body, {
          "X-Sig": "sha256=00",
          "X-Forwarded-For": long,
          "User-Agent": `agent-${"u".repeat(5000)}`,
        });
        expect(res.status).toBe(401);
        const lines = LOG_LINES.slice(before);
        expect(lines.some((l) => l.includes("198.51.100."))).toBe(true);
        for (const l of lines) {
          expect(l.length).toBeLessThan(1024);
          expect(l).not.toContain("9".repeat(257));
          expect(l).not.toContain("u".repeat(257));
        }
      } finally {
        await t.stop();
      }
    });
  });

  describe("event_meta's bounds", () => {
    test(
      "a type, dedup id or kept header over its bound is quarantined" +
        " (meta_too_long), so no document outgrows its cap",
      async () => {
        const t = await startIntakeOn(
          open,
          DEMO.replace('key = "topic"', 'key = "topic", dedup = "id", event_type = "type"').replace(
            "[sources.demo]",
            '[sources.demo]\nkeep_headers = ["X-Note"]',
          ),
          { secrets: { demo: SECRET } },
        );
        try {
          const post = (p: object, headers: Record<string, string> = {}) => {
            const body = JSON.stringify(p);
            return t.post("/hooks/demo", body, { "X-Sig": sig(body), ...headers });
          };
          expect(
            (await post({ topic: "ok", id: "d".repeat(500), type: "t".repeat(250) }, { "X-Note": "n".repeat(1000) }))
              .status,
          ).toBe(202);
          for (const [p, h] of [
            [{ topic: "a", id: "d".repeat(600) }, {}],
            [{ topic: "b", id: "1", type: "t".repeat(300) }, {}],
            [{ topic: "c", id: "2" }, { "X-Note": "n".repeat(1100) }],
            // JSON escaping counts: 200 control characters take 1,200 bytes as event_meta holds them.
            [{ topic: "d", id: "3", type: "\u0001".repeat(200) }, {}],
          ] as [object, Record<string, string>][]) {
            const res = await post(p, h);
            expect(res.status).toBe(202);
            expect(await res.json()).toMatchObject({ status: "quarantined" });
          }
          expect(await t.count("batches", "destination = 'quarantine' AND last_error = 'meta_too_long'")).toBe(4);
          expect(
            await t.count("events", "batch_id IN (SELECT id FROM batches WHERE destination <> 'quarantine')"),
          ).toBe(1);
        } finally {
          await t.stop();
        }
      },
    );
  });

  describe("metrics", () => {
    test("every intake counter with its labels after a scripted scenario", async () => {
      const t = await startIntakeOn(
        open,
        `${DEMO.replace('key = "topic"', 'key = "topic", dedup = "id", event_type = "type", ignore = "ping"')}`,
        { secrets: { demo: SECRET } },
      );
      try {
        const post = (p: object, good = true) => {
          const body = JSON.stringify(p);
          return t.post("/hooks/demo", body, { "X-Sig": good ? sig(body) : "sha256=00" });
        };
        await post({ topic: "a", id: "1" });
        await post({ topic: "a", id: "1" });
        await post({ topic: "a", id: "2" }, false);
        await post({ type: "ping" });
        await post({ id: "3" });
        const text = await (await fetch(`${t.url}/metrics`)).text();
        expect(text).toContain('hookspool_events_received_total{source="demo"} 1');
        expect(text).toContain('hookspool_events_duplicate_total{source="demo"} 1');
        expect(text).toContain('hookspool_events_quarantined_total{source="demo"} 1');
        expect(text).toContain('hookspool_requests_rejected_total{source="demo",reason="unverified"} 1');
        expect(text).toContain('hookspool_requests_rejected_total{source="demo",reason="ignored"} 1');
        expect(text).toContain("# TYPE hookspool_events_received_total counter");
      } finally {
        await t.stop();
      }
    });
  });

  describe("listen and lifecycle", () => {
    test("a Unix socket listener takes requests", async () => {
      const sock = join(tempDir(), "intake.sock");
      const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET }, listen: `unix:${sock}` });
      try {
        const body = JSON.stringify({ topic: "u" });
        const res = await fetch("http://localhost/hooks/demo", {
          unix: sock,
          method: "POST",
          body,
          headers: { "X-Sig": sig(body) },
        } as RequestInit);
        expect(res.status).toBe(202);
      } finally {
        await t.intake.stop();
        await t.stop(); // stop is safe twice
      }
    });

    test("the intake never migrates: an older schema refuses to start (exit 2, run hookspool migrate)", async () => {
      const home = tempDir();
      const w = await open({ dir: home });
      try {
        writeFileSync(join(home, "config.toml"), `${spoolTable(w)}[intake]\nlisten = "127.0.0.1:0"\n`);
        // The schema one version behind: SQLite's user_version, PostgreSQL's meta row.
        if (w.spool) w.spool.db.run("PRAGMA user_version = 2");
        else await w.rows.run("UPDATE meta SET value = '2' WHERE key = 'schema_version'");
        const env = w.pgUrl ? { HOOKSPOOL_PG_URL: w.pgUrl } : {};
        const loadOptions = { home, env, cwd: home };
        const intake = new Intake({
          loaded: loadConfig(loadOptions),
          loadOptions,
          clock: new FakeClock(),
          log: createLogger("intake"),
          env,
        });
        let err: unknown;
        try {
          await intake.start();
        } catch (e) {
          err = e;
        }
        expect(isHookspoolError(err, "E_SCHEMA")).toBe(true);
        expect((err as { exitCode: number }).exitCode).toBe(2);
        expect((err as { hint: string }).hint).toContain("hookspool migrate");
        await intake.stop();
      } finally {
        await w.close();
      }
    });
  });

  describe("config reload", () => {
    test(
      "a changed file is picked up; a bad one keeps the previous" + " config and opens config:file; a fix resolves it",
      async () => {
        const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET } });
        const file = join(t.home, "config.toml");
        const bump = (text: string, mtime: number) => {
          writeFileSync(file, text);
          utimesSync(file, mtime, mtime);
        };
        try {
          const body = JSON.stringify({ topic: "a" });
          const demo = DEMO.replace("{{secret:demo}}", join(t.home, "secret-demo"));
          const base = `${spoolTable(t.world)}[intake]\nlisten = "127.0.0.1:0"\n\n${demo}`;
          // The issue is written after the reload returns (the watcher does not wait for it): waited for.
          const issueIs = (state: string) =>
            waitFor(`config:file ${state}`, async () =>
              (await t.count("issues", `fingerprint = 'config:file' AND state = '${state}'`)) === 1 ? 1 : null,
            );
          bump(base.replace("hermes:demo", "hermes:demo2"), 2_000_000_000);
          expect(await t.intake.reloadIfChanged()).toBe(true);
          await t.post("/hooks/demo", body, { "X-Sig": sig(body) });
          expect(await placed(t, 1)).toEqual([{ route: "demo", destination: "hermes:demo2" }]);

          bump(`${base}\n[dispatch]\nparallel = "four"\n`, 2_000_000_100);
          expect(await t.intake.reloadIfChanged()).toBe(false);
          expect(await issueIs("open")).toBe(1);
          const again = JSON.stringify({ topic: "b" });
          expect((await t.post("/hooks/demo", again, { "X-Sig": sig(again) })).status).toBe(202); // still serving
          expect(await placed(t, 1)).toEqual([{ route: "demo", destination: "hermes:demo2" }]);

          bump(base, 2_000_000_200);
          expect(await t.intake.reloadIfChanged()).toBe(true);
          expect(await issueIs("resolved")).toBe(1);
          expect(await t.intake.reloadIfChanged()).toBe(false); // unchanged mtime: nothing to do
        } finally {
          await t.stop();
        }
      },
    );
  });

  test("raising max_body_bytes on reload takes effect without a restart (no cap fixed at start)", async () => {
    const t = await startIntakeOn(open, `${DEMO}max_body_bytes = 1000\n`, { secrets: { demo: SECRET } });
    const file = join(t.home, "config.toml");
    try {
      // Over every cap in force at start, intake.max_body_bytes included.
      const body = JSON.stringify({ topic: "a", pad: "p".repeat(1_000_000) });
      expect((await t.post("/hooks/demo", body, { "X-Sig": sig(body) })).status).toBe(413);
      writeFileSync(file, readFileSync(file, "utf8").replace("max_body_bytes = 1000", "max_body_bytes = 2000000"));
      utimesSync(file, 2_000_000_000, 2_000_000_000);
      expect(await t.intake.reloadIfChanged()).toBe(true);
      expect((await t.post("/hooks/demo", body, { "X-Sig": sig(body) })).status).toBe(202);
    } finally {
      await t.stop();
    }
  });

  // SQLite's query_only and a closed connection on the intake's own handle; a PostgreSQL pool reconnects instead.
  test.skipIf(backend === "postgres")(
    "a reload the spool cannot record (read-only) still resolves; /healthz and /metrics answer 503, never 500",
    async () => {
      const t = await startIntake(DEMO, { secrets: { demo: SECRET }, shareSpool: true });
      const conn = intakeConnection(t);
      const file = join(t.home, "config.toml");
      try {
        conn.run("PRAGMA query_only = ON");
        writeFileSync(file, "[dispatch]\nparallel = 'many'\n");
        utimesSync(file, 2_000_000_000, 2_000_000_000);
        // The config:file issue cannot be written; the reload is refused all the same, and nothing throws.
        expect(await t.intake.reloadIfChanged()).toBe(false);
        conn.run("PRAGMA query_only = OFF");
        // A spool that cannot even be read (here: its connection is gone).
        conn.close();
        const h = await fetch(`${t.url}/healthz`);
        expect(h.status).toBe(503);
        expect(((await h.json()) as { ok: boolean }).ok).toBe(false);
        expect((await fetch(`${t.url}/metrics`)).status).toBe(503);
      } finally {
        await t.stop().catch(() => {});
      }
    },
  );

  describe("logs", () => {
    test("X-Forwarded-For is believed from loopback for the log line only", async () => {
      const t = await startIntakeOn(open, DEMO, { secrets: { demo: SECRET } });
      try {
        const body = JSON.stringify({ topic: "a" });
        const before = LOG_LINES.length;
        await t.post("/hooks/demo", body, { "X-Sig": "sha256=bad", "X-Forwarded-For": "203.0.113.9" });
        const line = LOG_LINES.slice(before).find((l) => l.includes("unverified"));
        expect(line).toContain("remote=203.0.113.9");
        expect(line).toContain("source=demo");
        expect(line).toContain(`bytes=${body.length}`);
      } finally {
        await t.stop();
      }
    });
  });
});

/**
 * The intake's own connection, which the test handed it (shareSpool): its per-connection pragmas are the test's to set.
 */
function intakeConnection(t: Awaited<ReturnType<typeof startIntake>>) {
  if (!t.intakeSpool) throw new Error("started without shareSpool");
  return t.intakeSpool.db;
}
