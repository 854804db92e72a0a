// The http destination: https and TLS rules, redirects, rotation signatures, static headers,
// the one deadline (a status line is the answer, however its body drips), per-batch ids.
import { describe, expect, test } from "bun:test";
import { createHmac, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { HttpDestination, type HttpDestinationOptions } from "../../src/destinations/http.ts";
import { deliveryId } from "../../src/delivery.ts";
import { VERSION } from "../../src/version.ts";
import { tempDir } from "../helpers/tmp.ts";
import { documentFor, events, makeCtx, stub, timed } from "./support.ts";

const whsec = () => `whsec_${randomBytes(24).toString("base64")}`;

function secretFile(value: string): string {
  const p = join(tempDir(), "secret");
  writeFileSync(p, `${value}\n`, { mode: 0o600 });
  return p;
}

function http(url: string, o: Partial<HttpDestinationOptions> = {}): HttpDestination {
  // Without a secret it must say unsigned (a test that is about something else).
  return new HttpDestination({
    name: "audit",
    url,
    allowInsecure: true,
    instanceId: "inst1",
    ...(o.secret ? {} : { unsigned: true }),
    ...o,
  });
}

/** A self-signed certificate for 127.0.0.1, or null when openssl is not installed. */
function selfSigned(): { key: string; cert: string } | null {
  if (!Bun.which("openssl")) return null;
  const dir = tempDir();
  const r = Bun.spawnSync(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-keyout",
      "k.pem",
      "-out",
      "c.pem",
    ],
    { cwd: dir, stdout: "ignore", stderr: "ignore" },
  );
  if (r.exitCode !== 0) return null;
  return { key: readFileSync(join(dir, "k.pem"), "utf8"), cert: readFileSync(join(dir, "c.pem"), "utf8") };
}

describe("http URL and TLS rules", () => {
  test("http:// without allow_insecure is config, and no request is made", async () => {
    const s = stub();
    const dest = http(`${s.url}/in`, { allowInsecure: false });
    const o = await dest.deliver(documentFor(events(1)), makeCtx());
    expect(o).toMatchObject({ kind: "retry", klass: "config", reason: "https required" });
    expect(s.hits).toHaveLength(0);
    expect(dest.check()).toEqual(["https required (http:// needs allow_insecure = true)"]);
    expect(http(`${s.url}/in`, { allowInsecure: true }).check()).toEqual([]);
  });

  test("a URL that is not http(s) is config", async () => {
    const o = await http("ftp://127.0.0.1/x").deliver("{}", makeCtx());
    expect(o).toMatchObject({ klass: "config", reason: "bad url" });
    expect((await http("not a url").deliver("{}", makeCtx())).klass).toBe("config");
  });

  const tls = selfSigned();
  test.skipIf(tls === null)(
    "TLS is verified: a self-signed certificate is config (skipped only without openssl)",
    async () => {
      if (!tls) return;
      const s = stub(() => new Response("ok"), tls);
      expect(s.url).toStartWith("https://");
      const o = await http(`${s.url}/in`, { allowInsecure: false }).deliver(documentFor(events(1)), makeCtx());
      expect(o).toMatchObject({ kind: "retry", klass: "config", reason: "tls certificate rejected" });
      expect(s.hits).toHaveLength(0);
    },
  );
  if (tls === null) console.warn("http.test.ts: openssl is missing; the TLS verification test is skipped");

  test("a redirect is never followed and is permanent", async () => {
    const target = stub(() => new Response("reached"));
    const redirect = stub(
      () => new Response(null, { status: 302, headers: { location: `${target.url}/elsewhere?token=x` } }),
    );
    const o = await http(`${redirect.url}/in`).deliver(documentFor(events(1)), makeCtx());
    expect(o).toMatchObject({ kind: "dead", klass: "permanent", status: 302 });
    expect(o.detail).not.toContain("token");
    expect(redirect.hits).toHaveLength(1);
    expect(target.hits).toHaveLength(0);
  });
});

