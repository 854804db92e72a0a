// plaid.items: Plaid's webhooks (Plaid-Verification, an ES256 JWT whose key comes from Plaid's
// /webhook_verification_key/get, its iat within 300 s, its request_body_sha256 the body's hash),
// through a real `hookspool run` whose key lookups a stub Plaid on 127.0.0.1 answers, and against
// an intake on the kit's clock with a key made here.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash, randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import plaid from "../../bobbins/plaid/items/source.ts";
import { LOG_LINES, type TestIntake } from "../helpers/intake.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, type CaptureResult, eventByPayload, expectAsCaptured, kitIntake, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("plaid.items");
const kit = kitOf(bobbin);
const NOW = kit.now ?? 0;
const CLIENT_ID = kit.secrets.client_id;
const SECRET = kit.secrets.secret;
const sha256 = (s: string | Uint8Array) => createHash("sha256").update(s).digest("hex");

/** A stand-in for Plaid's /webhook_verification_key/get: the key of each known kid, Plaid's error for any other. */
function stubPlaid(keys: () => Record<string, JWK>, override?: () => Response | null) {
  const asked: { path: string; contentType: string | null; body: Record<string, unknown> }[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = (await req.json().catch(() => ({}))) as Record<string, unknown>;
      const path = new URL(req.url).pathname;
      asked.push({ path, contentType: req.headers.get("content-type"), body });
      const special = override?.();
      if (special) return special;
      if (req.method !== "POST" || path !== "/webhook_verification_key/get")
        return Response.json({ error_type: "INVALID_REQUEST", error_code: "NOT_FOUND" }, { status: 404 });
      const key = keys()[String(body.key_id)];
      if (!key)
        return Response.json(
          {
            error_type: "INVALID_INPUT",
            error_code: "INVALID_WEBHOOK_VERIFICATION_KEY_ID",
            error_message: "invalid key_id",
            display_message: null,
            request_id: "kitTestRequest02",
          },
          { status: 400 },
        );
      return Response.json({
        key: { created_at: NOW - 86_400, expired_at: null, ...key },
        request_id: "kitTestRequest03",
      });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, asked, stop: () => server.stop(true) };
}

