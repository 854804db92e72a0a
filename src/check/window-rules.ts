// hookspool check, the coalescing window's bounds: quiet_s against max_s, max_bytes and each
// event against the receiver's cap (per event when the destination unwraps), and the dedup window
// against retention.
import { quoteKey } from "../config/parse.ts";
import { destinationSettings } from "../config/destinations.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import { windowFor } from "../config/windows.ts";
import { worstMetaBytes } from "../store/content.ts";
import { MAX_KEY_BYTES } from "../store/enqueue.ts";
import { destinationKey, type Flow, sourceKey } from "./flows.ts";
import type { PluginFacts } from "./plugins.ts";
import { problem } from "./problem.ts";

/** Where a window field's value comes from: the key an operator edits to change it. */
function windowKey(config: Config, f: Flow, field: "max_bytes" | "quiet_s" | "max_s"): string {
  if (f.route?.[field] !== undefined) return `${f.key}.${field}`;
  const src = Object.hasOwn(config.sources, f.source) ? config.sources[f.source] : undefined;
  if (src?.[field] !== undefined) return `${sourceKey(f.source)}.${field}`;
  return `coalesce.${field}`;
}

/** What a batch document's head (its ids, key, counts and summary) may take beside its events. */
const DOCUMENT_HEAD_BYTES = 4096 + 2 * MAX_KEY_BYTES;

/**
 * quiet_s <= max_s (warning), max_bytes <= 0.75 x the receiver's max_body_bytes, and no single
 * event larger than max_bytes; with unwrap, every event within the destination's cap and no
 * coalescing (warning); dedup window vs retention (warning).
 */