describe("http signing and headers", () => {
  test("with secret_previous, each secret's signature verifies with standardwebhooks, current first", async () => {
    const current = whsec();
    const previous = whsec();
    const older = "raw-older-secret";
    const s = stub();
    const dest = http(`${s.url}/in`, {
      secret: { file: secretFile(current) },
      secretPrevious: [{ file: secretFile(previous) }, { env: "OLDER" }],
      env: { OLDER: older },
    });
    const body = documentFor(events(2));
    expect((await dest.deliver(body, makeCtx())).kind).toBe("ok");
    const [hit] = s.hits;
    expect(hit.body).toBe(body);
    const sigs = hit.headers["webhook-signature"].split(" ");
    expect(sigs).toHaveLength(3);
    for (const key of [current, previous]) expect(() => new Webhook(key).verify(hit.body, hit.headers)).not.toThrow();
    expect(() => new Webhook(older, { format: "raw" }).verify(hit.body, hit.headers)).not.toThrow();
    // Current first: the first entry alone verifies under the current secret.
    expect(() => new Webhook(current).verify(hit.body, { ...hit.headers, "webhook-signature": sigs[0] })).not.toThrow();
    // X-Hub-Signature-256 uses the current secret's raw UTF-8 (the file's trailing newline dropped).
    expect(hit.headers["x-hub-signature-256"]).toBe(
      `sha256=${createHmac("sha256", current).update(body).digest("hex")}`,
    );
  });

  test("extra static headers are sent and cannot override hookspool's", async () => {
    const s = stub();
    const dest = http(`${s.url}/in`, {
      secret: { env: "S" },
      env: { S: "k" },
      headers: {
        "X-Extra": "yes",
        "User-Agent": "evil",
        "webhook-id": "evil",
        "Content-Type": "text/plain",
        "X-Hookspool-Batch": "0",
        "Content-Length": "1",
      },
    });
    expect((await dest.deliver("{}", makeCtx())).kind).toBe("ok");
    const h = s.hits[0].headers;
    expect(h["x-extra"]).toBe("yes");
    expect(h["user-agent"]).toBe(`hookspool/${VERSION}`);
    expect(h["webhook-id"]).toBe("hs_inst1_7");
    expect(h["content-type"]).toBe("application/json");
    expect(h["x-hookspool-batch"]).toBe("7");
    expect(h["content-length"]).toBe("2");
    expect(dest.check().filter((p) => p.includes("set by hookspool"))).toHaveLength(5);
  });

  test(
    "no secret: a config outcome without a request, never an unsigned delivery; unsigned = true " + "sends none",
    async () => {
      const s = stub();
      const dest = new HttpDestination({ name: "audit", url: `${s.url}/in`, allowInsecure: true, instanceId: "inst1" });
      expect(await dest.deliver(documentFor(events(1)), makeCtx())).toMatchObject({
        kind: "retry",
        klass: "config",
        reason: "no signing secret",
      });
      expect(s.hits).toHaveLength(0);
      expect(dest.check()).toEqual([
        "no secret: every delivery carries webhook-signature; set secret = { file = ... }, or unsigned " +
          "= true to deliver unsigned",
      ]);
      const unsigned = http(`${s.url}/in`, { unsigned: true });
      expect((await unsigned.deliver(documentFor(events(1)), makeCtx())).kind).toBe("ok");
      expect(s.hits).toHaveLength(1);
      expect(s.hits[0].headers["webhook-signature"]).toBeUndefined();
      expect(s.hits[0].headers["webhook-id"]).toBeDefined();
    },
  );

  test("an unreadable secret is a config outcome, not a throw, and no request is made", async () => {
    const s = stub();
    const dest = http(`${s.url}/in`, { secret: { file: join(tempDir(), "missing") } });
    const o = await dest.deliver("{}", makeCtx());
    expect(o).toMatchObject({ kind: "retry", klass: "config", reason: "secret unreadable" });
    expect(s.hits).toHaveLength(0);
    expect(dest.check()[0]).toContain("cannot be read");
    const prev = http(`${s.url}/in`, { secret: { env: "S" }, secretPrevious: [{ env: "GONE" }], env: { S: "k" } });
    expect((await prev.deliver("{}", makeCtx())).reason).toBe("previous secret unreadable");
  });

  test("the secret is read at each attempt", async () => {
    const s = stub();
    const file = secretFile("one");
    const dest = http(`${s.url}/in`, { secret: { file } });
    await dest.deliver("{}", makeCtx());
    writeFileSync(file, "two");
    await dest.deliver("{}", makeCtx());
    expect(() => new Webhook("one", { format: "raw" }).verify(s.hits[0].body, s.hits[0].headers)).not.toThrow();
    expect(() => new Webhook("two", { format: "raw" }).verify(s.hits[1].body, s.hits[1].headers)).not.toThrow();
  });

  test("idempotency is per batch: two attempts carry the same id", async () => {
    const s = stub();
    const dest = http(`${s.url}/in`);
    expect(dest.idempotency).toBe("per-batch");
    for (const [attempt, attemptId] of [
      [1, 501],
      [2, 502],
    ]) {
      await dest.deliver("{}", makeCtx({ attempt, deliveryId: deliveryId(dest.idempotency, "inst1", 7, attemptId) }));
    }
    expect(s.hits.map((h) => h.headers["webhook-id"])).toEqual(["hs_inst1_7", "hs_inst1_7"]);
    expect(s.hits.map((h) => h.headers["x-hookspool-attempt"])).toEqual(["1", "2"]);
  });

  test("a document over max_body_bytes is permanent without a request", async () => {
    const s = stub();
    const o = await http(`${s.url}/in`, { maxBodyBytes: 10 }).deliver(documentFor(events(1)), makeCtx());
    expect(o).toMatchObject({
      kind: "dead",
      klass: "permanent",
      reason: "body over max_body_bytes",
      deadReason: "config",
    });
    expect(s.hits).toHaveLength(0);
  });

  test("defaults: per batch, four in flight, 1 MiB, 30 s", () => {
    const d = http("https://example.invalid/x");
    expect([d.type, d.maxInflight, d.maxBodyBytes, d.timeoutS, d.unwrap]).toEqual(["http", 4, 1048576, 30, false]);
  });
});

