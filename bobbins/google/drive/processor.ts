// google.drive's processor: a batch of changes.watch notifications becomes the files that changed
// since the last batch, asked of changes.list with the page token kept in state.
//
// - State "pageToken": the changes.list page token to ask from next. The first batch ever (no
//   token) is a baseline: it asks changes.getStartPageToken, records the answer and returns
//   nothing, so a new instance does not report the changes that happened before it existed.
// - Later batches: changes.list from the token, every page (core's driveChanges, fields masked to
//   file metadata: never contents, permissions or owners), then the answer's newStartPageToken
//   is saved. A renewed channel changes nothing here: the token belongs to the instance.
// - Each file once per batch, in its latest state: a removal (deleted for good, or access lost)
//   or a file in the trash is a `removed` item; anything else is a `changed` item. Key: fileId.
// - `mime_types` keeps only those types; a removal names no type (Drive sends only the fileId)
//   and is always kept.
import { apiBaseUrl, BASE_URL_RULE } from "../../../src/providers/base-url.ts";
import { defineProcessor, type Item } from "../../../src/plugin/processor.ts";
import { type DriveChange, driveChanges, driveStartToken, type GoogleOptions } from "../../../src/providers/google.ts";

export interface DriveSettings {
  api_base_url: string;
  mime_types: string[];
}

/** api_base_url without a trailing slash; undefined for Google's own; null when it breaks core's rule. */
export const baseOf = apiBaseUrl;

/** The MIME types to keep (exact, as Drive writes them); empty keeps all. */
export function mimeTypesOf(raw: unknown): Set<string> {
  const list = Array.isArray(raw) ? raw : [];
  return new Set(
    list
      .filter((t): t is string => typeof t === "string")
      .map((t) => t.trim())
      .filter(Boolean),
  );
}

/** One item per file, its latest change last seen, in the order those came. */
export function itemsOf(changes: readonly DriveChange[], keep: ReadonlySet<string>): Item[] {
  const latest = new Map<string, DriveChange>();
  for (const c of changes) {
    latest.delete(c.fileId);
    latest.set(c.fileId, c);
  }
  const kept = (c: DriveChange) => keep.size === 0 || (c.mimeType !== undefined && keep.has(c.mimeType));
  const items: Item[] = [];
  for (const c of latest.values()) {
    if (c.removed) {
      // Drive gives no file with a removal: nothing but the id to say, and no type to filter on.
      items.push({ event_type: "removed", key: c.fileId, fileId: c.fileId, reason: "removed" });
    } else if (!kept(c)) {
      // A type mime_types leaves out: no item.
    } else if (c.trashed === true) {
      items.push({
        event_type: "removed",
        key: c.fileId,
        fileId: c.fileId,
        reason: "trashed",
        name: c.name ?? null,
        mimeType: c.mimeType ?? null,
        modifiedTime: c.modifiedTime ?? null,
      });
    } else {
      items.push({
        event_type: "changed",
        key: c.fileId,
        fileId: c.fileId,
        name: c.name ?? null,
        mimeType: c.mimeType ?? null,
        modifiedTime: c.modifiedTime ?? null,
        webViewLink: c.webViewLink ?? null,
      });
    }
  }
  return items;
}

export default defineProcessor<DriveSettings>({
  async process(batch, ctx) {
    const base = baseOf(ctx.settings.api_base_url);
    if (base === null) return ctx.failPermanent(BASE_URL_RULE);
    const opts: GoogleOptions = base === undefined ? {} : { base };
    const api = ctx.oauth("credential");
    const token = ctx.loadState<unknown>("pageToken", null);

    if (typeof token !== "string" || token === "") {
      const start = await driveStartToken(api, opts);
      ctx.saveState("pageToken", start);
      ctx.log(`batch ${batch.id}: first batch, the start page token recorded as the baseline; no items`);
      return [];
    }

    const { changes, newStartPageToken } = await driveChanges(api, token, opts);
    const items = itemsOf(changes, mimeTypesOf(ctx.settings.mime_types));
    ctx.saveState("pageToken", newStartPageToken);
    const removed = items.filter((i) => i.event_type === "removed").length;
    ctx.log(
      `batch ${batch.id}: ${batch.events.length} notification(s), ${changes.length} change(s), ` +
        `${items.length - removed} changed and ${removed} removed item(s)`,
    );
    return items;
  },
});
