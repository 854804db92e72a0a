// The source kit notices a source that does not do what its subject says: each mis-declared
// property fails the case that proves it, with a reason, and a case that cannot apply is skipped.
import { describe, expect, test } from "bun:test";
import { type KitSubject, runSourceKit } from "../../src/check/kit/source-kit.ts";
import { signTemplate } from "../../src/plugin/sign.ts";
import { T0 } from "../helpers/spool.ts";

const SECRET = "kit-test-secret-value";
const template = { scheme: "hmac-sha256-hex" as const, header: "X-Sig", prefix: "sha256=" };
const enc = new TextEncoder();

function subject(over: Partial<KitSubject> = {}): KitSubject {
  const body = enc.encode(JSON.stringify({ id: "a1", kind: "push" }));
  return {
    source: "s",
    config: `[sources.s]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "id" }
secrets.secret = { file = "{{secret:s}}" }
action = "hermes:s"
`,
    secrets: { s: SECRET },
    now: T0,
    accepted: {
      method: "POST",
      url: "/hooks/s",
      headers: [["Content-Type", "application/json"], ...signTemplate(template, SECRET, body, T0).headers],
      body,
    },
    sign: (b, now) => signTemplate(template, SECRET, b, now),
    authHeaders: ["X-Sig"],
    bodySigned: true,
    timestamped: false,
    dedup: false,
    ...over,
  };
}

const outcome = (cases: { name: string; outcome: string; detail?: string }[], prefix: string) =>
  cases.find((c) => c.name.startsWith(prefix));

describe("the source kit", () => {
  test("a truthful subject passes, and what does not apply is skipped with a reason", async () => {
    const { cases, stored } = await runSourceKit(subject());
    expect(cases.filter((c) => c.outcome === "fail")).toEqual([]);
    expect(outcome(cases, "stale")).toEqual({
      name: expect.any(String),
      outcome: "skip",
      detail: "the scheme carries no timestamp",
    });
    expect(outcome(cases, "duplicate")?.outcome).toBe("skip");
    expect(stored?.key).toBe("a1");
  });

  test("a timestamp the scheme does not check fails stale, with what was answered", async () => {
    const { cases } = await runSourceKit(subject({ timestamped: true }));
    expect(outcome(cases, "stale")).toMatchObject({
      outcome: "fail",
      detail: "301 s after it was signed: 202, expected 401",
    });
  });

  test("a dedup the source does not do fails duplicate", async () => {
    const { cases } = await runSourceKit(subject({ dedup: true }));
    expect(outcome(cases, "duplicate")?.outcome).toBe("fail");
    expect(outcome(cases, "duplicate")?.detail).toStartWith("202");
  });

  test("a token scheme said to sign the body fails tampered", async () => {
    const token = { scheme: "static-token" as const, header: "X-Token" };
    const body = enc.encode('{"id":"t1"}');
    const s = subject({
      config: `[sources.s]
template = { scheme = "static-token", header = "X-Token", key = "id" }
secrets.secret = { file = "{{secret:s}}" }
action = "hermes:s"
`,
      accepted: { method: "POST", url: "/hooks/s", headers: signTemplate(token, SECRET, body, T0).headers, body },
      sign: (b, now) => signTemplate(token, SECRET, b, now),
      authHeaders: ["X-Token"],
    });
    expect(outcome((await runSourceKit(s)).cases, "tampered")).toMatchObject({
      outcome: "fail",
      detail: "with one byte added: 202, expected 401",
    });
    expect(outcome((await runSourceKit({ ...s, bodySigned: false })).cases, "tampered")?.outcome).toBe("skip");
  });

  test("text that reaches a log line fails the sentinel case", async () => {
    const { cases } = await runSourceKit(subject({ payloadSentinels: ["queued"] }));
    expect(outcome(cases, "no secret")).toMatchObject({
      outcome: "fail",
      detail: "a log line holds part of a payload",
    });
  });

  test("without a signer, the case that needs a new body is skipped, not failed", async () => {
    const { cases } = await runSourceKit(
      subject({
        sign: undefined,
        dedup: true,
        config: subject().config.replace('key = "id"', 'key = "id", dedup = "id"'),
      }),
    );
    expect(cases.filter((c) => c.outcome === "fail")).toEqual([]);
    expect(outcome(cases, "a verified request")?.outcome).toBe("skip");
    // A repeat still takes the write lock, so a refused write shows on the accepted request too.
    expect(outcome(cases, "spool unwritable")?.outcome).toBe("pass");
    expect(outcome(cases, "duplicate")?.outcome).toBe("pass");
  });
});
