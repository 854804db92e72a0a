// What the scorecard's running rows share: a bobbin's captures and captures/kit.toml as loaded,
// its accepted capture, the config the kit serves the bobbin with, and a capture as the kit sends
// it. captures-row.ts, source-kit-row.ts and processor-row.ts run the bobbin with them.
import { stringify } from "smol-toml";
import {
  type Capture,
  capturesOf,
  type Kit,
  type PollCapture,
  parseKit,
  parsePollCapture,
} from "../../bobbin/captures.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import type { KitRequest } from "../kit/source-kit.ts";
import type { Problem } from "./row.ts";
import type { CheckSubject } from "./subject.ts";

export const KIT = "captures/kit.toml";

export interface Loaded {
  kit: Kit | null;
  captures: Capture[];
  /** A poll bobbin's captures/poll-*.json. */
  polls: PollCapture[];
  problems: Problem[];
}

export function loadCaptures(s: CheckSubject): Loaded {
  const problems: Problem[] = [];
  let kit: Kit | null = null;
  const kitText = s.files.get(KIT);
  if (kitText !== undefined) {
    try {
      kit = parseKit(kitText);
    } catch (e) {
      problems.push({
        file: KIT,
        message: (e as Error).message,
        fix: "see docs/bobbins/writing-a-bobbin.md for the kit file",
      });
    }
  }
  const captures: Capture[] = [];
  for (const [f, text] of s.files) {
    if (!f.startsWith("captures/") || !f.endsWith(".http")) continue;
    try {
      captures.push(...capturesOf(new Map([[f, text]])));
    } catch (e) {
      problems.push({
        file: f,
        line: 1,
        message: (e as Error).message.replace(`${f}: `, ""),
        fix: "open it with # expect: <status> [word], then METHOD PATH, headers, a blank line and the body",
      });
    }
  }
  const polls: PollCapture[] = [];
  for (const [f, text] of s.files) {
    if (!/^captures\/poll-[^/]+\.json$/.test(f)) continue;
    try {
      polls.push(parsePollCapture(f, text));
    } catch (e) {
      problems.push({
        file: f,
        message: (e as Error).message.replace(`${f}: `, ""),
        fix:
          'a poll capture is {"description": ..., "now": ..., ' +
          '"http": [{"url": ..., "status": ..., "body": ...}], "items": [...]}',
      });
    }
  }
  return { kit, captures, polls, problems };
}

/** A bobbin's accepted capture for the kit's own instance: 202 queued, no settings of its own. */
export const acceptedOf = (l: Loaded) =>
  l.captures.find(
    (c) => (c.expect.status === 202 || c.expect.status === 200) && c.expect.word === "queued" && !c.settings,
  );

/** The config the kit serves a bobbin with: one [bobbins.<i>] table per instance. */
export function kitConfig(
  s: CheckSubject,
  m: Manifest,
  kit: Kit,
  instances: Iterable<[string, { settings: Record<string, unknown> }]>,
): string {
  const secrets = Object.fromEntries(Object.keys(kit.secrets).map((n) => [n, { file: `{{secret:${n}}}` }]));
  const outputs = Object.fromEntries(Object.keys(m.outputs).map((o) => [o, "kit"]));
  const doc: Record<string, unknown> = {
    bobbins: Object.fromEntries(
      [...instances].map(([name, i]) => [
        name,
        { bobbin: m.name, secrets, ...(Object.keys(i.settings).length ? { settings: i.settings } : {}), outputs },
      ]),
    ),
    // Never delivered to: the intake is what the kit runs.
    destinations: { kit: { type: "http", url: "http://127.0.0.1:9/kit", allow_insecure: true, unsigned: true } },
  };
  if (!s.shipped && s.root) doc.spool = { bobbin_path: [s.root] };
  return stringify(doc);
}

/** A capture as the kit sends it: to its instance's path, framed by fetch (its own Host and length). */
export function requestOf(c: Capture, instance: string): KitRequest {
  const r = c.request;
  return {
    method: r.method,
    url: r.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${instance}`),
    headers: r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())),
    body: r.body,
  };
}
