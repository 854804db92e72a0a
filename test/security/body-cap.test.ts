// The body cap comes before any plugin code: Content-Length is required, a chunked
// request is 411, a body over max_body_bytes is 413, and a recording plugin proves that none of
// its functions ran for any of them. Lying and missing lengths go over a raw socket.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { LOG_LINES, startIntake, type TestIntake } from "../helpers/intake.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { calls } from "./fixtures/recorder.ts";
import { rawConnect, rawRequest } from "./rawhttp.ts";

const SECRET = `rec-${SECRET_SENTINEL}`;
const CAP = 4096;
const enc = new TextEncoder();
const sign = (body: Uint8Array | string) => createHmac("sha256", SECRET).update(body).digest("hex");

let t: TestIntake;
let port: number;

beforeAll(async () => {
  t = await startIntake(
    `[sources.rec]
module = "${join(import.meta.dir, "fixtures", "recorder.ts")}"
secrets.secret = { file = "{{secret:rec}}" }
max_body_bytes = ${CAP}
`,
    { secrets: { rec: SECRET } },
  );
  port = Number(new URL(t.url).port);
});
afterAll(async () => {
  await t.stop();
});
beforeEach(() => {
  calls.length = 0;
});

const stored = () => t.count("events");

describe("the recorder sees what reaches plugin code", () => {
  test(
    "a signed request at exactly the cap runs every plugin function; so does an unsigned one, up " + "to verify",
    async () => {
      const body = JSON.stringify({ note: PAYLOAD_SENTINEL, pad: "" });
      const padded = body.replace('"pad":""', `"pad":"${"p".repeat(CAP - body.length)}"`);
      expect(enc.encode(padded).length).toBe(CAP);
      const res = await t.post("/hooks/rec", padded, { "x-rec-signature": sign(padded) });
      expect(res.status).toBe(202);
      expect(new Set(calls.map((c) => c.fn))).toEqual(
        new Set(["challenge", "verify", "ignore", "payload", "key", "dedupId", "eventType", "attrs", "action"]),
      );
      expect(calls.every((c) => c.bytes === CAP)).toBe(true);
      calls.length = 0;
      expect((await t.post("/hooks/rec", "{}")).status).toBe(401);
      expect(calls.map((c) => c.fn)).toEqual(["challenge", "verify"]);
      calls.length = 0;
      // The unauthenticated handshake answers HEAD before verify, with a constant.
      expect((await fetch(`${t.url}/hooks/rec`, { method: "HEAD" })).status).toBe(200);
      expect(calls.map((c) => c.fn)).toEqual(["challenge"]);
    },
  );
});

