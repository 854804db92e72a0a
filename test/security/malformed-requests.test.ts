// What a client controls of a request's head, from raw bytes on a socket: the Host header and the
// request line. A malformed one is the client's 400 on every path (never a 5xx but 503), nothing
// is enqueued, and no internal issue is raised, so a client cannot page the operator. Bun's own
// parser answers some request lines itself and drops requests pipelined after the first; those
// behaviours are pinned here, so a Bun upgrade that changes them is noticed (a reverse proxy in
// front, as docs/operations/running.md requires, never sends either).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { connect } from "node:net";
import { startIntake, type TestIntake } from "../helpers/intake.ts";

const SECRET = "malformed-test-secret";
const CONFIG = `[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "k" }
secrets.secret = { file = "{{secret:demo}}" }
action = "hermes:demo"
`;

/** Write `text` to the intake's port and collect what comes back until it closes (or 1.5 s). */
function raw(port: number, text: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    const c = connect(port, "127.0.0.1", () => c.write(text));
    c.on("data", (d) => {
      out += d.toString("latin1");
    });
    c.on("close", () => resolve(out));
    c.on("error", () => resolve(out));
    setTimeout(() => {
      c.destroy();
      resolve(out);
    }, 1500);
  });
}

const statusOf = (answer: string) => Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0);
const signed = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;

describe("a client's malformed request head", () => {
  let t: TestIntake;
  let port: number;
  beforeAll(async () => {
    t = await startIntake(CONFIG, { secrets: { demo: SECRET } });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.stop();
  });

  const internal = () => t.count("issues", "kind = 'internal'");

  // Every Host a client can send that names no host: missing (HTTP/1.0 and 1.1), empty, spaces,
  // brackets, slashes, escapes, extra colons, userinfo, queries and fragments, a bad port.
  const HOSTS: (string | null)[] = [
    null,
    "",
    "a b",
    "[",
    "[::1",
    "a/b",
    "%",
    "%41",
    "x:y:z",
    "a@b",
    "a?b",
    "a#b",
    "a:port",
    "a:123456",
    "a\tb",
    "ok:1/../x",
    "\u00e9.example",
  ];
  const PATHS = ["/healthz", "/metrics", "/hooks/demo", "/nowhere"];

  for (const host of HOSTS) {
    test(`Host ${JSON.stringify(host)}: 400 on every path, nothing queued, no internal issue`, async () => {
      const body = '{"k":"x"}';
      for (const path of PATHS) {
        for (const version of ["1.0", "1.1"]) {
          const method = path === "/hooks/demo" ? "POST" : "GET";
          const head = [
            `${method} ${path} HTTP/${version}`,
            ...(host === null ? [] : [`Host: ${host}`]),
            "Connection: close",
            ...(method === "POST" ? [`Content-Length: ${body.length}`, `X-Sig: ${signed(body)}`] : []),
          ];
          const answer = await raw(
            port,
            Buffer.from(`${head.join("\r\n")}\r\n\r\n${method === "POST" ? body : ""}`, "utf8"),
          );
          const status = statusOf(answer);
          // Bun's parser refuses some heads itself (400); ours refuses the rest (400). Never 5xx.
          expect({ host, path, version, status }).toEqual({ host, path, version, status: 400 });
        }
      }
      expect(t.count("events")).toBe(0);
      expect(internal()).toBe(0);
    });
  }

  test("a well-formed Host (a name, an address, a bracketed IPv6, a port) still reaches everything", async () => {
    for (const host of ["hooks.example.com", "127.0.0.1:8650", "[::1]:8650", "under_score.example"]) {
      const answer = await raw(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect({ host, status: statusOf(answer) }).toEqual({ host, status: 200 });
    }
    const body = '{"k":"one"}';
    const answer = await raw(
      port,
      `POST /hooks/demo?x=1 HTTP/1.1\r\nHost: hooks.example.com\r\nConnection: close\r\n` +
        `Content-Length: ${body.length}\r\nX-Sig: ${signed(body)}\r\n\r\n${body}`,
    );
    expect(statusOf(answer)).toBe(202);
    expect(t.count("events")).toBe(1);
  });

  test("odd request targets are 4xx, never 5xx: absolute-form, doubled slashes, escapes, fragments", async () => {
    for (const target of [
      "http://evil.example/healthz",
      "//x/hooks/demo",
      "/hooks/%zz",
      "/hooks/demo%00",
      "/healthz#frag",
      "/hooks/../healthz",
      `/hooks/${"a".repeat(4000)}`,
    ]) {
      const answer = await raw(port, `GET ${target} HTTP/1.1\r\nHost: hooks.example.com\r\nConnection: close\r\n\r\n`);
      const status = statusOf(answer);
      expect({ target: target.slice(0, 40), ok: status >= 200 && status < 500 }).toEqual({
        target: target.slice(0, 40),
        ok: true,
      });
    }
    expect(internal()).toBe(0);
  });

  test("Bun's parser (pinned): a request line it cannot read is answered by Bun itself, 400 or 505", async () => {
    const seen: Record<string, number> = {};
    for (const line of [
      "GET /healthz HTTP/9.9",
      "GET /healthz",
      "GET /healthz HTTP/1.1 extra",
      "GET  /healthz HTTP/1.1",
      "G@T /healthz HTTP/1.1",
      "OPTIONS * HTTP/1.1",
      "GET healthz HTTP/1.1",
    ]) {
      seen[line] = statusOf(await raw(port, `${line}\r\nHost: hooks.example.com\r\nConnection: close\r\n\r\n`));
    }
    expect(seen).toEqual({
      "GET /healthz HTTP/9.9": 505,
      "GET /healthz": 505,
      "GET /healthz HTTP/1.1 extra": 505,
      "GET  /healthz HTTP/1.1": 400,
      "G@T /healthz HTTP/1.1": 400,
      "OPTIONS * HTTP/1.1": 400,
      "GET healthz HTTP/1.1": 400,
    });
    expect(internal()).toBe(0);
  });

  test(
    "Bun's parser (pinned): requests pipelined after the first are dropped, and the first is " +
      "committed without an answer",
    async () => {
      const before = t.count("events");
      const one = (id: string) => {
        const body = `{"k":"p","id":"${id}"}`;
        return (
          `POST /hooks/demo HTTP/1.1\r\nHost: hooks.example.com\r\n` +
          `Content-Length: ${body.length}\r\nX-Sig: ${signed(body)}\r\n\r\n${body}`
        );
      };
      const answer = await raw(port, one("first") + one("second"));
      // Today: no answer comes back at all, and only the first request reached hookspool.
      expect(answer).toBe("");
      for (let i = 0; i < 100 && t.count("events") === before; i++) await Bun.sleep(10);
      expect(t.count("events")).toBe(before + 1);
    },
  );
});
