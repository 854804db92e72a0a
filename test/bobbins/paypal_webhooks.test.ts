// paypal.webhooks: PayPal's webhooks (PAYPAL-TRANSMISSION-SIG, base64 SHA256withRSA over
// "<transmission id>|<transmission time>|<webhook id>|<CRC-32 of the body>" under the key of the
// certificate at PAYPAL-CERT-URL), against an intake on the kit's clock whose network is the
// kit's [[http]] answer (the certificate), counting every request the source makes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { capturesOf, type Capture } from "../../src/bobbin/captures.ts";
import { useNetwork } from "../../src/net/http.ts";
import { stubFetch } from "../../src/net/stubs.ts";
import paypal, { certUrlOf } from "../../bobbins/paypal/webhooks/source.ts";
import { crc32Decimal } from "../../src/plugin/verify.ts";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";
import { tempDir } from "../helpers/tmp.ts";
import {
  builtin,
  type CaptureResult,
  eventByPayload,
  expectAsCaptured,
  KIT_DESTINATION,
  kitIntake,
  kitOf,
} from "./catalogue.ts";

const bobbin = builtin("paypal.webhooks");
const kit = kitOf(bobbin);
const NOW = kit.now ?? 0;
const captures = capturesOf(bobbin.files());
const capture = (name: string): Capture => {
  const c = captures.find((x) => x.file === `captures/${name}.http`);
  if (!c) throw new Error(`no captures/${name}.http`);
  return c;
};
const certAnswer = kit.http.find((h) => h.url.includes("/v1/notifications/certs/"));
if (!certAnswer?.body) throw new Error("the kit has no certificate answer");
const CERT_URL = certAnswer.url;

/**
 * Every URL the source asked for. The kit's certificate answers any URL under its prefix; a
 * test's own certificates (`served`) answer theirs; nothing else answers.
 */
const asked: string[] = [];
const served = new Map<string, string>();
const stub = stubFetch([{ ...certAnswer, url: `${CERT_URL.replace(/\d+$/, "")}*` }]);
let restore: () => void = () => {};

let t: TestIntake;
beforeAll(async () => {
  restore = useNetwork(((input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    asked.push(url);
    const pem = served.get(url);
    if (pem) return Promise.resolve(new Response(pem, { status: 200 }));
    return stub(input, init);
  }) as typeof fetch);
  t = await kitIntake("paypal.webhooks");
});
afterAll(async () => {
  await t.stop();
  restore();
});

/** Post a capture, with some headers replaced (a name mapped to null drops it). */
async function send(c: Capture, replace: Record<string, string | null> = {}, body?: string) {
  const lower = Object.fromEntries(Object.entries(replace).map(([k, v]) => [k.toLowerCase(), v]));
  const headers: Record<string, string> = {};
  for (const [k, v] of c.request.headers) {
    const key = k.toLowerCase();
    if (key === "host" || key === "content-length") continue;
    if (key in lower) continue;
    headers[k] = v;
  }
  for (const [k, v] of Object.entries(lower)) if (v !== null) headers[k] = v;
  const res = await t.post("/hooks/paypal", body ?? c.request.body, headers);
  return { status: res.status, body: await res.text() };
}

/** A certificate URL of the kit's prefix no other test has used: a fresh cache entry. */
let serial = 100;
const freshCertUrl = () => `${CERT_URL.replace(/\d+$/, "")}${serial++}`;

const stored = (body: Uint8Array | string) =>
  eventByPayload<{ key: string; event_type: string; dedup_id: string }>(
    t,
    "b.key, e.event_type, e.dedup_id",
    typeof body === "string" ? body : new TextDecoder().decode(body),
  );

