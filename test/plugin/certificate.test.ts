// Known-answer tests for the certificate scheme's parts (PayPal's): verify.ts's rsaSha256Why and
// crc32Decimal, keys.ts's certificateKey, certificateValidAt and KeyCache's bound, and net's
// documentFetcher. The signature was made with `openssl dgst -sha256 -sign` and the CRC-32 values
// with Python's zlib.crc32, never with the code under test.
import { describe, expect, test } from "bun:test";
import { generateKeyPairSync, sign } from "node:crypto";
import { FakeClock } from "../../src/clock.ts";
import { documentFetcher } from "../../src/net/keys.ts";
import { createHttp } from "../../src/net/http.ts";
import { certificateKey, certificateValidAt, KeyCache } from "../../src/plugin/keys.ts";
import { crc32Decimal, rsaSha256Why } from "../../src/plugin/verify.ts";

// A self-signed certificate of a throwaway 2048-bit RSA key (its private half was not kept),
// valid from Dec  3 06:22:57 2026 GMT to Nov 30 06:22:57 2036 GMT.
const CERT = `-----BEGIN CERTIFICATE-----
MIIDczCCAlugAwIBAgIUFRSWOUSpWC5dnLJWMvGyTTU0higwDQYJKoZIhvcNAQEL
BQAwSTELMAkGA1UEBhMCVVMxGzAZBgNVBAoMEmhvb2tzcG9vbCBraXQgdGVzdDEd
MBsGA1UEAwwUa2l0LXRlc3QuZXhhbXBsZS5jb20wHhcNMjYxMjAzMDYyMjU3WhcN
MzYxMTMwMDYyMjU3WjBJMQswCQYDVQQGEwJVUzEbMBkGA1UECgwSaG9va3Nwb29s
IGtpdCB0ZXN0MR0wGwYDVQQDDBRraXQtdGVzdC5leGFtcGxlLmNvbTCCASIwDQYJ
KoZIhvcNAQEBBQADggEPADCCAQoCggEBAKrVy2gXFyIBAL1HY+3VixTDAta3hpSr
dEyuWjoS+3ta53SUPcrZVLOK136nFM2y4N9wvsEgDceZpzm1HYws5pfJcc35/TaH
gCCQekuctTrCJpKLH+3NL3aMvKNh5OcZuTP/ZvQ68p8DXPe5h1sPu1ImEojTeES2
ZV1NwqQSMfbXbOd0PN9vLlMAcZp275wn2pL9fPf4UsibC04rXivkpvUljJ7EWJtL
BKZfG504ItoaRSQOHr6cmv+pTOq/Z5MB6RgI3eJQwpBnWWz7B4Ek1nCukuWaKCbW
qCbAx4of/90z7NgjfNayvupQySqDM76D5InfI+fretomjslvYkECDU0CAwEAAaNT
MFEwHQYDVR0OBBYEFDciwO5cfKLeY2Sb6FVSMLxj4vPCMB8GA1UdIwQYMBaAFDci
wO5cfKLeY2Sb6FVSMLxj4vPCMA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZIhvcNAQEL
BQADggEBAIwrliuPRGiojdhB/yILZUSd+Yb/O+sff4rFqYbt9Y0dN3Cyj5fT/3+r
8PLymj3Rr0BNzLSJSuylwsOa/VIlqE2TYfNaX269RkSQL/HjPU5r6Z995wdVMLcy
1sl01hm+GCroeVH9QdcsS/tTel/I5CUAdiHfZHioyES9buvLqLrC3msSR+PwnuuP
2Mk9zxiiw/ep9cC34oh0B/JMLQzP+1tY0mdLzwPcOxb4a3iy6eM2RHjfMpO4zMYK
49NqpRxkUppRCvrX6k2/6K3to8+sT+al3KnQU4Rue5BLecR3fXZVz4NBTgBkdxKw
Kq0UPZ6sOlW3E612t4qeMx6vmJRWv+I=
-----END CERTIFICATE-----`;
const NOT_BEFORE = Date.UTC(2026, 11, 3, 6, 22, 57) / 1000;
const NOT_AFTER = Date.UTC(2036, 10, 30, 6, 22, 57) / 1000;
// PayPal's message recipe with the CRC-32 zlib gives for the kit's accepted body, and its signature.
const MESSAGE = "a1c2e3f0-b1c2-11f1-8a00-00000000000a|2026-12-04T00:00:00Z|KITTEST0WEBHOOK0A|1908289284";
const SIGNATURE = [
  "Ia5VQ+oIDMJ7kLpVW35rqxJm7J2XCTf92NfH6d0iuhIBT61X/GHDa16c6LnFtzWQy2rvUtGzdXxXNOkhLLLthMxGcLotxaeG",
  "5Odv7k/S429IvzWWUM7FjCdIMOqadwF3MGgBzuPyNOh2pwUu2pJxI6A2Norqo1L+N9jxFJCO1qGDozoJoZyzXyzAitaowx12",
  "nH2la19tJV3avimhuAIuYyy412yQq/FbdohfHv7qiShjGqUqUq++TuJbNHGaKbwigo5+KfoD3e5QCqH0j0XDAz3vQROhpqdO",
  "u9/JonDM5hCPBJ1vf4BVbpWOIE7Obx/tPUFrMZAyuIos3anxZ+7gTg==",
].join("");

describe("crc32Decimal", () => {
  test("zlib's CRC-32, unsigned, in decimal", () => {
    expect(crc32Decimal("123456789")).toBe("3421780262");
    expect(crc32Decimal("")).toBe("0");
    expect(crc32Decimal("not json")).toBe("3331115878");
    expect(crc32Decimal(new TextEncoder().encode("h\u00e9llo"))).toBe("2654700086");
  });
});

