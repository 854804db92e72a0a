// Malformed input: answered with its proper status, never a 5xx from our own
// code (the only 5xx is 503 when the spool cannot take a write), and the intake keeps
// serving afterwards. Verified but unparseable bodies are quarantined, not refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { rawConnect, rawRequest } from "./rawhttp.ts";

const SECRET = `demo-${SECRET_SENTINEL}`;
const sig = (body: Uint8Array | string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;

let t: TestIntake;
let port: number;

beforeAll(async () => {
  t = await startIntake(
    `[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "type" }
secrets.secret = { file = "{{secret:demo}}" }
action = "hermes:demo"
`,
    { secrets: { demo: SECRET } },
  );
  port = Number(new URL(t.url).port);
});
afterAll(async () => {
  await t.stop();
});

const signed = (body: Uint8Array | string, extra: Record<string, string> = {}) =>
  t.post("/hooks/demo", body, { "X-Sig": sig(body), ...extra });

/** The intake still answers a good request at once. */
async function stillServing(): Promise<void> {
  const body = JSON.stringify({ topic: "alive", n: crypto.randomUUID() });
  const started = performance.now();
  const res = await signed(body);
  expect(res.status).toBe(202);
  expect(performance.now() - started).toBeLessThan(2000);
}

function lastQuarantine(): { raw: Uint8Array; last_error: string; state: string } {
  return t.db.db
    .query(
      "SELECT e.raw, b.last_error, b.state FROM events e JOIN batches b ON b.id = e.batch_id WHERE " +
        "b.destination = 'quarantine' ORDER BY e.id DESC LIMIT 1",
    )
    .get() as { raw: Uint8Array; last_error: string; state: string };
}

describe("verified bodies our code cannot classify: 202 quarantined, raw kept byte for byte", () => {
  test("bad JSON", async () => {
    const body = `{"topic": "x", "note": "${PAYLOAD_SENTINEL}", `;
    const res = await signed(body);
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: "quarantined" });
    const q = lastQuarantine();
    expect(Buffer.from(q.raw).toString()).toBe(body);
    // A short fixed reason, filed under the sender: its body is not JSON.
    expect(q).toMatchObject({ state: "dead", last_error: "not_json" });
    expect(t.count("issues", "fingerprint = 'source:quarantine:demo' AND kind = 'source' AND state = 'open'")).toBe(1);
  });

  test("invalid UTF-8", async () => {
    const body = new Uint8Array([0x7b, 0x22, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]);
    const res = await signed(body);
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: "quarantined" });
    expect([...lastQuarantine().raw]).toEqual([...body]);
    expect(lastQuarantine().last_error).toBe("not_utf8");
  });

  test("JSON that is not an object, and an empty body", async () => {
    for (const body of ["[1,2,3]", '"just a string"', "null", "42", ""]) {
      const res = await signed(body);
      expect([res.status, body]).toEqual([202, body]);
      expect(((await res.json()) as { status: string }).status).toBe("quarantined");
      // There is no "topic" to make a key of.
      expect([body, lastQuarantine().last_error]).toEqual([body, "key_missing"]);
    }
  });
});

describe("NUL bytes", () => {
  test("escaped inside JSON strings (valid JSON): queued, and the key keeps every byte", async () => {
    const body = JSON.stringify({ topic: "a\u0000b", type: "t\u0000", note: `x\u0000${PAYLOAD_SENTINEL}` });
    expect(body).toContain("\\u0000");
    const res = await signed(body);
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: "queued" });
    const row = t.db.db
      .query(
        "SELECT b.key, e.event_type, e.payload FROM events e JOIN batches b ON b.id = e.batch_id " +
          "ORDER BY e.id DESC LIMIT 1",
      )
      .get() as {
      key: string;
      event_type: string;
      payload: string;
    };
    expect(row).toEqual({ key: "a\u0000b", event_type: "t\u0000", payload: body });
    // A key that differs only after the NUL is another group, not the same one truncated.
    const other = JSON.stringify({ topic: "a\u0000c" });
    expect((await signed(other)).status).toBe(202);
    expect(t.count("batches", "key = 'a' || char(0) || 'c'")).toBe(1);
    expect(t.count("batches", "key = 'a' || char(0) || 'b'")).toBe(1);
  });

  test("raw NUL bytes inside a JSON string and outside any value: quarantined", async () => {
    const inside = new TextEncoder().encode('{"topic":"a\u0000b"}');
    expect(inside.includes(0)).toBe(true);
    const outside = new Uint8Array([...new TextEncoder().encode('{"topic":"a"}'), 0, 0]);
    const only = new Uint8Array(64);
    for (const body of [inside, outside, only]) {
      const res = await signed(body);
      expect(res.status).toBe(202);
      expect(await res.json()).toEqual({ status: "quarantined" });
    }
  });

  test("a NUL in a header value is refused by the server (4xx), not by a crash", async () => {
    const r = await rawRequest(
      port,
      "POST /hooks/demo HTTP/1.1\r\nHost: x\r\nX-Sig: sha256=ab\u0000cd\r\nContent-Length: 2\r\n" +
        "Connection: close\r\n\r\n{}",
    );
    if (r.statuses.length) expect(r.statuses[0] >= 400 && r.statuses[0] < 500).toBe(true);
    else expect(r.closed).toBe(true);
    await stillServing();
  });
});

