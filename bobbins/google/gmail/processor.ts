// google.gmail's processor: a batch of notifications for the owner's mailbox becomes the new
// messages since the last batch, each classified, and the ones a rule (or the deployment's
// hooks) recognises as items. A notification only says "the mailbox changed": the processor asks
// Gmail what changed since the history id it stored, so a dropped or coalesced notification
// loses nothing as long as a later one arrives.
//
// - The first batch ever is a baseline: the mailbox's current history id is recorded (with the
//   ids of its newest messages) and nothing is classified, so an instance does not announce the
//   mail that was there before it.
// - Then history.list from the stored id (messageAdded, every page). When Gmail no longer has
//   that history (a 404, after about a week without a batch) or the backlog is longer than the
//   helper reads, the newest FALLBACK_RECENT messages are classified instead, and the count of
//   what may have been missed is logged.
// - Each new message is read as metadata (From, To, Subject, Date, List-Id, Message-ID; the
//   snippet only when an active rule reads it): never a body. Drafts, spam, trash and the
//   owner's own sent mail are skipped.
// - A message is decided by the hooks module's classify(message, owner, ctx) when the instance
//   names one that exports it, else by the rule packs. Output "scheduling" becomes a scheduling
//   item with the owner's free windows for the next 7 days; any other output an agent-mail
//   item; no match, no item.
// - State "mailboxes": per mailbox, the newest history id and the last SEEN_KEPT message ids
//   (history and the fallback may name a message twice; it is classified once).
import { apiBaseUrl, BASE_URL_RULE } from "../../../src/providers/base-url.ts";
import { type Context, defineProcessor, type Item, type OAuthClient } from "../../../src/plugin/processor.ts";
import { Retryable } from "../../../src/plugin/types.ts";
import {
  freeWindows,
  type GoogleOptions,
  gmailHistory,
  gmailMessage,
  gmailRecent,
  type MessageMeta,
} from "../../../src/providers/google.ts";
import {
  classify,
  type MailMessage,
  needsSnippet,
  parseRulePack,
  type RulePack,
} from "../../../src/providers/mailrules.ts";
import appointments from "./rule-packs/appointments.toml" with { type: "text" };

export interface GmailSettings {
  owner: string;
  api_base_url: string;
  calendar_id: string;
  hooks: string;
  rule_packs: string[];
}

interface MailboxState {
  historyId: string;
  /** The newest message ids already seen, oldest first. */
  seen: string[];
}

/** The rule packs the bobbin ships, by name: the text of rule-packs/<name>.toml. */
export const SHIPPED_PACKS: Readonly<Record<string, string>> = { appointments };

