// hookspool send --handshake: the source's handshake as its sender makes it (a signed challenge,
// a GET verify token, a constant reply, a HEAD), and what the answer must be.
import { randomUUID } from "node:crypto";
import { HookspoolError } from "../errors.ts";
import type { TemplateSettings } from "../plugin/template.ts";

/** A body with `value` at the dotted `path` (numbers as numbers: Discord's type=1 is a number). */
function bodyWith(fields: [string, string][]): Uint8Array {
  const doc: Record<string, unknown> = {};
  for (const [path, value] of fields) {
    const keys = path.split(".");
    let at = doc;
    for (const k of keys.slice(0, -1)) at = (at[k] ??= {}) as Record<string, unknown>;
    at[keys[keys.length - 1]] = /^-?\d+$/.test(value) ? Number(value) : value;
  }
  return new TextEncoder().encode(JSON.stringify(doc));
}

/** The source's handshake as its sender makes it, and what the answer must be. */
export function handshakeOf(
  t: TemplateSettings,
  verifyToken: string | null,
): {
  method: string;
  query: string;
  body: Uint8Array | null;
  expect: (status: number, text: string) => boolean;
  what: string;
} {
  const challenge = `send-${randomUUID()}`;
  if (t.get_verify) {
    if (verifyToken === null) throw new HookspoolError("E_CONFIG", "get_verify needs the secret verify_token");
    const q = new URLSearchParams({
      "hub.mode": "subscribe",
      "hub.verify_token": verifyToken,
      "hub.challenge": challenge,
    });
    return {
      method: "GET",
      query: `?${q}`,
      body: null,
      expect: (s, x) => s === 200 && x === challenge,
      what: "the GET verify-token handshake",
    };
  }
  const when = (cond: string) => {
    const eq = cond.indexOf("=");
    return [cond.slice(0, eq).replace(/^field:/, ""), cond.slice(eq + 1)] as [string, string];
  };
  if (t.echo_when && t.echo_field) {
    return {
      method: "POST",
      query: "",
      body: bodyWith([when(t.echo_when), [t.echo_field.replace(/^field:/, ""), challenge]]),
      expect: (s, x) => s === 200 && x === challenge,
      what: `the signed challenge (${t.echo_when})`,
    };
  }
  if (t.reply_when && t.reply !== undefined) {
    const reply = t.reply;
    return {
      method: "POST",
      query: "",
      body: bodyWith([when(t.reply_when)]),
      expect: (s, x) => s === 200 && x === reply,
      what: `the constant reply (${t.reply_when})`,
    };
  }
  if (t.head_handshake)
    return { method: "HEAD", query: "", body: null, expect: (s) => s === 200, what: "the HEAD check" };
  throw new HookspoolError("E_USAGE", "this source answers no handshake");
}
