// What bobbins of several services share, written once: feeds, mail rules (and, for Google's
// services, their API helpers). A private bobbin imports it as "hookspool/providers".
export { type Feed, type FeedEntry, FeedError, type FeedLimits, parseFeed } from "./feeds.ts";
export {
  addressOf,
  classify,
  type MailMessage,
  type MailRule,
  needsSnippet,
  parseRulePack,
  type RulePack,
} from "./mailrules.ts";
export { type ChannelOptions, googleChannelSource } from "./google-channel.ts";
export {
  CALENDAR,
  type CalendarEvent,
  calendarChanges,
  DRIVE,
  type DriveChange,
  driveChanges,
  driveStartToken,
  freeWindows,
  GMAIL,
  type GoogleOptions,
  gmailHistory,
  gmailMessage,
  gmailRecent,
  type MessageMeta,
} from "./google.ts";
export { apiBaseUrl, BASE_URL_RULE } from "./base-url.ts";