describe("http deadline", () => {
  const dripping = (status: number) =>
    stub(
      () =>
        new Response(
          new ReadableStream({
            async pull(c) {
              await Bun.sleep(100);
              c.enqueue(new TextEncoder().encode("."));
            },
          }),
          { status },
        ),
    );

  test(
    "a 2xx whose body drips past the deadline: the status line is the answer, read no further, " + "delivered",
    async () => {
      const s = dripping(200);
      const { value: o, ms } = await timed(() => http(`${s.url}/in`).deliver("{}", makeCtx({ workerInS: 0.6 })));
      expect(o).toMatchObject({ kind: "ok", status: 200 });
      // The attempt still ends at its deadline, never later.
      expect(ms).toBeGreaterThanOrEqual(500);
      expect(ms).toBeLessThan(2000);
    },
  );

  test("a 5xx whose body drips: its status decides (a transport failure), at the deadline", async () => {
    const s = dripping(503);
    const { value: o, ms } = await timed(() => http(`${s.url}/in`).deliver("{}", makeCtx({ workerInS: 0.6 })));
    expect(o).toMatchObject({ kind: "retry", klass: "transport", status: 503 });
    expect(ms).toBeLessThan(2000);
  });

  test("a receiver that never sends its status line is cut at the deadline", async () => {
    const s = stub(async () => {
      await Bun.sleep(3000);
      return new Response("late");
    });
    const { value: o, ms } = await timed(() => http(`${s.url}/in`).deliver("{}", makeCtx({ workerInS: 0.6 })));
    expect(o).toMatchObject({ kind: "retry", klass: "transport", reason: "worker deadline" });
    expect(ms).toBeLessThan(2000);
  });

  test("a deadline already passed makes no request", async () => {
    const s = stub();
    const o = await http(`${s.url}/in`).deliver("{}", makeCtx({ workerInS: -1 }));
    expect(o.klass).toBe("transport");
    expect(s.hits).toHaveLength(0);
  });
});