export function windowRules(config: Config, flows: Flow[], plugins: Map<string, PluginFacts>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const [name, src] of Object.entries(config.sources)) {
    const span = src.span ?? plugins.get(name)?.span;
    const w = windowFor(config, name, null, span);
    // The same words as validate.ts, so a warning both find is printed once.
    if (w.quiet_s > w.max_s)
      out.push(
        problem(
          "warning",
          sourceKey(name),
          `quiet_s (${w.quiet_s}) > max_s (${w.max_s}): the quiet window can never fire`,
        ),
      );
    if (src.dedup_window_s > config.retention.delivered_days * 86400) {
      out.push(
        problem(
          "warning",
          `${sourceKey(name)}.dedup_window_s`,
          "the dedup window is longer than retention.delivered_days",
          "an id may outlive the event it points at; that is allowed but check says so",
        ),
      );
    }
  }
  for (const f of flows) {
    const span = Object.hasOwn(config.sources, f.source)
      ? (config.sources[f.source].span ?? plugins.get(f.source)?.span)
      : undefined;
    const w = windowFor(config, f.source, f.route?.name ?? null, span);
    if (f.route && (f.route.quiet_s !== undefined || f.route.max_s !== undefined) && w.quiet_s > w.max_s) {
      out.push(
        problem("warning", f.key, `quiet_s (${w.quiet_s}) > max_s (${w.max_s}): the quiet window can never fire`),
      );
    }
    const s = f.destination === null ? null : destinationSettings(config, f.destination);
    if (s === null) continue;
    const cap = s.max_body_bytes;
    const unwrap = (s.type === "hermes" || s.type === "http") && (s.table?.unwrap ?? false);
    const src = Object.hasOwn(config.sources, f.source) ? config.sources[f.source] : undefined;
    const bobbin = Object.hasOwn(config.bobbins, f.source) ? config.bobbins[f.source] : undefined;
    const accepted = src?.max_body_bytes ?? bobbin?.max_body_bytes ?? config.intake.max_body_bytes;
    // A body above spool.inline_max_bytes is kept in a file: it reaches a document inline only
    // when it fits, else by reference (http), as a path (script) or not at all (hermes, or an
    // http destination with large = "refuse"), so the document rules below bound only inline bodies.
    const inlineMax = config.spool.inline_max_bytes;
    const bodyCap = Math.min(accepted, Math.max(inlineMax, 1));
    const bodyKey =
      src?.max_body_bytes !== undefined
        ? `${sourceKey(f.source)}.max_body_bytes`
        : bobbin?.max_body_bytes !== undefined
          ? `bobbins.${quoteKey(f.source)}.max_body_bytes`
          : "intake.max_body_bytes";
    const to = `route ${f.name} -> ${s.name}`;
    const refuses = s.type === "hermes" || (s.type === "http" && s.table?.large === "refuse");
    if (refuses && accepted > inlineMax && accepted > cap) {
      out.push(
        problem(
          "warning",
          bodyKey,
          `${to}: source ${f.source} accepts bodies up to ${accepted} bytes; one kept in a file that does not ` +
            `fit the destination's max_body_bytes (${cap}) is dead (reason config): ` +
            (s.type === "hermes" ? "Hermes takes bodies inline only" : 'the destination sets large = "refuse"'),
          `lower ${bodyKey} to <= ${cap}, or route large bodies to an http destination that takes body_url`,
        ),
      );
    }
    if (unwrap) {
      // Unwrap: the receiver gets each stored payload on its own, so the cap is per event.
      if (Number.isFinite(cap) && bodyCap > cap) {
        out.push(
          problem(
            "error",
            bodyKey,
            `${to}: source ${f.source} accepts bodies up to ${bodyCap} bytes, ` +
              `more than the destination's max_body_bytes (${cap}); it unwraps, so each event must fit`,
            `lower ${bodyKey} to <= ${cap} or raise ${destinationKey(s.name)}.max_body_bytes`,
          ),
        );
      }
      if (w.quiet_s > 0 || w.max_s > 0) {
        out.push(
          problem(
            "warning",
            f.key,
            `${to}: the destination unwraps (one request per event) but the route coalesces ` +
              `(quiet_s ${w.quiet_s}, max_s ${w.max_s}); the receiver gets each batch as a burst`,
            'use span = "immediate", quiet_s = max_s = 0, for a route to an unwrap destination',
          ),
        );
      }
      continue;
    }
    // A script has no receiver cap (Infinity): no document can be refused for its size.
    if (!Number.isFinite(cap)) continue;
    const limit = Math.floor(cap * 0.75);
    if (w.max_bytes > limit) {
      const key = windowKey(config, f, "max_bytes");
      out.push(
        problem(
          "error",
          key,
          `${to}: max_bytes ${w.max_bytes} is over 3/4 of the destination's max_body_bytes (${cap}); ` +
            "a batch document could be refused",
          `set max_bytes <= ${limit} or raise ${destinationKey(s.name)}.max_body_bytes`,
        ),
      );
    }
    // A batch of one event carries its body and its event_meta (kept headers and all) under the head.
    const worst =
      bodyCap +
      worstMetaBytes(plugins.get(f.source)?.keepHeaders ?? src?.keep_headers?.length ?? 0) +
      DOCUMENT_HEAD_BYTES;
    if (worst > cap) {
      out.push(
        problem(
          "error",
          bodyKey,
          `${to}: one event of source ${f.source} can make a document of ${worst} bytes ` +
            `(a body of ${bodyCap}, its event_meta at its largest, the document's head), ` +
            `more than the destination's max_body_bytes (${cap})`,
          `lower ${bodyKey}, keep fewer headers, or raise ${destinationKey(s.name)}.max_body_bytes`,
        ),
      );
    }
    if (bodyCap > w.max_bytes) {
      out.push(
        problem(
          "error",
          bodyKey,
          `${to}: source ${f.source} accepts bodies up to ${bodyCap} bytes, ` +
            `more than the route's max_bytes (${w.max_bytes}); one event could overflow the document`,
          `set ${sourceKey(f.source)}.max_body_bytes <= ${w.max_bytes}, ` +
            "or raise the route's max_bytes and the destination's cap with it",
        ),
      );
    }
  }
  return out;
}
