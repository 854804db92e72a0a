// The /outcomes endpoint's own rules, on a store that a test controls: which paths it answers,
// the method and size it takes, and a spool that cannot take the report (503, to be sent
// again, never a 500). The signed path end to end is in test/e2e/outcomes.test.ts.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { seededRng, systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { handleOutcome, OUTCOME_MAX_BYTES, outcomePath } from "../../src/intake/outcomes.ts";
import { createLogger } from "../../src/log.ts";
import type { OutcomeStore } from "../../src/store/api.ts";
import { tempDir } from "../helpers/tmp.ts";
import "../helpers/intake.ts"; // captures log lines instead of printing them

const SECRET = `whsec_${Buffer.from("outcome-unit-secret-bytes").toString("base64")}`;
const ID = "hs_0123456789ab_7";

function deps(store: OutcomeStore) {
  const home = tempDir();
  writeFileSync(join(home, "secret"), SECRET, { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[sources.s]\naction = "a"\n[destinations.a]\ntype = "http"\nurl = "https://example.invalid/"\n` +
      `secret = { file = "${join(home, "secret")}" }\noutcome = "await"\n`,
  );
  const config = loadConfig({ home, env: {}, cwd: home }).config;
  return { store, config: () => config, clock: systemClock, rng: seededRng(1), log: createLogger("intake") };
}

function request(o: { method?: string; body?: string; sign?: boolean } = {}) {
  const body = o.body ?? JSON.stringify({ status: "ok" });
  const at = new Date();
  const headers = new Headers({
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
  });
  if (o.sign !== false) {
    headers.set("webhook-id", ID);
    headers.set("webhook-timestamp", String(Math.floor(at.getTime() / 1000)));
    headers.set("webhook-signature", new Webhook(SECRET).sign(ID, at, body));
  }
  return {
    deliveryId: ID,
    method: o.method ?? "POST",
    headers,
    readBody: async (cap: number) =>
      Buffer.byteLength(body) > cap ? ("too_large" as const) : new TextEncoder().encode(body),
  };
}

const awaiting: OutcomeStore = {
  awaitedDelivery: async () => ({ batchId: 7, destination: "a", state: "awaiting", awaiting: true, inFlight: false }),
  reportOutcome: async () => ({ kind: "settled", batchId: 7, destination: "a", state: "delivered" }),
};

describe("POST /outcomes/<webhook-id>", () => {
  test("only a hookspool delivery id under /outcomes/ is answered; anything else there is not found", () => {
    expect(outcomePath("/outcomes/hs_0123456789ab_7")).toBe("hs_0123456789ab_7");
    expect(outcomePath("/outcomes/hs_0123456789ab_7_r2/")).toBe("hs_0123456789ab_7_r2");
    expect(outcomePath("/outcomes/../etc")).toBe("malformed");
    expect(outcomePath("/outcomes/msg_1")).toBe("malformed");
    expect(outcomePath("/hooks/github")).toBeNull();
  });

  test("another method is 405; a body over the cap is 413, unread by the store", async () => {
    let asked = 0;
    const counting: OutcomeStore = {
      ...awaiting,
      awaitedDelivery: async (id) => (asked++, awaiting.awaitedDelivery(id)),
    };
    expect((await handleOutcome(deps(counting), request({ method: "GET" }))).status).toBe(405);
    expect(
      (
        await handleOutcome(
          deps(counting),
          request({ body: JSON.stringify({ status: "ok", reason: "x".repeat(OUTCOME_MAX_BYTES) }) }),
        )
      ).status,
    ).toBe(413);
    expect(asked).toBe(0);
  });

  test("signed and settled: 200; unsigned: 401 and the store is not asked to settle", async () => {
    let settled = 0;
    const store: OutcomeStore = { ...awaiting, reportOutcome: async (r) => (settled++, awaiting.reportOutcome(r)) };
    const ok = await handleOutcome(deps(store), request());
    expect(ok.status).toBe(200);
    expect((await handleOutcome(deps(store), request({ sign: false }))).status).toBe(401);
    expect(settled).toBe(1);
  });

  test("a spool that refuses the write is 503 with Retry-After, not a 500", async () => {
    const full: OutcomeStore = {
      ...awaiting,
      reportOutcome: async () =>
        Promise.reject(Object.assign(new Error("database or disk is full"), { name: "SQLiteError" })),
    };
    const r = await handleOutcome(deps(full), request());
    expect(r.status).toBe(503);
    expect(r.headers["Retry-After"]).toBe("10");
  });
});
