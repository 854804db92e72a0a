// Google's Gmail, Calendar and Drive APIs as the Google bobbins' processors read them: what changed
// since a stored cursor (a history id, a sync token, a page token), every page of it, message
// headers without bodies, and free/busy time, all through the context's OAuth client (it adds the
// Bearer token and refreshes it on a 401). A cursor Google no longer honours is an answer
// ({ tooOld } or { resync }) so the caller can start again; every other failure is a Retryable or
// a Permanent whose message names the host at most: never a path, a query, a token or a body.
import { systemClock } from "../clock.ts";
import { hostOf, jsonOf } from "../net/http.ts";
import type { OAuthClient } from "../plugin/processor.ts";
import { Permanent, Retryable } from "../plugin/types.ts";

export const GMAIL = "https://gmail.googleapis.com/gmail/v1";
export const CALENDAR = "https://www.googleapis.com/calendar/v3";
export const DRIVE = "https://www.googleapis.com/drive/v3";

/** Every helper takes an optional base URL so tests (and the kit) can point it at a stub. */
export interface GoogleOptions {
  base?: string;
  /** Pages read at most by one call (default 20). */
  pageLimit?: number;
}

export const DEFAULT_PAGE_LIMIT = 20;
/** The headers gmailMessage asks for: enough to classify a message, nothing of its body. */
export const MESSAGE_HEADERS = ["From", "To", "Subject", "Date", "List-Id", "Message-ID"] as const;

type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

/** base + the path segments, each percent-encoded ("me", an address, a calendar id with @ and #), + the query. */
function url(base: string, segments: readonly string[], query: Query = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  const path = segments.map(encodeURIComponent).join("/");
  const search = q.toString();
  return `${base.replace(/\/+$/, "")}/${path}${search ? `?${search}` : ""}`;
}

/**
 * One call: the parsed JSON of a 2xx, null for a status in `expected` (the caller's "cursor too
 * old", "deleted since"), else the status rule of src/net/http.ts (429 and 5xx Retryable with the
 * answer's Retry-After, other 4xx Permanent with the status), whose message names only the host.
 */
async function call<T>(
  api: OAuthClient,
  method: string,
  u: string,
  o: { body?: unknown; expected?: readonly number[] } = {},
): Promise<T | null> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (o.body !== undefined) headers["content-type"] = "application/json";
  const res = await api.request(method, u, {
    headers,
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
  });
  if (o.expected?.includes(res.status)) return null;
  const json = jsonOf<unknown>(method, u, res);
  if (json === null || typeof json !== "object" || Array.isArray(json))
    throw new Permanent(`${method} ${hostOf(u)}: answer is not a JSON object`);
  return json as T;
}

function pageLimitOf(o: GoogleOptions | undefined): number {
  const n = o?.pageLimit ?? DEFAULT_PAGE_LIMIT;
  return Number.isInteger(n) && n >= 1 ? n : DEFAULT_PAGE_LIMIT;
}

/**
 * A backlog longer than pageLimit pages. A page token of history.list or events.list is no
 * cursor to store (the next call must start from the history id or sync token again), so there
 * is no partial answer to give. Retryable, not Permanent, so that pages Google cut short for a
 * while do not end the batch; a backlog that really is longer fails every try until pageLimit is
 * raised (the Gmail caller may instead start over with gmailRecent).
 */
