// google.calendar's processor: a batch of watch-channel notifications (one or more, each saying
// only "the calendar changed") becomes one `changed` item per event that changed since the last
// batch, asked of Calendar with the stored sync token (events.list, core's calendarChanges).
//
// - The first batch for a calendar is a baseline: a full sync from a day ago that records the
//   sync token and emits nothing (the calendar as it is is not news). A new calendar_id is
//   another calendar, so it starts a new baseline.
// - A sync token Calendar no longer honours (410 Gone) is dropped: a full sync from a day ago
//   gives a new token, and of its events those updated since the last good sync (less a
//   5-minute margin) are emitted, so a change made before the resync is not lost and the
//   unchanged calendar is not announced again.
// - A cancelled event is a `changed` item with status "cancelled" (often with nothing but id).
// - A hooks module's travel(event, dayEvents, ctx), when the deployment names one, is asked for
//   each changed event; dayEvents are the events of that event's day (one events.list call per
//   day, at most MAX_DAYS days a batch), and its answer is the item's `travel`.
// - State "sync": the calendar id, the sync token and when it was stored.
import { Retryable } from "../../../src/plugin/types.ts";
import { apiBaseUrl, BASE_URL_RULE } from "../../../src/providers/base-url.ts";
import { type Context, defineProcessor, type Item, type OAuthClient } from "../../../src/plugin/processor.ts";
import { CALENDAR, type CalendarEvent, calendarChanges } from "../../../src/providers/google.ts";

export interface CalendarSettings {
  calendar_id: string;
  api_base_url: string;
  hooks: string;
}

export interface SyncState {
  calendar_id: string;
  sync_token: string;
  /** Unix seconds: when the token was stored (a resync emits what was updated after it). */
  synced_at: number;
}

const DAY_S = 86_400;
/** A resync emits the events updated after the last good sync less this much (clock skew, in-flight edits). */
export const RESYNC_MARGIN_S = 300;
/** At most this many days' events are listed for the travel hook in one batch. */
export const MAX_DAYS = 31;
/** api_base_url without a trailing slash; undefined for Google's own; null when it breaks core's rule. */
export const baseOf = apiBaseUrl;

/** An event as the `changed` item carries it. */
function itemOf(calendarId: string, e: CalendarEvent): Item {
  return {
    event_type: "changed",
    key: calendarId,
    id: e.id,
    status: e.status,
    summary: e.summary,
    start: e.start,
    end: e.end,
    updated: e.updated,
    htmlLink: e.htmlLink,
    location: e.location ?? "",
  };
}

/** The last version of each event (an event listed twice in one sync is one change). */
function lastOfEach(events: readonly CalendarEvent[]): CalendarEvent[] {
  const byId = new Map<string, CalendarEvent>();
  for (const e of events) {
    byId.delete(e.id);
    byId.set(e.id, e);
  }
  return [...byId.values()];
}

type Travel = (event: CalendarEvent, dayEvents: CalendarEvent[], ctx: Context<CalendarSettings>) => unknown;

/** The bounds of an event's day in its own offset (UTC for an all-day event), or null. */
export function dayOf(start: string): { timeMin: string; timeMax: string } | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T[^Zz+-]*(Z|z|[+-]\d{2}:\d{2}))?$/.exec(start);
  if (!m) return null;
  const offset = m[4] ? m[4].toUpperCase() : "Z";
  const next = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]) + 1)).toISOString().slice(0, 10);
  return { timeMin: `${m[1]}-${m[2]}-${m[3]}T00:00:00${offset}`, timeMax: `${next}T00:00:00${offset}` };
}

type DayPage = { items?: Record<string, unknown>[] };
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const when = (v: unknown): string => {
  const t = (v ?? {}) as { dateTime?: unknown; date?: unknown };
  return str(t.dateTime) || str(t.date);
};

/** The events of one day, in start order (events.list, singleEvents, one page). */
async function dayEvents(
  api: OAuthClient,
  base: string,
  calendarId: string,
  day: { timeMin: string; timeMax: string },
): Promise<CalendarEvent[]> {
  const q = new URLSearchParams({
    timeMin: day.timeMin,
    timeMax: day.timeMax,
    singleEvents: "true",
    orderBy: "startTime",
    maxResults: "250",
  });
  const page = await api.getJson<DayPage>(`${base}/calendars/${encodeURIComponent(calendarId)}/events?${q}`);
  return (page?.items ?? [])
    .filter((e) => e && typeof e === "object")
    .map((e) => {
      const ev: CalendarEvent = {
        id: str(e.id),
        status: str(e.status),
        summary: str(e.summary),
        start: when(e.start),
        end: when(e.end),
        updated: str(e.updated),
        htmlLink: str(e.htmlLink),
      };
      if (typeof e.location === "string") ev.location = e.location;
      return ev;
    });
}

