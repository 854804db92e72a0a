// A quarantine replay classifies each stored request again exactly as the intake would take it:
// the steps after verify (so ignore() applies), the path and query it came with (its secret
// parameters never stored), and the headers its plugin classifies by.
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { cli } from "../helpers/cli.ts";
import { startIntake } from "../helpers/intake.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { tempDir } from "../helpers/tmp.ts";

const SRC = join(import.meta.dir, "..", "..", "src");
const TOKEN = `push-${SECRET_SENTINEL}`;

/** A code source keyed by the query's room; version 1 has a bug in key(). */
function plugin(version: 1 | 2): string {
  return `import { defineSource } from "${SRC}/plugin/types.ts";
import { staticTokenWhy } from "${SRC}/plugin/verify.ts";
export default defineSource({
  authHeaders: [],
  secrets: ["secret"],
  classifyHeaders: ["X-Kind"],
  verify: (req, s) => staticTokenWhy(req.query.token ?? null, s.get("secret")) ?? true,
  ignore: (req) => (${version} === 2 && req.header("x-kind") === "ping" ? "ping" : null),
  key: (_p, req) => {
    if (${version} === 1) throw new TypeError("a bug");
    return req.query.room ?? "";
  },
  eventType: (_p, req) => req.header("x-kind") ?? "",
  action: "hermes:rooms",
});
`;
}

test("replay runs ignore(), sees the stored query and classify headers, and never stored the token", async () => {
  const code = tempDir();
  writeFileSync(join(code, "plugin-v1.ts"), plugin(1));
  writeFileSync(join(code, "plugin-v2.ts"), plugin(2));
  const t = await startIntake(
    `[sources.src]\nmodule = "${code}/plugin-v1.ts"\nsecrets.secret = { file = "{{secret:tok}}" }\n`,
    { secrets: { tok: TOKEN } },
  );
  const url = `/hooks/src?room=r1&token=${encodeURIComponent(TOKEN)}`;
  for (const kind of ["push", "ping"]) {
    const res = await fetch(`${t.intake.url}${url}`, {
      method: "POST",
      body: "{}",
      headers: { "X-Kind": kind, "Content-Type": "application/json" },
    });
    expect(await res.json()).toEqual({ status: "quarantined" });
  }
  await t.stop();
  const db = new Database(join(t.home, "spool.db"));
  try {
    const stored = db
      .query(
        "SELECT e.url, e.headers, b.last_error, b.id FROM events e JOIN batches b ON b.id = e.batch_id ORDER BY e.id",
      )
      .all() as { url: string; headers: string; last_error: string; id: number }[];
    expect(stored.map((s) => [s.url, s.last_error, JSON.parse(s.headers)["x-kind"]])).toEqual([
      ["/hooks/src?room=r1", "plugin_error:TypeError", "push"],
      ["/hooks/src?room=r1", "plugin_error:TypeError", "ping"],
    ]);
    expect(JSON.stringify(db.query("SELECT * FROM events").all())).not.toContain(SECRET_SENTINEL);

    // The fix ships as a new module file; replay classifies both requests with it.
    const cfg = join(t.home, "config.toml");
    writeFileSync(cfg, readFileSync(cfg, "utf8").replace("plugin-v1.ts", "plugin-v2.ts"));
    const env = { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(t.clock.now() - systemClock.now()) };
    const r = await cli(["--home", t.home, "--json", "replay", "--dead", "--destination", "quarantine"], { env });
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(r.out).replayed).toMatchObject([
      { batchId: stored[0].id, kind: "reclassified", ignored: 0, results: [{ status: "queued" }] },
      { batchId: stored[1].id, kind: "reclassified", ignored: 1, results: [] },
    ]);
    expect(
      db
        .query(
          "SELECT b.key, b.destination, e.event_type FROM events e JOIN batches b ON b.id = " +
            "e.batch_id WHERE e.payload IS NOT NULL",
        )
        .all(),
    ).toEqual([{ key: "r1", destination: "hermes:rooms", event_type: "push" }]);
    expect(db.query("SELECT state FROM issues WHERE fingerprint = 'config:plugin:src'").get()).toEqual({
      state: "resolved",
    });
  } finally {
    db.close();
  }
});
