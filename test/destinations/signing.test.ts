// The outbound headers and reading signing secrets.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import {
  isReservedHeader,
  namedHeaderProblems,
  outboundHeaders,
  readSecrets,
  wireSafe,
} from "../../src/destinations/signing.ts";
import { VERSION } from "../../src/version.ts";
import { tempDir } from "../helpers/tmp.ts";
import { nowClock, SENTINEL } from "./support.ts";

const body = new TextEncoder().encode('{"a":"\u00e9"}');
const base = {
  webhookId: "hs_i_1",
  timestamp: Math.floor(nowClock().now()),
  body,
  secrets: ["k1"],
  hubSecret: "k1",
  batchId: 1,
  attempt: 2,
};

describe("outboundHeaders", () => {
  test("every outbound header, verifiable by standardwebhooks", () => {
    const h = Object.fromEntries(outboundHeaders(base));
    expect(h).toMatchObject({
      "webhook-id": "hs_i_1",
      "webhook-timestamp": String(base.timestamp),
      "x-hookspool-batch": "1",
      "x-hookspool-attempt": "2",
      "content-type": "application/json",
      "user-agent": `hookspool/${VERSION}`,
    });
    expect(h["x-hub-signature-256"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(() => new Webhook("k1", { format: "raw" }).verify(Buffer.from(body), h)).not.toThrow();
  });

  test("no secret: no signatures; no hub secret: no X-Hub-Signature-256", () => {
    const h = outboundHeaders({ ...base, secrets: [], hubSecret: null });
    expect(h.has("webhook-signature")).toBe(false);
    expect(h.has("x-hub-signature-256")).toBe(false);
    expect(h.get("webhook-id")).toBe("hs_i_1");
  });

  test("extra and named headers never replace ours and are left out when unusable", () => {
    const h = outboundHeaders({
      ...base,
      extra: { "WEBHOOK-ID": "x", Host: "evil", "X-Ok": "1", "bad name": "1", "X-Crlf": "a\r\nb", "X-Wide": "\u2713" },
      named: [
        { name: "X-GitHub-Event", value: "push" },
        { name: "X-Hookspool-Attempt", value: "9" },
        { name: "X-Null", value: null },
        { name: null, value: "v" },
      ],
    });
    expect(h.get("webhook-id")).toBe("hs_i_1");
    expect(h.get("x-hookspool-attempt")).toBe("2");
    expect(h.get("x-ok")).toBe("1");
    expect(h.get("x-github-event")).toBe("push");
    for (const n of ["host", "x-crlf", "x-wide", "x-null"]) expect(h.has(n)).toBe(false);
  });

  test("wireSafe and isReservedHeader", () => {
    expect(["push", "caf\u00e9", ""].map(wireSafe)).toEqual([true, true, true]);
    expect(["a\rb", "a\nb", "a\u0000b", "\u2713"].map(wireSafe)).toEqual([false, false, false, false]);
    expect(["Webhook-Signature", "user-agent", "Content-Length", "X-GitHub-Event"].map(isReservedHeader)).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(namedHeaderProblems({ event_header: "webhook-id", dedup_header: "X-GitHub-Delivery" })).toEqual([
      "event_header webhook-id is a header hookspool sets",
    ]);
  });
});

describe("readSecrets", () => {
  test("current first, then previous ones; file refs drop one trailing newline", () => {
    const f = join(tempDir(), "s");
    writeFileSync(f, "from-file\n");
    expect(readSecrets([{ file: f }, { env: "OLD" }], { OLD: "old" })).toEqual(["from-file", "old"]);
  });

  test("unreadable or malformed secrets are config outcomes that never hold a value", () => {
    const missing = readSecrets([{ env: "NOPE" }], {});
    expect(missing).toMatchObject({ kind: "retry", klass: "config", reason: "secret unreadable" });
    const prev = readSecrets([{ env: "A" }, { env: "B" }], { A: "a" });
    expect(prev).toMatchObject({ klass: "config", reason: "previous secret unreadable" });
    const bad = readSecrets([{ env: "W" }], { W: `whsec_${SENTINEL}!!` });
    expect(bad).toMatchObject({ klass: "config", reason: "secret is not valid whsec_ base64" });
    expect(JSON.stringify(bad)).not.toContain(SENTINEL);
  });
});