describe("against an intake on the kit's clock", () => {
  test("every capture gets what its # expect lines say; one certificate fetch serves them all", async () => {
    const results: CaptureResult[] = [];
    const before = asked.length;
    for (const c of captures) {
      const r = await send(c);
      results.push({ capture: c, instance: "paypal", status: r.status, body: r.body });
    }
    expectAsCaptured(results);
    expect(results.map((r) => [r.capture.file, r.status]).sort()).toEqual([
      ["captures/accepted.http", 202],
      ["captures/refund.http", 202],
      ["captures/rejected.http", 401],
      ["captures/unclassifiable.http", 202],
    ]);
    for (const name of ["accepted", "refund"]) {
      const c = capture(name);
      const id = (JSON.parse(new TextDecoder().decode(c.request.body)) as { id: string }).id;
      expect(stored(c.request.body)).toEqual({
        key: c.expect.key ?? "",
        event_type: c.expect.eventType ?? "",
        dedup_id: id,
      });
    }
    expect(asked.slice(before)).toEqual([CERT_URL]);
  });

  test("PayPal's retry (a new transmission, the same event id) verifies and is a duplicate", async () => {
    // accepted.http is already in (the first test); sent again under another certificate URL of
    // PayPal's, which serves the same certificate, it verifies, and is the same event.
    const c = capture("accepted");
    const url = freshCertUrl();
    t.clock.set(NOW + 61); // past the cache's once-a-minute fetch limit (the first test fetched)
    const before = asked.length;
    expect(await send(c, { "PAYPAL-CERT-URL": url })).toEqual({ status: 200, body: '{"status":"duplicate"}' });
    expect(asked.slice(before)).toEqual([url]);
    t.clock.set(NOW);
  });

  test("two deliveries under one certificate URL cost one fetch", async () => {
    const url = freshCertUrl();
    // Past the earlier tests' fetches; the captures, signed for 00:00:00, are within 300 s still.
    t.clock.set(NOW + 122);
    const before = asked.length;
    const a = await send(capture("accepted"), { "PAYPAL-CERT-URL": url });
    const b = await send(capture("refund"), { "PAYPAL-CERT-URL": url });
    // Both verified (the first test queued them: now they are duplicates), with one fetch.
    expect([a, b]).toEqual([
      { status: 200, body: '{"status":"duplicate"}' },
      { status: 200, body: '{"status":"duplicate"}' },
    ]);
    expect(asked.slice(before)).toEqual([url]);
    t.clock.set(NOW);
  });

  test("a certificate URL on another host, or not PayPal's shape, is refused without any request", async () => {
    const c = capture("accepted");
    const forged = [
      "https://evil.example.com/v1/notifications/certs/CERT-kittest0-00000000-00000001",
      "https://api.sandbox.paypal.com.evil.example.com/v1/notifications/certs/CERT-1",
      "https://api.sandbox.paypal.com@evil.example.com/v1/notifications/certs/CERT-1",
      "https://user@api.sandbox.paypal.com/v1/notifications/certs/CERT-1",
      "http://api.sandbox.paypal.com/v1/notifications/certs/CERT-1",
      "https://api.sandbox.paypal.com:8443/v1/notifications/certs/CERT-1",
      "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1?x=1",
      "https://api.sandbox.paypal.com/v1/notifications/certs/../../../evil",
      "https://api.sandbox.paypal.com/v1/oauth2/token",
      "https://www.paypal.com/v1/notifications/certs/CERT-1",
      "https://127.0.0.1/v1/notifications/certs/CERT-1",
      "file:///etc/passwd",
      "not a url",
    ];
    const before = asked.length;
    const events = t.count("events");
    for (const url of forged) {
      const r = await send(c, { "PAYPAL-CERT-URL": url });
      expect([url, r.status, r.body]).toEqual([url, 401, ""]);
    }
    expect(asked.length).toBe(before);
    expect(t.count("events")).toBe(events);
    expect(certUrlOf("https://API.Sandbox.PayPal.com/v1/notifications/certs/CERT-1")).toBe(
      "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1",
    );
    for (const host of ["api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"])
      expect(certUrlOf(`https://${host}/v1/notifications/certs/CERT-1`)).toBe(
        `https://${host}/v1/notifications/certs/CERT-1`,
      );
  });

  test(
    "refused with 401 and an empty body, nothing stored: a wrong signature, another webhook id, a " +
      "tampered body, a stale or future transmission time, a missing header, another algorithm",
    async () => {
      const c = capture("accepted");
      const sig = c.request.headers.find(([k]) => k.toLowerCase() === "paypal-transmission-sig")?.[1] ?? "";
      const flipped = `${sig.slice(0, 10)}${sig[10] === "A" ? "B" : "A"}${sig.slice(11)}`;
      const text = new TextDecoder().decode(c.request.body);
      const cases: [string, Record<string, string | null>, string?][] = [
        ["a wrong signature", { "PAYPAL-TRANSMISSION-SIG": flipped }],
        [
          "the signature of rejected.http (another webhook id)",
          {
            "PAYPAL-TRANSMISSION-SIG":
              capture("rejected").request.headers.find(([k]) => k.toLowerCase() === "paypal-transmission-sig")?.[1] ??
              "",
          },
        ],
        ["a tampered body", {}, text.replace("20.00", "2000.00")],
        ["another transmission id", { "PAYPAL-TRANSMISSION-ID": "a1c2e3f0-b1c2-11f1-8a00-00000000000f" }],
        ["a transmission time 301 s old", { "PAYPAL-TRANSMISSION-TIME": "2026-12-03T23:54:59Z" }],
        ["a transmission time 301 s ahead", { "PAYPAL-TRANSMISSION-TIME": "2026-12-04T00:05:01Z" }],
        ["a transmission time that is not RFC 3339", { "PAYPAL-TRANSMISSION-TIME": "1796342400" }],
        ["no PAYPAL-TRANSMISSION-SIG", { "PAYPAL-TRANSMISSION-SIG": null }],
        ["no PAYPAL-CERT-URL", { "PAYPAL-CERT-URL": null }],
        ["no PAYPAL-AUTH-ALGO", { "PAYPAL-AUTH-ALGO": null }],
        ["SHA1withRSA", { "PAYPAL-AUTH-ALGO": "SHA1withRSA" }],
        ["a signature that is not base64", { "PAYPAL-TRANSMISSION-SIG": "not base64!" }],
      ];
      const events = t.count("events");
      for (const [name, replace, body] of cases) {
        const r = await send(c, replace, body);
        expect([name, r.status, r.body]).toEqual([name, 401, ""]);
      }
      expect(t.count("events")).toBe(events);
    },
  );

  test("the log line names the class of a refusal and holds no signature", async () => {
    const c = capture("accepted");
    const from = LOG_LINES.length;
    await send(c, { "PAYPAL-TRANSMISSION-TIME": "2026-12-03T23:50:00Z" });
    await send(c, { "PAYPAL-CERT-URL": "https://evil.example.com/v1/notifications/certs/CERT-1" });
    await send(c, { "PAYPAL-AUTH-ALGO": "none" });
    await send(c, { "PAYPAL-TRANSMISSION-SIG": null });
    const lines = LOG_LINES.slice(from).filter((l) => l.includes("unverified"));
    expect(lines.map((l) => /reason=(\w+)/.exec(l)?.[1])).toEqual([
      "stale",
      "mismatch",
      "malformed",
      "missing_signature",
    ]);
    const sig = c.request.headers.find(([k]) => k.toLowerCase() === "paypal-transmission-sig")?.[1] ?? "";
    for (const line of LOG_LINES.slice(from)) {
      expect(line).not.toContain(sig.slice(0, 24));
      expect(line).not.toContain("evil.example.com");
    }
  });

  test("a flood of made-up certificate URLs on PayPal's host costs one request a minute", async () => {
    const c = capture("accepted");
    t.clock.set(NOW + 190);
    const before = asked.length;
    const statuses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        send(c, { "PAYPAL-CERT-URL": `https://api.paypal.com/v1/notifications/certs/CERT-made-up-${i}` }).then(
          (r) => r.status,
        ),
      ),
    );
    expect(new Set(statuses)).toEqual(new Set([401]));
    // One request for the whole flood (the stub has no answer for api.paypal.com: a failed fetch).
    expect(asked.length - before).toBe(1);
    t.clock.set(NOW);
  });
});

