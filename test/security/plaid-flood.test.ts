// The Plaid unknown-kid guard under a flood, through a real intake: a code source
// verifying ES256 JWTs through the process-wide KeyCache makes at most one key fetch per minute
// whatever kids unauthenticated senders make up. A lookup the guard refuses, an unknown kid and
// a failed fetch all leave verify() false, so every such request is a plain 401: never a 5xx,
// never a fetch per request. Known keys keep working during the flood.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash, randomUUID } from "node:crypto";
import { join } from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { PAYLOAD_SENTINEL } from "../helpers/logs.ts";
import { plaidish } from "./fixtures/plaidish.ts";

let t: TestIntake;
let privateKey: CryptoKey;

beforeAll(async () => {
  t = await startIntake(`[sources.plaid]\nmodule = "${join(import.meta.dir, "fixtures", "plaidish.ts")}"\n`);
  const pair = await generateKeyPair("ES256");
  privateKey = pair.privateKey as CryptoKey;
  plaidish.cacheName = `plaidish:${randomUUID()}`;
  plaidish.clock = t.clock;
  plaidish.keys = { "key-good": await exportJWK(pair.publicKey) };
  plaidish.fetches.length = 0;
  plaidish.down = false;
});
afterAll(async () => {
  await t.stop();
});

/** A structurally valid ES256 token for `body`, signed by our key but naming `kid`. */
async function send(
  kid: string,
  payload: Record<string, unknown> = {
    item_id: "item-1",
    webhook_type: "TRANSACTIONS",
    note: PAYLOAD_SENTINEL,
    n: randomUUID(),
  },
): Promise<Response> {
  const body = JSON.stringify(payload);
  const token = await new SignJWT({ request_body_sha256: createHash("sha256").update(body).digest("hex") })
    .setProtectedHeader({ alg: "ES256", kid })
    .setIssuedAt(Math.floor(t.clock.now()))
    .sign(privateKey);
  return t.post("/hooks/plaid", body, { "Content-Type": "application/json", "Plaid-Verification": token });
}

/** `n` requests with fresh random kids, `wave` at a time, the fake clock moving `stepS` per wave. */
async function flood(n: number, wave: number, stepS: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i += wave) {
    const answers = await Promise.all(Array.from({ length: Math.min(wave, n - i) }, () => send(`kid-${randomUUID()}`)));
    for (const a of answers) {
      statuses.push(a.status);
      expect(await a.text()).toBe("");
    }
    t.clock.advance(stepS);
  }
  return statuses;
}

test(
  "a known key verifies; 200 random kids within one minute make one fetch and are all 401; the " +
    "next minute allows one more",
  async () => {
    // The control: a real kid is fetched once and then served from the cache.
    expect((await send("key-good")).status).toBe(202);
    expect((await send("key-good")).status).toBe(202);
    expect(plaidish.fetches).toEqual(["key-good"]);

    t.clock.advance(60);
    const start = t.clock.now();
    const statuses = await flood(200, 20, 5); // 10 waves over 50 s of fake time
    expect(t.clock.now() - start).toBeLessThan(60);
    expect(statuses.length).toBe(200);
    expect(statuses.filter((s) => s !== 401)).toEqual([]);
    expect(plaidish.fetches.length).toBe(2); // key-good, and the flood's one
    expect(plaidish.fetches[1]).toStartWith("kid-");
    // The flood never locked the known key out, and cost no fetch for it.
    expect((await send("key-good")).status).toBe(202);
    expect(plaidish.fetches.length).toBe(2);
    expect(t.count("events")).toBe(3);

    // 60 s after the flood's fetch the guard allows exactly one more, then closes again.
    t.clock.set(start + 60);
    expect((await send(`kid-${randomUUID()}`)).status).toBe(401);
    expect(plaidish.fetches.length).toBe(3);
    expect((await send(`kid-${randomUUID()}`)).status).toBe(401);
    expect(plaidish.fetches.length).toBe(3);
    // The kid the flood had fetched is negative-cached for 10 minutes: even after the interval it is not fetched again.
    t.clock.advance(61);
    expect((await send(plaidish.fetches[1])).status).toBe(401);
    expect(plaidish.fetches.length).toBe(3);
  },
);

test(
  "with the key server down the flood is still one fetch per minute, every answer 401, and known " +
    "keys still verify",
  async () => {
    t.clock.advance(600);
    plaidish.down = true;
    const before = plaidish.fetches.length;
    try {
      const statuses = await flood(100, 25, 10);
      expect(statuses.filter((s) => s !== 401)).toEqual([]);
      expect(plaidish.fetches.length - before).toBe(1);
      expect((await send("key-good")).status).toBe(202);
      expect(plaidish.fetches.length - before).toBe(1);
    } finally {
      plaidish.down = false;
    }
  },
);
