// The template's second signing key (`header2` under `secret2`) and RFC 3339 timestamps in
// `timestamp_header`. Known answers: box-node-sdk's own test of Webhooks.validateMessage
// (tests/lib/managers/webhooks-test.js), a message signed with 'SamplePrimaryKey' and
// 'SampleSecondaryKey' at 2020-01-01T00:00:00-07:00.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { signTemplate } from "../../src/plugin/sign.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";
import { hmacEachWhy, rfc3339Seconds, timestampWhy } from "../../src/plugin/verify.ts";

const BOX: TemplateSettings = {
  scheme: "hmac",
  header: "box-signature-primary",
  header2: "box-signature-secondary",
  encoding: "base64",
  message: "{body}{ts}",
  timestamp_header: "box-delivery-timestamp",
  tolerance_s: 600,
  key: "source.id",
};
const BODY =
  '{"type":"webhook_event","webhook":{"id":"1234567890"},"trigger":"FILE.UPLOADED",' +
  '"source":{"id":"1234567890","type":"file","name":"Test.txt"}}';
const TS = "2020-01-01T00:00:00-07:00";
const AT = Date.UTC(2020, 0, 1, 7) / 1000;
const PRIMARY = "6TfeAW3A1PASkgboxxA5yqHNKOwFyMWuEXny/FPD5hI=";
const SECONDARY = "v+1CD1Jdo3muIcbpv5lxxgPglOqMfsNHPV899xWYydo=";
const GOOD1 = "SamplePrimaryKey";
const GOOD2 = "SampleSecondaryKey";
const WRONG = "IncorrectKey";

function verdict(
  t: TemplateSettings,
  keys: { secret: string; secret2: string },
  headers: Record<string, string>,
  now: number,
  body = BODY,
) {
  expect(checkTemplate(t as unknown as Record<string, unknown>)).toEqual([]);
  const plugin = templateSource(t);
  const req = hookRequest({
    method: "POST",
    url: "/hooks/box",
    headers: Object.entries(headers),
    body: new TextEncoder().encode(body),
    peer: "127.0.0.1",
    now,
  });
  return plugin.verify(req, { get: (n: string) => (keys as Record<string, string>)[n] } as never);
}

const both = { "box-delivery-timestamp": TS, "box-signature-primary": PRIMARY, "box-signature-secondary": SECONDARY };