export default defineProcessor<CalendarSettings>({
  async process(batch, ctx) {
    const calendarId = typeof ctx.settings.calendar_id === "string" ? ctx.settings.calendar_id.trim() : "";
    if (calendarId === "") return ctx.failPermanent("calendar_id is empty: primary, or the id of the watched calendar");
    const base = baseOf(ctx.settings.api_base_url);
    if (base === null) return ctx.failPermanent(BASE_URL_RULE);
    const api = ctx.oauth("credential");
    const now = ctx.now();
    const timeMin = new Date((now - DAY_S) * 1000).toISOString();

    const stored = ctx.loadState<SyncState | null>("sync", null);
    const token =
      stored !== null &&
      stored.calendar_id === calendarId &&
      typeof stored.sync_token === "string" &&
      stored.sync_token !== ""
        ? stored.sync_token
        : null;

    let events: CalendarEvent[];
    let nextSyncToken: string;
    if (token === null) {
      const full = await calendarChanges(api, calendarId, null, { base, timeMin });
      if (full.resync) throw new Retryable("calendar full sync answered 410");
      ctx.saveState("sync", {
        calendar_id: calendarId,
        sync_token: full.nextSyncToken,
        synced_at: now,
      } satisfies SyncState);
      ctx.log(
        `batch ${batch.id}: first sync of the calendar, ` +
          `${full.events.length} event(s) recorded as the baseline, none announced`,
      );
      return [];
    }
    const changes = await calendarChanges(api, calendarId, token, { base });
    if (changes.resync) {
      // The token is gone: a full sync, and what was updated since the last good one.
      const full = await calendarChanges(api, calendarId, null, { base, timeMin });
      if (full.resync) throw new Retryable("calendar full sync answered 410");
      const since = (Number.isFinite(stored?.synced_at) ? Number(stored?.synced_at) : now) - RESYNC_MARGIN_S;
      events = full.events.filter((e) => {
        const t = Date.parse(e.updated);
        return !Number.isFinite(t) || t / 1000 >= since;
      });
      nextSyncToken = full.nextSyncToken;
      ctx.log(
        `batch ${batch.id}: the sync token was refused (410 Gone); ` +
          `full resync: ${full.events.length} event(s), ${events.length} updated since the last sync`,
      );
    } else {
      events = changes.events;
      nextSyncToken = changes.nextSyncToken;
    }
    ctx.saveState("sync", { calendar_id: calendarId, sync_token: nextSyncToken, synced_at: now } satisfies SyncState);

    const changed = lastOfEach(events);
    const items = changed.map((e) => itemOf(calendarId, e));
    const travel = ctx.hooks?.travel;
    if (typeof travel === "function" && changed.length > 0) {
      const days = new Map<string, Promise<CalendarEvent[]>>();
      let skipped = 0;
      for (const [i, e] of changed.entries()) {
        const day = dayOf(e.start);
        let list: CalendarEvent[] = [];
        if (day) {
          let p = days.get(day.timeMin);
          if (!p && days.size < MAX_DAYS) {
            p = dayEvents(api, base ?? CALENDAR, calendarId, day);
            days.set(day.timeMin, p);
          }
          if (p) list = await p;
          else skipped++;
        }
        try {
          const answer = await (travel as Travel)(e, list, ctx);
          if (answer !== undefined) (items[i] as Item).travel = answer;
        } catch (err) {
          ctx.log(
            `batch ${batch.id}: the travel hook threw ${(err as Error | null)?.name ?? typeof err}; ` +
              "the item goes without travel",
          );
        }
      }
      if (skipped)
        ctx.log(`batch ${batch.id}: events on more than ${MAX_DAYS} days; ${skipped} event(s) got no dayEvents`);
    }
    ctx.log(`batch ${batch.id}: ${batch.events.length} notification(s), ${items.length} changed event(s)`);
    return items;
  },
});