function tooManyPages(what: string, limit: number): Retryable {
  return new Retryable(`${what}: more than ${limit} pages`);
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

// ---------------------------------------------------------------------------------------------
// Gmail

type HistoryPage = {
  history?: { messagesAdded?: { message?: { id?: string } }[] }[];
  nextPageToken?: string;
  historyId?: string;
};

// https://developers.google.com/workspace/gmail/api/reference/rest/v1/users.history/list
// https://developers.google.com/workspace/gmail/api/guides/sync (a startHistoryId out of the
// available history answers 404, and the client must then do a full sync)
/**
 * Gmail: the ids of messages added since `startHistoryId` (history.list, historyTypes=messageAdded, every page) and the
 * mailbox's newest historyId; a 404 (the id is too old) gives { tooOld: true }.
 */
export async function gmailHistory(
  api: OAuthClient,
  user: string,
  startHistoryId: string,
  o?: GoogleOptions,
): Promise<{ tooOld: false; messageIds: string[]; historyId: string } | { tooOld: true }> {
  const limit = pageLimitOf(o);
  const ids = new Set<string>();
  let historyId = startHistoryId;
  let pageToken: string | undefined;
  for (let page = 0; ; page++) {
    if (page === limit) throw tooManyPages("gmail history", limit);
    const u = url(o?.base ?? GMAIL, ["users", user, "history"], {
      startHistoryId,
      historyTypes: "messageAdded",
      maxResults: 500,
      pageToken,
    });
    const answer = await call<HistoryPage>(api, "GET", u, { expected: [404] });
    if (answer === null) return { tooOld: true };
    for (const record of answer.history ?? []) {
      for (const added of record.messagesAdded ?? []) if (added.message?.id) ids.add(added.message.id);
    }
    // The answer's historyId is the mailbox's current one: the next call starts there.
    if (answer.historyId) historyId = answer.historyId;
    pageToken = answer.nextPageToken || undefined;
    if (!pageToken) return { tooOld: false, messageIds: [...ids], historyId };
  }
}

// https://developers.google.com/workspace/gmail/api/reference/rest/v1/users.messages/list
// https://developers.google.com/workspace/gmail/api/reference/rest/v1/users/getProfile
// https://developers.google.com/workspace/gmail/api/guides/sync (full synchronization)
/**
 * Gmail fallback: the ids of the newest `max` (1 to 100) messages (messages.list, one page) and the mailbox's current
 * historyId (getProfile).
 */
export async function gmailRecent(
  api: OAuthClient,
  user: string,
  max: number,
  o?: GoogleOptions,
): Promise<{ messageIds: string[]; historyId: string }> {
  const base = o?.base ?? GMAIL;
  const n = Math.min(100, Math.max(1, Math.floor(Number.isFinite(max) ? max : 100)));
  // The profile first: a message that arrives between the two calls is then listed here and seen
  // again by the next history call (a duplicate the caller drops), rather than missed by both.
  const profile = await call<{ historyId?: string }>(api, "GET", url(base, ["users", user, "profile"]));
  const historyId = str(profile?.historyId);
  if (!historyId) throw new Permanent("gmail profile answer has no historyId");
  const list = await call<{ messages?: { id?: string }[] }>(
    api,
    "GET",
    url(base, ["users", user, "messages"], { maxResults: n }),
  );
  const messageIds = (list?.messages ?? []).map((m) => str(m.id)).filter((id) => id !== "");
  return { messageIds, historyId };
}

/** Gmail: a message's headers only, plus its snippet only when asked. Never the body. */
export interface MessageMeta {
  id: string;
  threadId: string;
  labelIds: string[];
  from: string;
  to: string;
  subject: string;
  date: string;
  listId: string;
  messageId: string;
  snippet?: string;
  internalDate: string;
}

type MessageAnswer = Partial<Record<"id" | "threadId" | "snippet" | "internalDate", string>> & {
  labelIds?: string[];
  payload?: { headers?: { name?: string; value?: string }[] };
};

// https://developers.google.com/workspace/gmail/api/reference/rest/v1/users.messages/get
/** Gmail: messages.get format=metadata with the MESSAGE_HEADERS only; null when it answers 404 (deleted since). */
export async function gmailMessage(
  api: OAuthClient,
  user: string,
  id: string,
  o?: GoogleOptions & { snippet?: boolean },
): Promise<MessageMeta | null> {
  // The fields mask keeps the snippet (a piece of the body) off the wire unless it is asked for.
  const fields = `id,threadId,labelIds,internalDate,payload/headers${o?.snippet ? ",snippet" : ""}`;
  const u = url(o?.base ?? GMAIL, ["users", user, "messages", id], {
    format: "metadata",
    metadataHeaders: MESSAGE_HEADERS,
    fields,
  });
  const m = await call<MessageAnswer>(api, "GET", u, { expected: [404] });
  if (m === null) return null;
  const header = (name: string): string => {
    const h = (m.payload?.headers ?? []).find((x) => str(x.name).toLowerCase() === name.toLowerCase());
    return str(h?.value);
  };
  const meta: MessageMeta = {
    id: str(m.id) || id,
    threadId: str(m.threadId),
    labelIds: Array.isArray(m.labelIds) ? m.labelIds.filter((l) => typeof l === "string") : [],
    from: header("From"),
    to: header("To"),
    subject: header("Subject"),
    date: header("Date"),
    listId: header("List-Id"),
    messageId: header("Message-ID"),
    internalDate: str(m.internalDate),
  };
  if (o?.snippet) meta.snippet = str(m.snippet);
  return meta;
}

// ---------------------------------------------------------------------------------------------
// Calendar

export interface CalendarEvent {
  id: string;
  /** "confirmed", "tentative" or "cancelled" (a deleted event: often nothing but id and status). */
  status: string;
  summary: string;
  /** start.dateTime, or start.date for an all-day event; "" when absent. */
  start: string;
  end: string;
  updated: string;
  htmlLink: string;
  location?: string;
}

type EventsPage = { items?: Record<string, unknown>[]; nextPageToken?: string; nextSyncToken?: string };

const DAY_S = 86_400;

function eventOf(e: Record<string, unknown>): CalendarEvent {
  const when = (v: unknown) => {
    const t = (v ?? {}) as { dateTime?: unknown; date?: unknown };
    return str(t.dateTime) || str(t.date);
  };
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
}

// https://developers.google.com/calendar/api/v3/reference/events/list
// https://developers.google.com/calendar/api/guides/sync (nextSyncToken only on the last
// page; a 410 Gone means the token is invalid and the client must wipe its store and sync in full)
/**
 * Calendar: events changed since `syncToken` (events.list, every page, deleted ones included), or
 * a full sync from `timeMin` (default: a day ago) when syncToken is null; a 410 Gone gives
 * { resync: true }. A processor passes timeMin from ctx.now() so its tests drive the clock.
 */
export async function calendarChanges(
  api: OAuthClient,
  calendarId: string,
  syncToken: string | null,
  o?: GoogleOptions & { timeMin?: string },
): Promise<{ resync: false; events: CalendarEvent[]; nextSyncToken: string } | { resync: true }> {
  const limit = pageLimitOf(o);
  // A sync token refuses timeMin (and the other filters); showDeleted is sent on both so the
  // incremental request asks what the full one asked, as the sync guide requires.
  const filter: Query =
    syncToken !== null
      ? { syncToken }
      : { timeMin: o?.timeMin ?? new Date((systemClock.now() - DAY_S) * 1000).toISOString() };
  const events: CalendarEvent[] = [];
  let pageToken: string | undefined;
  for (let page = 0; ; page++) {
    if (page === limit) throw tooManyPages("calendar events", limit);
    const u = url(o?.base ?? CALENDAR, ["calendars", calendarId, "events"], {
      ...filter,
      showDeleted: true,
      maxResults: 2500,
      pageToken,
    });
    const answer = await call<EventsPage>(api, "GET", u, { expected: [410] });
    if (answer === null) return { resync: true };
    for (const item of answer.items ?? []) if (item && typeof item === "object") events.push(eventOf(item));
    pageToken = answer.nextPageToken || undefined;
    if (pageToken) continue;
    if (!answer.nextSyncToken) throw new Permanent("calendar answer has no nextSyncToken");
    return { resync: false, events, nextSyncToken: answer.nextSyncToken };
  }
}

type Interval = { start: string; end: string };
type FreeBusyAnswer = { calendars?: Record<string, { busy?: Interval[]; errors?: { reason?: string }[] }> };

/** Reasons a calendar's free/busy may come back with on another try. */
const TRANSIENT_REASONS = new Set(["backendError", "internalError"]);

// https://developers.google.com/calendar/api/v3/reference/freebusy/query
/**
 * Calendar free/busy for one calendar between two RFC 3339 times (freeBusy.query): the busy intervals, and the free
 * windows between them of at least `minMinutes`.
 */
export async function freeWindows(
  api: OAuthClient,
  calendarId: string,
  timeMin: string,
  timeMax: string,
  minMinutes: number,
  o?: GoogleOptions,
): Promise<{ busy: Interval[]; free: Interval[] }> {
  const from = Date.parse(timeMin);
  const to = Date.parse(timeMax);
  if (!Number.isFinite(from) || !Number.isFinite(to) || from >= to)
    throw new Permanent("free/busy: timeMin must be an RFC 3339 time before timeMax");
  const u = url(o?.base ?? CALENDAR, ["freeBusy"]);
  const answer = await call<FreeBusyAnswer>(api, "POST", u, {
    body: { timeMin, timeMax, items: [{ id: calendarId }] },
  });
  const cal = answer?.calendars?.[calendarId];
  if (!cal) throw new Permanent("free/busy answer has no entry for the calendar");
  // Errors sit in the 200 answer, per calendar (an unknown or unshared calendar: notFound).
  const reasons = (cal.errors ?? []).map((e) => str(e.reason));
  if (reasons.length > 0) {
    if (reasons.every((r) => TRANSIENT_REASONS.has(r)))
      throw new Retryable("free/busy: calendar temporarily unavailable");
    throw new Permanent("free/busy: calendar not available");
  }
  const busy = (cal.busy ?? []).filter(
    (b) => Number.isFinite(Date.parse(str(b.start))) && Number.isFinite(Date.parse(str(b.end))),
  );
  busy.sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
  return { busy, free: gaps(busy, timeMin, timeMax, Math.max(0, minMinutes) * 60_000) };
}

/**
 * The gaps of at least minMs between sorted (possibly overlapping) busy intervals inside [timeMin, timeMax], in the
 * strings Google gave.
 */
function gaps(busy: readonly Interval[], timeMin: string, timeMax: string, minMs: number): Interval[] {
  const free: Interval[] = [];
  const max = Date.parse(timeMax);
  let cursor = { at: Date.parse(timeMin), s: timeMin };
  for (const b of busy) {
    const s = Date.parse(b.start);
    const e = Date.parse(b.end);
    if (s >= max) break;
    if (s > cursor.at && s - cursor.at >= minMs) free.push({ start: cursor.s, end: b.start });
    if (e > cursor.at) cursor = { at: e, s: b.end };
  }
  if (max > cursor.at && max - cursor.at >= minMs) free.push({ start: cursor.s, end: timeMax });
  return free;
}

// ---------------------------------------------------------------------------------------------
// Drive

export interface DriveChange {
  fileId: string;
  /** Gone from the user's view (deleted for good, or access lost): no other field then. */
  removed: boolean;
  name?: string;
  mimeType?: string;
  modifiedTime?: string;
  trashed?: boolean;
  webViewLink?: string;
}

// https://developers.google.com/workspace/drive/api/reference/rest/v3/changes/getStartPageToken
/** Drive: the page token from which changes.list reports what changes from now on. */
export async function driveStartToken(api: OAuthClient, o?: GoogleOptions): Promise<string> {
  const answer = await call<{ startPageToken?: string }>(
    api,
    "GET",
    url(o?.base ?? DRIVE, ["changes", "startPageToken"]),
  );
  const token = str(answer?.startPageToken);
  if (!token) throw new Permanent("drive answer has no startPageToken");
  return token;
}

type ChangesPage = {
  changes?: { changeType?: string; fileId?: string; removed?: boolean; file?: Record<string, unknown> }[];
  nextPageToken?: string;
  newStartPageToken?: string;
};

/** The fields mask: file metadata only, never contents, permissions or owners. */
export const DRIVE_CHANGE_FIELDS =
  "nextPageToken,newStartPageToken," +
  "changes(changeType,fileId,removed,file(name,mimeType,modifiedTime,trashed,webViewLink))";

// https://developers.google.com/workspace/drive/api/reference/rest/v3/changes/list
// https://developers.google.com/workspace/drive/api/guides/manage-changes (follow nextPageToken
// until an answer carries newStartPageToken, the token for the next round)
// https://developers.google.com/workspace/drive/api/guides/fields-parameter
/**
 * Drive: the file changes since `pageToken` (changes.list, every page, removals included) and the
 * token to ask from next time. Unlike history ids and sync tokens, a Drive nextPageToken is itself
 * a pageToken for a later call: past pageLimit pages the call returns what it read with that
 * token as newStartPageToken, so a large backlog is worked through over successive calls.
 */
export async function driveChanges(
  api: OAuthClient,
  pageToken: string,
  o?: GoogleOptions,
): Promise<{ changes: DriveChange[]; newStartPageToken: string }> {
  const limit = pageLimitOf(o);
  const changes: DriveChange[] = [];
  let token = pageToken;
  for (let page = 0; page < limit; page++) {
    const u = url(o?.base ?? DRIVE, ["changes"], {
      pageToken: token,
      pageSize: 1000,
      includeRemoved: true,
      fields: DRIVE_CHANGE_FIELDS,
    });
    const answer = await call<ChangesPage>(api, "GET", u);
    for (const c of answer?.changes ?? []) {
      // A shared drive's own change (changeType "drive") names no file.
      if (!c.fileId || (c.changeType !== undefined && c.changeType !== "file")) continue;
      changes.push(driveChangeOf(c.fileId, c.removed === true, c.file));
    }
    if (answer?.newStartPageToken) return { changes, newStartPageToken: answer.newStartPageToken };
    if (!answer?.nextPageToken) throw new Permanent("drive answer has neither nextPageToken nor newStartPageToken");
    token = answer.nextPageToken;
  }
  return { changes, newStartPageToken: token };
}

function driveChangeOf(fileId: string, removed: boolean, file: Record<string, unknown> | undefined): DriveChange {
  const c: DriveChange = { fileId, removed };
  if (removed || !file) return c;
  for (const k of ["name", "mimeType", "modifiedTime", "webViewLink"] as const)
    if (typeof file[k] === "string") c[k] = file[k];
  if (typeof file.trashed === "boolean") c.trashed = file.trashed;
  return c;
}