describe("header2: Box's primary and secondary signatures (box-node-sdk's test vector)", () => {
  test("the vector is what node:crypto computes over body then timestamp", () => {
    expect(createHmac("sha256", GOOD1).update(BODY).update(TS).digest("base64")).toBe(PRIMARY);
    expect(createHmac("sha256", GOOD2).update(BODY).update(TS).digest("base64")).toBe(SECONDARY);
  });
  test("two good keys verify", () => expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, both, AT)).toBe(true));
  test("a good primary key alone verifies", () =>
    expect(verdict(BOX, { secret: GOOD1, secret2: WRONG }, both, AT)).toBe(true));
  test("a good secondary key alone verifies", () =>
    expect(verdict(BOX, { secret: WRONG, secret2: GOOD2 }, both, AT)).toBe(true));
  test("two wrong keys do not", () =>
    expect(verdict(BOX, { secret: WRONG, secret2: WRONG }, both, AT)).toBe("mismatch"));
  test("two empty keys do not", () => expect(verdict(BOX, { secret: "", secret2: "" }, both, AT)).toBe("mismatch"));
  test("each key verifies only its own header's signature", () => {
    const swapped = { ...both, "box-signature-primary": SECONDARY, "box-signature-secondary": PRIMARY };
    expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, swapped, AT)).toBe("mismatch");
  });
  test("one header missing: the other still verifies", () => {
    const { "box-signature-secondary": _, ...primaryOnly } = both;
    expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, primaryOnly, AT)).toBe(true);
    const { "box-signature-primary": __, ...secondaryOnly } = both;
    expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, secondaryOnly, AT)).toBe(true);
  });
  test("no signature header at all is missing_signature", () =>
    expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, { "box-delivery-timestamp": TS }, AT)).toBe(
      "missing_signature",
    ));
  test("a tampered body fails under both keys", () =>
    expect(verdict(BOX, { secret: GOOD1, secret2: GOOD2 }, both, AT, `${BODY} `)).toBe("mismatch"));
  test("a changed timestamp fails: it is signed", () =>
    expect(
      verdict(
        BOX,
        { secret: GOOD1, secret2: GOOD2 },
        { ...both, "box-delivery-timestamp": "2020-01-01T07:00:00Z" },
        AT,
      ),
    ).toBe("mismatch"));
  test("stale and future beyond 10 minutes; within them, either side, verifies", () => {
    const keys = { secret: GOOD1, secret2: GOOD2 };
    expect(verdict(BOX, keys, both, AT + 601)).toBe("stale");
    expect(verdict(BOX, keys, both, AT - 601)).toBe("future");
    expect(verdict(BOX, keys, both, AT + 600)).toBe(true);
    expect(verdict(BOX, keys, both, AT - 600)).toBe(true);
  });
  test("the template asks for secret2 and never stores either header", () => {
    const p = templateSource(BOX);
    expect(p.secrets).toEqual(["secret", "secret2"]);
    expect(p.authHeaders).toEqual(["box-signature-primary", "box-signature-secondary"]);
    expect(templateSource({ ...BOX, header2: undefined }).secrets).toEqual(["secret"]);
  });
  test("signTemplate signs both headers, and each verifies alone", () => {
    const body = new TextEncoder().encode(BODY);
    const s = signTemplate(BOX, GOOD1, body, AT, "m", undefined, GOOD2);
    const h = Object.fromEntries(s.headers);
    expect(Object.keys(h).sort()).toEqual([
      "box-delivery-timestamp",
      "box-signature-primary",
      "box-signature-secondary",
    ]);
    expect(verdict(BOX, { secret: GOOD1, secret2: WRONG }, h, AT)).toBe(true);
    expect(verdict(BOX, { secret: WRONG, secret2: GOOD2 }, h, AT)).toBe(true);
    expect(verdict(BOX, { secret: WRONG, secret2: WRONG }, h, AT)).toBe("mismatch");
  });
});

describe("hmacEachWhy: every entry's MAC, every candidate", () => {
  const mac = (k: string) => createHmac("sha256", k).update("m").digest("hex");
  test("either entry matching verifies; a candidate under the other's key does not", () => {
    expect(
      hmacEachWhy(
        [
          { candidates: [mac("a")], secret: "a" },
          { candidates: [], secret: "b" },
        ],
        "m",
      ),
    ).toBeNull();
    expect(
      hmacEachWhy(
        [
          { candidates: [], secret: "a" },
          { candidates: [mac("b")], secret: "b" },
        ],
        "m",
      ),
    ).toBeNull();
    expect(
      hmacEachWhy(
        [
          { candidates: [mac("b")], secret: "a" },
          { candidates: [mac("a")], secret: "b" },
        ],
        "m",
      ),
    ).toBe("mismatch");
  });
  test("nothing to compare, unreadable, too many, an empty key", () => {
    expect(hmacEachWhy([{ candidates: [], secret: "a" }], "m")).toBe("missing_signature");
    expect(hmacEachWhy([{ candidates: ["zz"], secret: "a" }], "m")).toBe("malformed");
    expect(hmacEachWhy([{ candidates: Array(9).fill(mac("a")), secret: "a" }], "m")).toBe("malformed");
    // A stand-in key never verifies, even for a candidate made under an empty key.
    expect(hmacEachWhy([{ candidates: [mac("")], secret: "" }], "m")).toBe("mismatch");
  });
});