describe("hostile requests: refused or cut off, and the intake keeps serving", () => {
  test("~10 MiB of headers: 431 (or the connection closed)", async () => {
    const c = await rawConnect(port);
    try {
      const head = `POST /hooks/demo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n`;
      const line = `X-Junk: ${"j".repeat(8000)}\r\n`;
      await c.write(head + line.repeat(Math.ceil((10 * 1024 * 1024) / line.length)) + "\r\n{}");
      const closed = await c.waitClosed(5000);
      const statuses = c.statuses();
      expect(closed || statuses.length > 0).toBe(true);
      for (const s of statuses) expect(s === 431 || (s >= 400 && s < 500)).toBe(true);
    } finally {
      c.close();
    }
    await stillServing();
  });

  test("one header of 10 MiB: 431 (or the connection closed)", async () => {
    const r = await rawRequest(
      port,
      `POST /hooks/demo HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(10 * 1024 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`,
      5000,
    );
    expect(r.closed || r.statuses.length > 0).toBe(true);
    for (const s of r.statuses) expect(s >= 400 && s < 500).toBe(true);
    await stillServing();
  });

  test("slowloris: a body dripped a byte at a time does not hold up anyone else, and is never stored", async () => {
    const before = t.count("events");
    const body = JSON.stringify({ topic: "drip", note: PAYLOAD_SENTINEL });
    const c = await rawConnect(port);
    try {
      await c.write(
        `POST /hooks/demo HTTP/1.1\r\nHost: x\r\nX-Sig: ${sig(body)}\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      for (let i = 0; i < 3; i++) {
        await c.write(body[i]);
        // Another sender is served at once while the drip is in progress.
        await stillServing();
        await Bun.sleep(300);
      }
      expect(c.statuses()).toEqual([]);
    } finally {
      c.close();
    }
    // One more full request, answered after the drip's connection closed: only the four
    // stillServing() events are in the spool, and the half-sent one never reached it.
    await stillServing();
    expect(t.count("events")).toBe(before + 4);
    expect(t.count("batches", "key = 'drip'")).toBe(0);
  });

  test("a huge request line (200 KB path) and a long unknown source name: 4xx, never a 5xx", async () => {
    const r = await rawRequest(
      port,
      `POST /hooks/${"p".repeat(200_000)} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    expect(r.closed || r.statuses.length > 0).toBe(true);
    for (const s of r.statuses) expect(s >= 400 && s < 500).toBe(true);
    const res = await t.post(`/hooks/${"n".repeat(4000)}`, "{}");
    expect(res.status).toBe(404);
    expect(await res.text()).toBe("");
    await stillServing();
  });

  test("a malformed percent-escape in the source name: 4xx, never a 5xx", async () => {
    const answers: [string, number][] = [];
    for (const path of ["/hooks/%ZZ", "/hooks/%E0%A4%A", "/hooks/demo%", "/hooks/%C0%80"]) {
      const res = await t.post(path, "{}");
      answers.push([path, res.status]);
      expect(await res.text()).toBe("");
    }
    // Unverified garbage in the URL is the sender's mistake: no source by that name (404) or a
    // bad request, not "request failed" 500 from an uncaught URIError.
    expect(answers.filter(([, s]) => s < 400 || s >= 500)).toEqual([]);
    await stillServing();
  });

  test("an unknown method and methods a source does not take: 4xx or closed, nothing stored", async () => {
    const before = t.count("events");
    for (const method of ["FOO", "BREW", "PROPFIND"]) {
      const r = await rawRequest(
        port,
        `${method} /hooks/demo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      );
      expect(r.closed || r.statuses.length > 0).toBe(true);
      for (const s of r.statuses) expect(s >= 400 && s < 500).toBe(true);
    }
    for (const method of ["PUT", "DELETE", "PATCH", "GET"]) {
      const res = await fetch(`${t.url}/hooks/demo`, { method, body: method === "GET" ? undefined : "{}" });
      expect([method, res.status]).toEqual([method, 405]);
    }
    expect(t.count("events")).toBe(before);
    await stillServing();
  });
});