// A run of its own, not the shared one (catalogue.ts): the instance's api_base_url names this
// test's stub Plaid, which must listen before the home is written, and the lookups the test counts
// are that stub's. (No other kit is on plaid's clock, so a shared run would be one of its own too.)
test(
  "a Plaid webhook is queued and delivered, a forged JWT is 401, a verified non-JSON body is " +
    "quarantined: hookspool run, keys from a stub Plaid",
  async () => {
    // The kit's [[http]] answer is what the stub Plaid serves: the public key the captures were signed with.
    const stub = kit.http.find((h) => h.url.endsWith("/webhook_verification_key/get"));
    if (!stub?.body) throw new Error("the kit has no key answer");
    const answer = JSON.parse(stub.body) as { key: JWK & { kid: string } };
    const plaidApi = stubPlaid(() => ({ [answer.key.kid]: answer.key }));
    const home = tempDir("hookspool-plaid-");
    const receiver = new Receiver<{ key: string; events: unknown[] }>({});
    const secretFiles: Record<string, string> = {};
    for (const [name, value] of Object.entries(kit.secrets)) {
      secretFiles[name] = join(home, `secret-${name}`);
      writeFileSync(secretFiles[name], value, { mode: 0o600 });
    }
    const instance = kit.instance.name;
    writeFileSync(
      join(home, "config.toml"),
      stringify({
        intake: { listen: "127.0.0.1:0" },
        dispatch: { poll_s: 0.05, heartbeat_s: 1 },
        bobbins: {
          [instance]: {
            bobbin: "plaid.items",
            secrets: Object.fromEntries(Object.entries(secretFiles).map(([n, f]) => [n, { file: f }])),
            // The kit's settings, with the key endpoint on the stub instead of the real Plaid.
            settings: { ...kit.instance.settings, api_base_url: plaidApi.url },
            dedup_window_s: 600,
            outputs: { "*": "receiver" },
            span: "immediate",
          },
        },
        destinations: {
          receiver: {
            type: "http",
            url: `http://127.0.0.1:${receiver.port}/in`,
            allow_insecure: true,
            unsigned: true,
            timeout_s: 5,
          },
        },
      }),
    );
    // The captures' JWTs were issued at the kit's now: the processes run on that clock.
    const hs = await startHookspool(home, ["run"], {
      env: { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(NOW - Date.now() / 1000) },
    });
    const results: CaptureResult[] = [];
    try {
      const port = await hs.port();
      for (const c of capturesOf(bobbin.files())) {
        const r = c.request;
        const headers = r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase()));
        const res = await fetch(`http://127.0.0.1:${port}${r.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${instance}`)}`, {
          method: r.method,
          headers,
          body: r.body,
        });
        results.push({ capture: c, instance, status: res.status, body: await res.text() });
      }
      const accepted = results.filter((x) => x.capture.expect.word === "queued");
      const db = openSpool(join(home, "spool.db"));
      try {
        const eventOf = (a: CaptureResult) =>
          db.db
            .query(
              "SELECT b.key, b.state, e.event_type, e.dedup_id FROM events e JOIN batches b ON b.id = " +
                "e.batch_id WHERE e.source = ? AND e.payload = ?",
            )
            .get(instance, new TextDecoder().decode(a.capture.request.body)) as {
            key: string;
            state: string;
            event_type: string;
            dedup_id: string;
          } | null;
        await waitFor(`${accepted.length} batches delivered`, () =>
          accepted.every((a) => eventOf(a)?.state === "delivered"),
        );
        for (const a of accepted) {
          expect(eventOf(a)).toEqual({
            key: a.capture.expect.key ?? "",
            state: "delivered",
            event_type: a.capture.expect.eventType ?? "",
            dedup_id: sha256(a.capture.request.body),
          });
        }
      } finally {
        db.close();
      }
      expect(receiver.accepted().map((d) => d.doc.key)).toEqual(accepted.map((a) => a.capture.expect.key ?? ""));
      expect(receiver.unverified).toEqual([]);
    } finally {
      hs.kill("SIGTERM");
      await hs.exited;
      receiver.stop();
      plaidApi.stop();
    }
    expectAsCaptured(results);
    expect(results.map((r) => [r.capture.file, r.status]).sort()).toEqual([
      ["captures/accepted.http", 202],
      ["captures/rejected.http", 401],
      ["captures/unclassifiable.http", 202],
    ]);
    expect(results.find((r) => r.capture.file === "captures/rejected.http")?.body).toBe("");
    // One lookup for the captures' one kid, with the instance's API keys, as JSON.
    expect(plaidApi.asked).toEqual([
      {
        path: "/webhook_verification_key/get",
        contentType: "application/json",
        body: { client_id: CLIENT_ID, secret: SECRET, key_id: answer.key.kid },
      },
    ]);
    for (const secret of Object.values(kit.secrets)) expect(hs.stderr()).not.toContain(secret);
  },
);

// ---------------------------------------------------------------------------------------------
// Against an intake on the kit's clock, with a key made here and served by a stub Plaid.

const KID = `kit-test-${randomUUID()}`;
const plaidKeys = await generateKeyPair("ES256");
const otherKeys = await generateKeyPair("ES256");
const plaidJwk: JWK = { ...(await exportJWK(plaidKeys.publicKey)), kid: KID, alg: "ES256", use: "sig" };

const sign = (
  body: string,
  opts: { iat?: number; kid?: string; key?: CryptoKey; claims?: Record<string, unknown> } = {},
) =>
  new SignJWT({ iat: opts.iat ?? NOW, request_body_sha256: sha256(body), ...opts.claims })
    .setProtectedHeader({ alg: "ES256", kid: opts.kid ?? KID, typ: "JWT" })
    .sign(opts.key ?? plaidKeys.privateKey);

const webhook = (item: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify(
    {
      environment: "sandbox",
      historical_update_complete: false,
      initial_update_complete: true,
      item_id: item,
      webhook_code: "SYNC_UPDATES_AVAILABLE",
      webhook_type: "TRANSACTIONS",
      ...extra,
    },
    null,
    2,
  );

/** An intake on the kit's clock whose plaid instance asks `api` for keys. */
function intakeFor(api: string): Promise<TestIntake> {
  return kitIntake("plaid.items", { table: { settings: { env: "sandbox", api_base_url: api }, dedup_window_s: 600 } });
}

const headers = (token: string) => ({ "Content-Type": "application/json", "Plaid-Verification": token });

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  let api: ReturnType<typeof stubPlaid>;
  beforeAll(async () => {
    api = stubPlaid(() => ({ [KID]: plaidJwk }));
    t = await intakeFor(api.url);
  });
  afterAll(async () => {
    await t.stop();
    api.stop();
  });

  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test(
    "a signed webhook is queued under its item_id and <webhook_type>.<webhook_code>; the same body " +
      "again is a duplicate",
    async () => {
      const body = webhook("kitTestItemEXAMPLE0000000000000000B1");
      const res = await t.post("/hooks/plaid", body, headers(await sign(body)));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      expect(stored(body)).toEqual({
        key: "kitTestItemEXAMPLE0000000000000000B1",
        event_type: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE",
        dedup_id: sha256(body),
      });
      // Plaid's retry, a minute later, under a fresh JWT: the body is the same.
      t.clock.set(NOW + 60);
      const retry = await t.post("/hooks/plaid", body, headers(await sign(body, { iat: NOW + 60 })));
      t.clock.set(NOW);
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      // The key was asked for once, with the instance's API keys.
      expect(api.asked).toEqual([
        {
          path: "/webhook_verification_key/get",
          contentType: "application/json",
          body: { client_id: CLIENT_ID, secret: SECRET, key_id: KID },
        },
      ]);
    },
  );

  test(
    "refused with 401 and an empty body, nothing stored: another key, a tampered body, a stale or " +
      "future iat, no header, not ES256, no request_body_sha256",
    async () => {
      const body = webhook("kitTestItemEXAMPLE0000000000000000B2");
      const hs256 = await new SignJWT({ iat: NOW, request_body_sha256: sha256(body) })
        .setProtectedHeader({ alg: "HS256", kid: KID })
        .sign(new TextEncoder().encode("kit-test-hmac-key-0000000000000000"));
      const cases: [string, string, Record<string, string>][] = [
        ["signed by another key under Plaid's kid", body, headers(await sign(body, { key: otherKeys.privateKey }))],
        ["a tampered body", body.replace("B2", "B3"), headers(await sign(body))],
        ["the hash of another body", body, headers(await sign(webhook("kitTestItemEXAMPLE0000000000000000B4")))],
        ["iat 301 s old", body, headers(await sign(body, { iat: NOW - 301 }))],
        ["iat 301 s ahead", body, headers(await sign(body, { iat: NOW + 301 }))],
        ["no Plaid-Verification", body, { "Content-Type": "application/json" }],
        ["HS256", body, headers(hs256)],
        ["not a JWT", body, headers("not-a-jwt")],
        [
          "no request_body_sha256",
          body,
          headers(
            await new SignJWT({ iat: NOW }).setProtectedHeader({ alg: "ES256", kid: KID }).sign(plaidKeys.privateKey),
          ),
        ],
      ];
      const events = t.count("events");
      for (const [name, b, h] of cases) {
        const res = await t.post("/hooks/plaid", b, h);
        expect([name, res.status, await res.text()]).toEqual([name, 401, ""]);
      }
      expect(t.count("events")).toBe(events);
      // The control: the same webhook, correctly signed, at 299 s either way.
      for (const iat of [NOW - 299, NOW + 299]) {
        const ok = await t.post(
          "/hooks/plaid",
          webhook(`kitTestItemEXAMPLE00000000000000${iat}`),
          headers(await sign(webhook(`kitTestItemEXAMPLE00000000000000${iat}`), { iat })),
        );
        expect([iat - NOW, ok.status]).toEqual([iat - NOW, 202]);
      }
    },
  );

  test("the log line names the class of a refusal and holds no token or API key", async () => {
    const body = webhook("kitTestItemEXAMPLE0000000000000000B5");
    const stale = await sign(body, { iat: NOW - 600 });
    const forged = await sign(body, { key: otherKeys.privateKey });
    const from = LOG_LINES.length;
    for (const token of [stale, forged, "a.b"])
      expect((await t.post("/hooks/plaid", body, headers(token))).status).toBe(401);
    expect((await t.post("/hooks/plaid", body, { "Content-Type": "application/json" })).status).toBe(401);
    const lines = LOG_LINES.slice(from).filter((l) => l.includes("unverified"));
    expect(lines.map((l) => /reason=(\w+)/.exec(l)?.[1])).toEqual([
      "stale",
      "mismatch",
      "malformed",
      "missing_signature",
    ]);
    for (const line of LOG_LINES.slice(from))
      for (const v of [stale, forged, CLIENT_ID, SECRET, "kitTestItemEXAMPLE"]) expect(line).not.toContain(v);
  });

  test("a verified webhook without an item_id, or not JSON, is quarantined", async () => {
    const body = JSON.stringify({
      environment: "sandbox",
      webhook_code: "STATUS_UPDATED",
      webhook_type: "IDENTITY_VERIFICATION",
      identity_verification_id: "idv_kitTestEXAMPLE01",
    });
    const res = await t.post("/hooks/plaid", body, headers(await sign(body)));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error, e.headers FROM events e JOIN batches b ON b.id = e.batch_id WHERE " +
          "b.destination = 'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string; headers: string } | null;
    expect(q?.last_error).toBe("key_missing");
    expect(q?.headers.toLowerCase()).not.toContain("plaid-verification");
    const res2 = await t.post("/hooks/plaid", "not json", headers(await sign("not json")));
    expect([res2.status, await res2.text()]).toEqual([202, '{"status":"quarantined"}']);
  });
});

describe("the key cache, against a flood of made-up kids", () => {
  let t: TestIntake;
  let api: ReturnType<typeof stubPlaid>;
  beforeAll(async () => {
    api = stubPlaid(() => ({ [KID]: plaidJwk }));
    t = await intakeFor(api.url);
  });
  afterAll(async () => {
    await t.stop();
    api.stop();
  });

  test(
    "200 well-formed JWTs with random kids cost at most one request to Plaid a minute; a known key " +
      "keeps verifying",
    async () => {
      const body = webhook("kitTestItemEXAMPLE0000000000000000C1");
      // The genuine key, learned first.
      expect((await t.post("/hooks/plaid", body, headers(await sign(body)))).status).toBe(202);
      expect(api.asked.length).toBe(1);

      // A minute on, the flood: each a well-formed ES256 JWT, each a kid Plaid never issued.
      t.clock.set(NOW + 61);
      const flood = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const b = webhook(`kitTestItemEXAMPLEflood000000000${String(i).padStart(4, "0")}`);
          const res = await t.post(
            "/hooks/plaid",
            b,
            headers(await sign(b, { iat: NOW + 61, kid: `kit-test-${randomUUID()}`, key: otherKeys.privateKey })),
          );
          return res.status;
        }),
      );
      expect(new Set(flood)).toEqual(new Set([401]));
      // One request for the whole flood: the first made-up kid; the other 199 were refused unasked.
      expect(api.asked.length).toBe(2);
      const lookups = api.asked.length;

      // The known key is not affected by the flood.
      const genuine = webhook("kitTestItemEXAMPLE0000000000000000C2");
      expect((await t.post("/hooks/plaid", genuine, headers(await sign(genuine, { iat: NOW + 61 })))).status).toBe(202);

      // Within the same minute, more made-up kids ask Plaid nothing more.
      t.clock.set(NOW + 100);
      for (let i = 0; i < 20; i++) {
        const b = webhook(`kitTestItemEXAMPLEmore0000000000${String(i).padStart(4, "0")}`);
        expect(
          (await t.post("/hooks/plaid", b, headers(await sign(b, { iat: NOW + 100, kid: `kit-test-${randomUUID()}` }))))
            .status,
        ).toBe(401);
      }
      expect(api.asked.length).toBe(lookups);
      t.clock.set(NOW);
    },
  );

  test("a kid Plaid does not know is remembered for ten minutes, then asked again", async () => {
    const kid = `kit-test-${randomUUID()}`;
    const body = webhook("kitTestItemEXAMPLE0000000000000000D1");
    const at = async (now: number) => {
      t.clock.set(now);
      const res = await t.post("/hooks/plaid", body, headers(await sign(body, { iat: now, kid })));
      return res.status;
    };
    const before = api.asked.length;
    expect(await at(NOW + 1000)).toBe(401);
    expect(api.asked.length).toBe(before + 1);
    // Two minutes later (past the once-a-minute limit), still remembered: no request.
    expect(await at(NOW + 1120)).toBe(401);
    expect(api.asked.length).toBe(before + 1);
    // Ten minutes after the answer, asked again.
    expect(await at(NOW + 1601)).toBe(401);
    expect(api.asked.length).toBe(before + 2);
    expect(api.asked.slice(before).map((a) => a.body.key_id)).toEqual([kid, kid]);
    t.clock.set(NOW);
  });
});

describe("Plaid's other answers", () => {
  test(
    "an error other than INVALID_WEBHOOK_VERIFICATION_KEY_ID (wrong API keys, Plaid down) is not " +
      "remembered: the kid is asked again a minute later",
    async () => {
      let failWith: Response | null = Response.json(
        {
          error_type: "INVALID_INPUT",
          error_code: "INVALID_API_KEYS",
          error_message: "invalid client_id or secret provided",
        },
        { status: 400 },
      );
      const api = stubPlaid(
        () => ({ [KID]: plaidJwk }),
        () => failWith,
      );
      const t = await intakeFor(api.url);
      try {
        const body = webhook("kitTestItemEXAMPLE0000000000000000E1");
        expect((await t.post("/hooks/plaid", body, headers(await sign(body)))).status).toBe(401);
        failWith = new Response("upstream down", { status: 503 });
        t.clock.set(NOW + 61);
        expect((await t.post("/hooks/plaid", body, headers(await sign(body, { iat: NOW + 61 })))).status).toBe(401);
        failWith = null;
        t.clock.set(NOW + 122);
        expect((await t.post("/hooks/plaid", body, headers(await sign(body, { iat: NOW + 122 })))).status).toBe(202);
        expect(api.asked.map((a) => a.body.key_id)).toEqual([KID, KID, KID]);
      } finally {
        await t.stop();
        api.stop();
      }
    },
  );

  test("a key Plaid marks expired verifies nothing", async () => {
    const api = stubPlaid(() => ({ [KID]: { ...plaidJwk, expired_at: NOW - 3600 } as JWK }));
    const t = await intakeFor(api.url);
    try {
      const body = webhook("kitTestItemEXAMPLE0000000000000000E2");
      expect((await t.post("/hooks/plaid", body, headers(await sign(body)))).status).toBe(401);
      expect(api.asked.length).toBe(1);
      expect(t.count("events")).toBe(0);
    } finally {
      await t.stop();
      api.stop();
    }
  });
});

describe("the settings", () => {
  test("env is sandbox or production; api_base_url is https, or http only on 127.0.0.1 or localhost", () => {
    const withConfig = plaid.withConfig;
    if (!withConfig) throw new Error("plaid.items takes no config");
    expect(plaid.configKeys).toEqual(["env", "api_base_url"]);
    for (const ok of [
      {},
      { env: "sandbox" },
      { env: "production", api_base_url: "" },
      { api_base_url: "https://plaid-proxy.example.com/" },
      { api_base_url: "http://127.0.0.1:8080" },
      { api_base_url: "http://localhost:8080/plaid" },
    ]) {
      expect(() => withConfig(ok)).not.toThrow();
    }
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ env: "development" }, /env must be "sandbox" or "production"/],
      [{ env: "Production" }, /env must be/],
      [{ api_base_url: "http://plaid.example.com" }, /must be https/],
      [{ api_base_url: "http://10.0.0.5:8080" }, /must be https/],
      [{ api_base_url: "ftp://127.0.0.1/" }, /must be https/],
      [{ api_base_url: "sandbox.plaid.com" }, /must be https/],
      [{ api_base_url: "https://user:pw@sandbox.plaid.com" }, /no credentials/],
    ];
    for (const [config, why] of refused) expect(() => withConfig(config)).toThrow(why);
  });

  test("an instance whose api_base_url is plain http on another host does not load", async () => {
    await expect(intakeFor("http://plaid.example.com")).rejects.toThrow(/api_base_url must be https/);
  });
});