describe("certificateKey and certificateValidAt", () => {
  test("the certificate's RSA key and its dates, both ends included", () => {
    const c = certificateKey(CERT);
    if (!c) throw new Error("the certificate does not parse");
    expect(c.publicKey.asymmetricKeyType).toBe("rsa");
    expect(c.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect([c.notBefore, c.notAfter]).toEqual([NOT_BEFORE, NOT_AFTER]);
    expect([NOT_BEFORE - 1, NOT_BEFORE, NOT_AFTER, NOT_AFTER + 1].map((t) => certificateValidAt(c, t))).toEqual([
      false,
      true,
      true,
      false,
    ]);
  });

  test("the first certificate of a document; null for none, or one that does not parse", () => {
    expect(certificateKey(`${CERT}\n${CERT}\n`)?.notAfter).toBe(NOT_AFTER);
    expect(certificateKey("")).toBeNull();
    expect(certificateKey("<html>not found</html>")).toBeNull();
    expect(certificateKey(CERT.replace(/[A-Za-z]{8}\n/, "AAAAAAAA\n").replace(/M/g, "Q"))).toBeNull();
  });
});

describe("rsaSha256Why", () => {
  const key = certificateKey(CERT)?.publicKey;
  if (!key) throw new Error("the certificate does not parse");

  test("openssl's signature verifies, under the KeyObject or the certificate's PEM public key", () => {
    expect(rsaSha256Why(SIGNATURE, key, MESSAGE)).toBeNull();
    expect(rsaSha256Why(SIGNATURE, key.export({ type: "spki", format: "pem" }).toString(), MESSAGE)).toBeNull();
  });

  test("why not: another message, a flipped byte, no signature, not base64, a key too short or not RSA", () => {
    expect(rsaSha256Why(SIGNATURE, key, MESSAGE.replace("1908289284", "1908289285"))).toBe("mismatch");
    const raw = Buffer.from(SIGNATURE, "base64");
    raw[0] = (raw[0] ?? 0) ^ 1;
    expect(rsaSha256Why(raw.toString("base64"), key, MESSAGE)).toBe("mismatch");
    expect(rsaSha256Why(null, key, MESSAGE)).toBe("missing_signature");
    expect(rsaSha256Why("not base64!", key, MESSAGE)).toBe("malformed");
    expect(rsaSha256Why("", key, MESSAGE)).toBe("malformed");
    const short = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const shortSig = sign("sha256", Buffer.from(MESSAGE), short.privateKey).toString("base64");
    expect(rsaSha256Why(shortSig, short.publicKey, MESSAGE)).toBe("mismatch");
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });
    expect(
      rsaSha256Why(sign("sha256", Buffer.from(MESSAGE), ec.privateKey).toString("base64"), ec.publicKey, MESSAGE),
    ).toBe("mismatch");
    expect(rsaSha256Why(SIGNATURE, "not a key", MESSAGE)).toBe("mismatch");
  });

  test("a signature of SHA-1 under the same scheme does not pass for SHA-256", () => {
    const k = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const sha1 = sign("sha1", Buffer.from(MESSAGE), k.privateKey).toString("base64");
    const sha256 = sign("sha256", Buffer.from(MESSAGE), k.privateKey).toString("base64");
    expect(rsaSha256Why(sha1, k.publicKey, MESSAGE)).toBe("mismatch");
    expect(rsaSha256Why(sha256, k.publicKey, MESSAGE)).toBeNull();
  });
});

describe("KeyCache with maxKeys", () => {
  test("past the bound, the key learned first is dropped and fetched again when asked for", async () => {
    const clock = new FakeClock(1_000);
    const fetched: string[] = [];
    const cache = new KeyCache<string>({
      fetchKey: async (url) => {
        fetched.push(url);
        return `key of ${url}`;
      },
      clock,
      minFetchIntervalS: 0,
      maxKeys: 2,
    });
    for (const u of ["a", "b", "c"]) expect(await cache.key(u)).toBe(`key of ${u}`);
    expect(cache.size).toBe(2);
    expect(await cache.key("c")).toBe("key of c");
    expect(await cache.key("b")).toBe("key of b");
    expect(fetched).toEqual(["a", "b", "c"]);
    expect(await cache.key("a")).toBe("key of a");
    expect(fetched).toEqual(["a", "b", "c", "a"]);
    expect(cache.size).toBe(2);
  });
});

describe("documentFetcher", () => {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/cert") return new Response(CERT, { headers: { "content-type": "application/x-pem-file" } });
      if (path === "/html") return new Response("<html></html>");
      if (path === "/gone") return new Response("gone", { status: 410 });
      if (path === "/down") return new Response("down", { status: 503 });
      if (path === "/moved") return new Response(null, { status: 302, headers: { location: "/cert" } });
      return new Response("no", { status: 404 });
    },
  });
  const base = `http://127.0.0.1:${server.port}`;
  const fetchCert = documentFetcher({ http: createHttp(), parse: certificateKey });

  test("a 2xx answer parsed; 404, 410 or no certificate: null; a redirect or another failure throws", async () => {
    try {
      expect((await fetchCert(`${base}/cert`))?.notAfter).toBe(NOT_AFTER);
      expect(await fetchCert(`${base}/html`)).toBeNull();
      expect(await fetchCert(`${base}/gone`)).toBeNull();
      expect(await fetchCert(`${base}/nothing`)).toBeNull();
      await expect(fetchCert(`${base}/down`)).rejects.toThrow(/http 503/);
      await expect(fetchCert(`${base}/moved`)).rejects.toThrow(/redirect not followed/);
    } finally {
      server.stop(true);
    }
  });
});