describe("refused before any plugin code", () => {
  test("Content-Length one byte over the source's cap: 413, nothing recorded, nothing stored", async () => {
    const before = stored();
    const body = "x".repeat(CAP + 1);
    const res = await t.post("/hooks/rec", body, { "x-rec-signature": sign(body) });
    expect(res.status).toBe(413);
    expect(await res.text()).toBe("");
    expect(calls).toEqual([]);
    expect(stored()).toBe(before);
  });

  test(
    "a body far over every cap (2 MiB): 413 from the intake itself, counted and logged, nothing " + "recorded",
    async () => {
      const metric = async () =>
        Number(
          /hookspool_requests_rejected_total\{source="rec",reason="too_large"\} (\d+)/.exec(
            await (await fetch(`${t.url}/metrics`)).text(),
          )?.[1] ?? 0,
        );
      const before = await metric();
      // Refusals are logged at most once per 10 s per source and reason; the case above had one.
      t.clock.advance(11);
      const lines = LOG_LINES.length;
      const body = "y".repeat(2 * 1024 * 1024);
      const res = await t.post("/hooks/rec", body, { "x-rec-signature": sign(body) });
      expect(res.status).toBe(413);
      expect(calls).toEqual([]);
      // Not a 413 the HTTP server answers on its own, unseen: this one is counted and logged.
      expect(await metric()).toBe(before + 1);
      expect(
        LOG_LINES.slice(lines).some(
          (l) => l.includes("rejected source=rec status=413") && l.includes("reason=too_large"),
        ),
      ).toBe(true);
    },
  );

  test("a Content-Length over the cap but smaller than the body that follows it: 413, nothing recorded", async () => {
    const r = await rawRequest(
      port,
      `POST /hooks/rec HTTP/1.1\r\nHost: x\r\nContent-Length: ${CAP + 10}\r\nConnection: close\r\n` +
        `\r\n${"z".repeat(64 * 1024)}`,
    );
    expect(r.statuses[0]).toBe(413);
    expect(calls).toEqual([]);
  });

  test("no Content-Length at all, 2 MiB of body until the connection closes: 411, nothing recorded", async () => {
    const before = stored();
    const r = await rawRequest(
      port,
      `POST /hooks/rec HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n${"a".repeat(2 * 1024 * 1024)}`,
    );
    expect(r.statuses[0]).toBe(411);
    expect(calls).toEqual([]);
    expect(stored()).toBe(before);
  });

  test(
    "a lying smaller Content-Length: plugin code sees exactly the declared bytes, never the 2 MiB " + "behind them",
    async () => {
      // HTTP framing makes the first 16 bytes a complete request (unsigned: 401); what follows is
      // parsed as the next request line and refused by the server. No plugin call ever sees more.
      const before = stored();
      const r = await rawRequest(
        port,
        `POST /hooks/rec HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n${"b".repeat(2 * 1024 * 1024)}`,
      );
      expect(r.statuses[0]).toBe(401);
      for (const s of r.statuses.slice(1)) expect(s).toBeGreaterThanOrEqual(400);
      expect(r.statuses.slice(1).every((s) => s < 500)).toBe(true);
      expect(calls.length).toBeGreaterThan(0);
      expect(calls.every((c) => c.bytes === 16)).toBe(true);
      expect(calls.map((c) => c.fn)).toEqual(["challenge", "verify"]);
      expect(stored()).toBe(before);
    },
  );

  test("chunked through fetch (a streamed body): 411, nothing recorded", async () => {
    const body = enc.encode(JSON.stringify({ note: PAYLOAD_SENTINEL }));
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(body);
        c.close();
      },
    });
    const res = await fetch(`${t.url}/hooks/rec`, {
      method: "POST",
      body: stream,
      headers: { "x-rec-signature": sign(body) },
    });
    expect(res.status).toBe(411);
    expect(await res.text()).toBe("");
    expect(calls).toEqual([]);
  });

  test(
    "chunked over a raw socket, small and over the cap, and with another coding first: 411, " + "nothing recorded",
    async () => {
      const small = '{"a":1}';
      const chunk = (s: string) => `${s.length.toString(16)}\r\n${s}\r\n`;
      const head = (te: string) =>
        `POST /hooks/rec HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${te}\r\n` +
        `x-rec-signature: ${sign(small)}\r\nConnection: close\r\n\r\n`;
      const a = await rawRequest(port, `${head("chunked")}${chunk(small)}0\r\n\r\n`);
      expect(a.statuses[0]).toBe(411);
      const big = "c".repeat(8192);
      const b = await rawRequest(port, `${head("chunked")}${chunk(big)}${chunk(big)}0\r\n\r\n`);
      expect(b.statuses[0]).toBe(411);
      const c = await rawRequest(port, `${head("gzip, chunked")}${chunk(small)}0\r\n\r\n`);
      expect(c.statuses[0]).toBeGreaterThanOrEqual(400);
      expect(c.statuses[0]).toBeLessThan(500);
      expect(calls).toEqual([]);
    },
  );

  test("Content-Length that is not a number, is negative, or is given twice: 4xx, nothing recorded", async () => {
    for (const lengths of [["abc"], ["-1"], ["2", "5"], ["1e3"]]) {
      const c = await rawConnect(port);
      try {
        await c.write(
          `POST /hooks/rec HTTP/1.1\r\nHost: ` +
            `x\r\n${lengths.map((l) => `Content-Length: ${l}\r\n`).join("")}Connection: close\r\n\r\n` +
            `abcde`,
        );
        const statuses = await c.waitResponses(1, 2000);
        // A 4xx, or a connection the server simply closed: never a request plugin code sees.
        if (statuses.length) expect(statuses[0] >= 400 && statuses[0] < 500).toBe(true);
        else expect(c.closed()).toBe(true);
      } finally {
        c.close();
      }
    }
    expect(calls).toEqual([]);
  });

  test("the intake still serves after all of it", async () => {
    const body = JSON.stringify({ after: true });
    expect((await t.post("/hooks/rec", body, { "x-rec-signature": sign(body) })).status).toBe(202);
  });
});
