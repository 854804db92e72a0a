// The source kit (src/check/kit/source-kit.ts) on a source the test describes with its own
// signer: the same matrix `hookspool bobbin check` runs on a bobbin's captures, here with fresh
// payloads that carry the log sentinels. Each case of the kit is one test.
import { beforeAll, describe, expect, test } from "bun:test";
import { type KitRun, runSourceKit as runKit } from "../../src/check/kit/source-kit.ts";
import type { StoredEvent } from "../../src/store/sqlite/inspect.ts";
import { T0 } from "../helpers/spool.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

export { PAYLOAD_SENTINEL, SECRET_SENTINEL };

export interface Signed {
  headers: Record<string, string>;
  /** A query string to append (static tokens in the URL). */
  query?: string;
}

export interface SourceKit {
  title: string;
  /** The source's name in the config (the URL is /hooks/<source>). */
  source: string;
  /** The [sources.<source>] table and anything else; {{secret:<name>}} is a secret file's path. */
  config: string;
  /** Secret files to write: name -> value. Each value should contain SECRET_SENTINEL. */
  secrets: Record<string, string>;
  /** A valid payload; it should carry PAYLOAD_SENTINEL. */
  payload(): Record<string, unknown>;
  /** What makes `body` verify at `now`. */
  sign(body: Uint8Array, now: number): Signed;
  /** The headers that carry a signature or token: never stored, not even in quarantine. */
  authHeaders: string[];
  /** False for token schemes: the token does not cover the body, so tampering goes unnoticed. */
  bodySigned?: boolean;
  /** The scheme carries a timestamp: stale and future-dated requests are refused. */
  timestamped?: boolean;
  /** The source dedups: the same signed request twice is a duplicate. */
  dedup?: boolean;
  /** A signed payload that makes classification throw (a missing key field, say). */
  broken(): Record<string, unknown>;
  /** A handshake answered after verify: the body, and what a good answer is (null) or why not. */
  handshake?: { payload(): Record<string, unknown>; check(r: { status: number; text: string }): string | null };
  /** A constant HEAD handshake answered before verify (Trello's). */
  headHandshake?: boolean;
  /** Extra checks on the stored event (headers kept, key, event type). */
  stored?(row: StoredEvent): void;
}

const enc = new TextEncoder();

export function runSourceKit(kit: SourceKit): void {
  const request = (payload: Record<string, unknown>) => {
    const body = enc.encode(JSON.stringify(payload));
    const s = kit.sign(body, T0);
    return {
      method: "POST",
      url: `/hooks/${kit.source}${s.query ? `?${s.query}` : ""}`,
      headers: [["Content-Type", "application/json"], ...Object.entries(s.headers)] as [string, string][],
      body,
    };
  };
  let run: KitRun;
  beforeAll(async () => {
    run = await runKit({
      source: kit.source,
      config: kit.config,
      secrets: kit.secrets,
      now: T0,
      accepted: request(kit.payload()),
      sign: (body, now) => {
        const s = kit.sign(body, now);
        return { headers: Object.entries(s.headers), query: s.query };
      },
      authHeaders: kit.authHeaders,
      bodySigned: kit.bodySigned !== false,
      timestamped: kit.timestamped === true,
      dedup: kit.dedup === true,
      headHandshake: kit.headHandshake,
      answered: kit.handshake ? [{ request: request(kit.handshake.payload()), check: kit.handshake.check }] : undefined,
      broken: request(kit.broken()),
      payloadSentinels: [PAYLOAD_SENTINEL],
      secretSentinels: [SECRET_SENTINEL],
    });
  });

  describe(`source kit: ${kit.title}`, () => {
    test("every case of the matrix passes or does not apply", () => {
      const failed = run.cases.filter((c) => c.outcome === "fail").map((c) => `${c.name}: ${c.detail}`);
      expect(failed).toEqual([]);
    });

    test("the cases this source's scheme implies ran", () => {
      const ran = new Set(run.cases.filter((c) => c.outcome === "pass").map((c) => c.name.split(":")[0]));
      const expected = [
        "unsigned",
        "signed",
        "oversized",
        "chunked",
        "a verified request the source cannot classify",
        "spool unwritable",
        "no secret in any log line or column, no payload in any log line",
      ];
      if (kit.bodySigned !== false) expected.push("tampered body");
      if (kit.timestamped) expected.push("stale and future-dated", "within the tolerance");
      if (kit.dedup) expected.push("duplicate");
      if (kit.handshake)
        expected.push("a ping or handshake with a good signature", "a ping or handshake with a bad signature");
      if (kit.headHandshake) expected.push("HEAD handshake");
      expect([...ran].sort()).toEqual(expected.sort());
    });

    test("the stored event holds the payload", () => {
      expect(run.stored?.payload).toContain(PAYLOAD_SENTINEL);
      if (run.stored) kit.stored?.(run.stored);
    });
  });
}