describe("RFC 3339 timestamps in timestamp_header", () => {
  test("offsets, Z, fractions and either letter case", () => {
    expect(rfc3339Seconds("2020-01-01T00:00:00-08:00")).toBe(Date.UTC(2020, 0, 1, 8) / 1000);
    expect(rfc3339Seconds("2021-03-25T05:09:27Z")).toBe(Date.UTC(2021, 2, 25, 5, 9, 27) / 1000);
    expect(rfc3339Seconds("2021-03-25t05:09:27.250z")).toBe(Date.UTC(2021, 2, 25, 5, 9, 27) / 1000 + 0.25);
    expect(rfc3339Seconds("2021-03-25T05:09:27+05:30")).toBe(Date.UTC(2021, 2, 24, 23, 39, 27) / 1000);
  });
  test("not an instant: no offset, a date alone, out-of-range fields, other forms", () => {
    for (const bad of [
      "2021-03-25T05:09:27",
      "2021-03-25",
      "2021-02-30T00:00:00Z",
      "2021-13-01T00:00:00Z",
      "2021-03-25T24:00:00Z",
      "2021-03-25T05:09:27+24:00",
      "Thu, 25 Mar 2021 05:09:27 GMT",
      "2021-03-25 05:09:27Z",
    ])
      expect(rfc3339Seconds(bad)).toBeNull();
  });
  test("timestampWhy reads them only when asked, and never as milliseconds", () => {
    const now = Date.UTC(2021, 2, 25, 5, 9, 27) / 1000;
    expect(timestampWhy("2021-03-25T05:09:27Z", now)).toBe("malformed");
    expect(timestampWhy("2021-03-25T05:09:27Z", now, 300, { rfc3339: true })).toBeNull();
    expect(timestampWhy("2021-03-25T05:04:26Z", now, 300, { rfc3339: true })).toBe("stale");
    expect(timestampWhy("2021-03-25T05:14:28Z", now, 300, { rfc3339: true })).toBe("future");
    expect(timestampWhy("2021-02-30T05:09:27Z", now, 300, { rfc3339: true })).toBe("malformed");
    expect(timestampWhy(String(now), now, 300, { rfc3339: true })).toBeNull();
  });
  test("a template's timestamp_header takes them; Zendesk's documented header shape verifies", () => {
    const t: TemplateSettings = {
      scheme: "hmac",
      header: "X-Zendesk-Webhook-Signature",
      encoding: "base64",
      message: "{ts}{body}",
      timestamp_header: "X-Zendesk-Webhook-Signature-Timestamp",
      key: "id",
    };
    const ts = "2021-03-25T05:09:27Z";
    const body = '{"id":"1"}';
    const sig = createHmac("sha256", "k")
      .update(ts + body)
      .digest("base64");
    const h = { "X-Zendesk-Webhook-Signature": sig, "X-Zendesk-Webhook-Signature-Timestamp": ts };
    const now = Date.UTC(2021, 2, 25, 5, 9, 27) / 1000;
    expect(verdict(t, { secret: "k", secret2: "" }, h, now, body)).toBe(true);
    expect(verdict(t, { secret: "k", secret2: "" }, h, now + 301, body)).toBe("stale");
  });
});

describe("check: header2's rules", () => {
  const bad = (t: Record<string, unknown>) => checkTemplate({ key: "k", ...t }).map((p) => `${p.key}: ${p.message}`);
  test("hmac only, not with pairs, another header than header", () => {
    expect(bad({ scheme: "hmac-sha256-hex", header: "A", header2: "B" })).toEqual(["header2: only for scheme hmac"]);
    expect(bad({ scheme: "ed25519", header: "A", header2: "B", message: "{body}" })).toEqual([
      "header2: only for scheme hmac",
    ]);
    expect(bad({ scheme: "hmac", header: "A", header2: "B", pairs: ",", message: "{ts}{body}" })).toEqual([
      "header2: takes a signature after prefix, not pairs: unset pairs or header2",
    ]);
    expect(bad({ scheme: "hmac", header: "X-Sig", header2: "x-sig" })).toEqual([
      "header2: must name another header than header (one header's signatures: signatures)",
    ]);
    expect(bad({ scheme: "hmac", header: "A", header2: "" })).toEqual(["header2: expected a non-empty string"]);
    expect(bad({ scheme: "hmac", header: "A", header2: "B" })).toEqual([]);
    for (const p of checkTemplate({ key: "k", scheme: "hmac", header: "A", header2: "B", pairs: "," }))
      expect(p.message).not.toContain("\n");
  });
});