/** Messages listed for the baseline (only their ids are kept: the history id is what counts). */
export const BASELINE_RECENT = 10;
/** Messages classified when the stored history is gone. */
export const FALLBACK_RECENT = 25;
/** New messages read in one batch at most: the newest, when there are more. */
export const MAX_PER_BATCH = 100;
/** Message ids remembered per mailbox. */
export const SEEN_KEPT = 500;
/** messages.get calls a second at most: well under Gmail's per-user quota. */
export const PER_SEC = 10;
/** Free windows: the next 7 days, gaps of at least 30 minutes. */
export const FREE_DAYS = 7;
export const FREE_MIN_MINUTES = 30;
/** Labels of mail that is not news to the owner. */
const SKIPPED_LABELS = ["DRAFT", "SPAM", "TRASH"];
const ADDRESS = /^[^\s@<>",;]+@[^\s@<>",;]+\.[^\s@<>",;]+$/;

/** The API base without a trailing slash; "" for Google's own; null when it breaks core's rule. */
export function baseOf(raw: unknown): string | null {
  const base = apiBaseUrl(raw);
  return base === undefined ? "" : base;
}

/**
 * The named shipped packs, parsed; a name the bobbin does not ship, or a pack with a problem, is the string saying so.
 */
export function packsOf(names: unknown): RulePack[] | string {
  const list = Array.isArray(names) ? names : [];
  const packs: RulePack[] = [];
  for (const n of list) {
    const text = typeof n === "string" && Object.hasOwn(SHIPPED_PACKS, n) ? SHIPPED_PACKS[n] : undefined;
    if (text === undefined)
      return (
        "rule_packs names a pack google.gmail does not ship " +
        `(it ships ${Object.keys(SHIPPED_PACKS).join(", ")}); put rules of your own in a hooks module`
      );
    const { pack } = parseRulePack(n as string, text);
    if (!pack) return `the shipped rule pack ${n} does not parse`;
    packs.push(pack);
  }
  return packs;
}

/** What a message is: an output and the values pulled out of it, and the rule that said so. */
export interface Verdict {
  output: string;
  rule: string;
  values: Record<string, string>;
}

/** The message as the mail rules see it: header fields, and the snippet when it was asked for. */
export function mailMessageOf(m: MessageMeta): MailMessage {
  const headers: Record<string, string> = {};
  if (m.to) headers.to = m.to;
  if (m.date) headers.date = m.date;
  if (m.messageId) headers["message-id"] = m.messageId;
  return {
    from: m.from,
    subject: m.subject,
    ...(m.listId ? { listId: m.listId } : {}),
    headers,
    ...(m.snippet !== undefined ? { snippet: m.snippet } : {}),
  };
}

type HookClassify = (message: MessageMeta, owner: string, ctx: Context<GmailSettings>) => unknown;

/** A hooks module's answer as a verdict: null for no match; a string says what is wrong with it. */
export function hookVerdict(answer: unknown): Verdict | null | string {
  if (answer === null || answer === undefined) return null;
  const a = answer as { output?: unknown; values?: unknown; rule?: unknown };
  if (typeof a !== "object" || Array.isArray(a) || typeof a.output !== "string" || a.output === "")
    return "the hooks module's classify returned neither null nor { output, values }";
  const values: Record<string, string> = {};
  if (a.values !== undefined && a.values !== null) {
    if (typeof a.values !== "object" || Array.isArray(a.values))
      return "the hooks module's classify returned values that are not a table";
    for (const [k, v] of Object.entries(a.values as Record<string, unknown>))
      if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") values[k] = String(v);
  }
  return { output: a.output, rule: typeof a.rule === "string" && a.rule !== "" ? a.rule : "hooks", values };
}

/** Whether a message is news to the owner: not a draft, spam or trash, nor their own sent mail. */
export function isIncoming(labelIds: readonly string[]): boolean {
  if (labelIds.some((l) => SKIPPED_LABELS.includes(l))) return false;
  return !(labelIds.includes("SENT") && !labelIds.includes("INBOX"));
}

const unique = (ids: readonly string[]) => [...new Set(ids)];

export default defineProcessor<GmailSettings>({
  async process(batch, ctx) {
    const s = ctx.settings;
    const owner = typeof s.owner === "string" ? s.owner.trim().toLowerCase() : "";
    if (!ADDRESS.test(owner)) return ctx.failPermanent("owner is not a mailbox address");
    const base = baseOf(s.api_base_url);
    if (base === null) return ctx.failPermanent(BASE_URL_RULE);
    const hookFn = typeof ctx.hooks?.classify === "function" ? (ctx.hooks.classify as HookClassify) : null;
    const packs = packsOf(s.rule_packs);
    if (typeof packs === "string") return ctx.failPermanent(packs);
    // A topic may carry the notifications of several watched mailboxes; this instance reads one.
    if (batch.key.toLowerCase() !== owner) {
      ctx.log(`batch ${batch.id}: ${batch.events.length} notification(s) for another mailbox, skipped`);
      return [];
    }

    const api = ctx.oauth("credential");
    const google: GoogleOptions = base ? { base } : {};
    const states = ctx.loadState<Record<string, MailboxState>>("mailboxes", {});
    const mine = states[owner];
    const save = (historyId: string, seen: readonly string[]) =>
      ctx.saveState("mailboxes", { ...states, [owner]: { historyId, seen: unique(seen).slice(-SEEN_KEPT) } });

    if (!mine?.historyId) {
      const recent = await gmailRecent(api, owner, BASELINE_RECENT, google);
      save(recent.historyId, [...recent.messageIds].reverse());
      ctx.log(`batch ${batch.id}: baseline recorded; mail from now on is classified`);
      return [];
    }

    const found = await newSince(api, owner, mine.historyId, google, ctx);
    const before = Array.isArray(mine.seen) ? mine.seen : [];
    const seen = new Set(before);
    const fresh = found.ids.filter((id) => !seen.has(id));
    const todo = fresh.slice(-MAX_PER_BATCH);
    if (fresh.length > todo.length)
      ctx.log(`batch ${batch.id}: ${fresh.length} new messages, only the newest ${todo.length} read`);

    const snippet = needsSnippet(packs);
    const pace = ctx.pace(PER_SEC);
    const items: Item[] = [];
    let free: Promise<{ window: { start: string; end: string }; free: { start: string; end: string }[] }> | null = null;
    const freeTime = () => {
      free ??= (async () => {
        // One reading of the clock: the window is exactly FREE_DAYS long.
        const now = ctx.now();
        const start = new Date(now * 1000).toISOString();
        const end = new Date((now + FREE_DAYS * 86_400) * 1000).toISOString();
        const r = await freeWindows(api, s.calendar_id || "primary", start, end, FREE_MIN_MINUTES, google);
        return { window: { start, end }, free: r.free };
      })();
      return free;
    };
    let skipped = 0;
    for (const id of todo) {
      await pace.wait();
      const m = await gmailMessage(api, owner, id, { ...google, snippet });
      if (!m || !isIncoming(m.labelIds)) {
        skipped++;
        continue;
      }
      const verdict = hookFn ? hookVerdict(await hookFn(m, owner, ctx)) : fromRules(m, packs);
      if (typeof verdict === "string") return ctx.failPermanent(verdict);
      if (!verdict) continue;
      const fields = {
        key: owner,
        id: m.id,
        threadId: m.threadId,
        from: m.from,
        subject: m.subject,
        date: m.date,
        labelIds: m.labelIds,
        rule: verdict.rule,
        values: verdict.values,
      };
      if (verdict.output === "scheduling") items.push({ event_type: "scheduling", ...fields, ...(await freeTime()) });
      else items.push({ event_type: "agent-mail", ...fields });
    }
    save(found.historyId, [...before, ...fresh]);
    ctx.log(
      `batch ${batch.id}: ${found.ids.length} message(s) ` +
        `added${found.fallback ? " (history gone: the newest read instead)" : ""}, ${todo.length} read, ` +
        `${skipped} skipped (gone, draft, spam, trash or sent), ${items.length} item(s)`,
    );
    return items;
  },
});

function fromRules(m: MessageMeta, packs: readonly RulePack[]): Verdict | null {
  const hit = classify(mailMessageOf(m), packs);
  return hit ? { output: hit.output, rule: `${hit.pack}/${hit.rule}`, values: hit.values } : null;
}

/** The ids of the messages added since `historyId`, oldest first, and the history id to store next. */
async function newSince(
  api: OAuthClient,
  owner: string,
  historyId: string,
  o: GoogleOptions,
  ctx: Context<GmailSettings>,
): Promise<{ ids: string[]; historyId: string; fallback: boolean }> {
  let tooLong = false;
  try {
    const h = await gmailHistory(api, owner, historyId, o);
    if (!h.tooOld) return { ids: h.messageIds, historyId: h.historyId, fallback: false };
  } catch (e) {
    // A backlog longer than the helper reads is no cursor to resume from: start over from now.
    if (!(e instanceof Retryable && /more than \d+ pages/.test(e.message))) throw e;
    tooLong = true;
  }
  const recent = await gmailRecent(api, owner, FALLBACK_RECENT, o);
  ctx.log(
    tooLong
      ? "the history since the stored id is longer than one batch reads: classifying the newest messages instead"
      : "the stored history id is too old for Gmail: classifying the newest messages instead",
  );
  // messages.list answers newest first.
  return { ids: [...recent.messageIds].reverse(), historyId: recent.historyId, fallback: true };
}