/** A throwaway RSA key and a self-signed certificate valid for one day from the real now, or null without openssl. */
function oneDayCertificate(): { key: string; cert: string } | null {
  if (!Bun.which("openssl")) return null;
  const dir = tempDir();
  const r = Bun.spawnSync(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-sha256",
      "-days",
      "1",
      "-subj",
      "/CN=kit-test.example.com",
    ].concat(["-keyout", "k.pem", "-out", "c.pem"]),
    { cwd: dir, stdout: "ignore", stderr: "ignore" },
  );
  if (r.exitCode !== 0) return null;
  return { key: readFileSync(join(dir, "k.pem"), "utf8"), cert: readFileSync(join(dir, "c.pem"), "utf8") };
}

describe("the certificate's dates", () => {
  const made = oneDayCertificate();
  test.skipIf(made === null)(
    "a delivery signed under a certificate is queued while it is valid and refused once it has expired",
    async () => {
      if (!made) return;
      // An instance of its own (another webhook id: a cache of its own), on the real clock.
      const webhookId = "KITTEST0WEBHOOK0D";
      const own = await kitIntake("paypal.webhooks", {
        table: { settings: { webhook_id: webhookId } },
        clockAt: Math.floor(Date.now() / 1000),
      });
      const url = freshCertUrl().replace("api.sandbox.paypal.com", "api-m.sandbox.paypal.com");
      served.set(url, made.cert);
      const body = JSON.stringify({
        id: "WH-KITTEST00000000D-0000000000000000D",
        event_type: "PAYMENT.CAPTURE.DENIED",
        resource_type: "capture",
        resource: { id: "KITTEST0CAPTURE0D1", status: "DECLINED" },
      });
      const deliver = async (at: number, id: string) => {
        own.clock.set(at);
        const time = new Date(Math.floor(at) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
        const message = `${id}|${time}|${webhookId}|${crc32Decimal(body)}`;
        const r = await own.post("/hooks/paypal", body, {
          "Content-Type": "application/json",
          "PAYPAL-TRANSMISSION-ID": id,
          "PAYPAL-TRANSMISSION-TIME": time,
          "PAYPAL-TRANSMISSION-SIG": sign("sha256", Buffer.from(message), made.key).toString("base64"),
          "PAYPAL-CERT-URL": url,
          "PAYPAL-AUTH-ALGO": "SHA256withRSA",
        });
        return [r.status, await r.text()];
      };
      const now = Math.floor(Date.now() / 1000) + 60;
      try {
        expect(await deliver(now, "b0000000-0000-4000-8000-00000000000d")).toEqual([202, '{"status":"queued"}']);
        // Two days on, the certificate has expired: the cached certificate verifies nothing.
        expect(await deliver(now + 2 * 86_400, "b0000000-0000-4000-8000-00000000000e")).toEqual([401, ""]);
        expect(asked.filter((u) => u === url)).toEqual([url]);
      } finally {
        await own.stop();
      }
    },
  );
});

describe("the settings", () => {
  test("webhook_id is letters and digits; an instance without it does not load", async () => {
    const withConfig = paypal.withConfig;
    if (!withConfig) throw new Error("paypal.webhooks takes no config");
    expect(paypal.configKeys).toEqual(["webhook_id"]);
    expect(() => withConfig({ webhook_id: "8PT597110X687430LKGECATA" })).not.toThrow();
    for (const bad of ["", "WH|1", "a b", 42, "x".repeat(51)])
      expect(() => withConfig({ webhook_id: bad })).toThrow(/webhook_id must be/);
    await expect(
      startIntake(`[bobbins.paypal]
bobbin = "paypal.webhooks"
outputs = { "*" = "kit" }

${KIT_DESTINATION}`),
    ).rejects.toThrow(/required by paypal.webhooks/);
  });
});
