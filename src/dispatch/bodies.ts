// Bodies kept in files, at delivery: inline when the document still fits the destination's
// max_body_bytes; beyond it an http destination gets each such event as a reference (body_url,
// a signed link on the intake's loopback listener that expires) unless it sets large = "refuse",
// a script gets the file's path, and a Hermes destination refuses (dead, reason config): the
// gateway takes bodies up to its own max_body_bytes and fetches nothing.
import { readFile } from "node:fs/promises";
import { bodyPath, bodyUrlKey, bodyUrlPath } from "../bodies.ts";
import { parseListen } from "../config/listen.ts";
import type { Config } from "../config/types.ts";
import { type Destination, outcome, type Outcome } from "../delivery.ts";
import type { ContentEvent } from "../store/content.ts";

/** How long a body_url stays valid: a receiver fetches it while it handles the delivery. */
export const BODY_URL_TTL_S = 3600;

export interface BodyContext {
  /** <home>/bodies/ */
  dir: string;
  /** http://host:port of the intake's loopback listener, or null when it has no TCP one. */
  urlBase(): string | null;
  nowS(): number;
}

/** The intake's listener as body_url's base, from intake.listen (null: a unix socket or port 0). */
export function listenBase(config: Config): string | null {
  try {
    const l = parseListen(config.intake.listen, config.intake.allow_non_loopback);
    if ("unix" in l || l.port === 0) return null;
    return `http://${l.hostname.includes(":") ? `[${l.hostname}]` : l.hostname}:${l.port}`;
  } catch {
    return null;
  }
}

/** The reference a stored payload holds for a body in a file. */
function referenceOf(e: ContentEvent): { sha256: string; bytes: number } {
  const r = JSON.parse(e.payload ?? "null")?.hookspool_body;
  return { sha256: String(e.body_file), bytes: Number(r?.bytes ?? 0) };
}

const refused = (detail: string): Outcome =>
  outcome({ kind: "dead", klass: "permanent", reason: "body over max_body_bytes", detail, deadReason: "config" });

/**
 * The content as `dest` gets it: each body in a file read in, or replaced by its reference; or
 * the dead outcome of a destination that takes neither. `docBytes` is the document's length with
 * the references in place.
 */
export async function resolveBodies(
  content: ContentEvent[],
  docBytes: number,
  dest: Destination,
  large: "reference" | "refuse" | undefined,
  ctx: BodyContext,
): Promise<ContentEvent[] | Outcome> {
  const files = content.filter((e) => e.body_file);
  if (files.length === 0) return content;
  const refs = new Map(files.map((e) => [e.id, referenceOf(e)]));
  let inline = docBytes;
  for (const e of files) inline += (refs.get(e.id)?.bytes ?? 0) - Buffer.byteLength(e.payload ?? "");
  const swap = async (f: (e: ContentEvent, r: { sha256: string; bytes: number }) => Promise<string> | string) =>
    Promise.all(
      content.map(async (e) => {
        const r = refs.get(e.id);
        return r ? { ...e, payload: await f(e, r) } : e;
      }),
    );
  if (inline <= dest.maxBodyBytes)
    return swap(async (_e, r) => (await readFile(bodyPath(ctx.dir, r.sha256))).toString("utf8"));
  const over = `${inline} bytes with the bodies inline > max_body_bytes ${dest.maxBodyBytes}`;
  switch (dest.type) {
    case "hermes":
      return refused(`${over}; Hermes takes bodies inline only (raise both max_body_bytes, or route elsewhere)`);
    case "script":
      return swap((_e, r) => JSON.stringify({ body_file: bodyPath(ctx.dir, r.sha256), body_bytes: r.bytes }));
    case "http": {
      if (large === "refuse") return refused(`${over}; the destination sets large = "refuse"`);
      const base = ctx.urlBase();
      if (base === null) return refused(`${over}; body_url needs the intake on a TCP loopback address (intake.listen)`);
      const key = bodyUrlKey(ctx.dir);
      const expires = Math.floor(ctx.nowS()) + BODY_URL_TTL_S;
      return swap((_e, r) =>
        JSON.stringify({
          body_url: base + bodyUrlPath(key, r.sha256, expires),
          body_bytes: r.bytes,
          body_sha256: r.sha256,
        }),
      );
    }
    default:
      return swap(async (_e, r) => (await readFile(bodyPath(ctx.dir, r.sha256))).toString("utf8"));
  }
}
