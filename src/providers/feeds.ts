// Atom and RSS feeds: the one way a bobbin reads a feed it polls. A feed comes from a server we do
// not control, so the text is screened before any XML parser sees it: a DOCTYPE or entity
// declaration is refused outright (that is how entity-expansion bombs and external entities get
// in, and no real feed needs one), and size, nesting depth and entry count are capped.
import { XMLParser } from "fast-xml-parser";

export interface FeedEntry {
  id: string; // Atom <id>, RSS <guid>, else the link, else ""
  title: string;
  link: string; // Atom <link rel="alternate" href> (or the first link with href), RSS <link>
  updated: string; // Atom <updated> (or <published>), RSS <pubDate>, as written ("" when absent)
  summary: string; // Atom <summary> or <content> text, RSS <description>; cut to 2,000 characters
  categories: string[]; // Atom <category term>, RSS <category> text
}

export interface Feed {
  kind: "atom" | "rss";
  title: string;
  updated: string;
  entries: FeedEntry[];
}

/** A feed refused; the message is one of a few fixed reasons and never quotes the document. */
export class FeedError extends Error {
  override name = "FeedError";
}

export interface FeedLimits {
  maxBytes?: number; // UTF-8 bytes of the whole text; default 5 MiB
  maxDepth?: number; // element nesting; default 32
  maxEntries?: number; // entries kept, the rest dropped; default 1000
}

const DEFAULTS = { maxBytes: 5 * 1024 * 1024, maxDepth: 32, maxEntries: 1000 };
const SUMMARY_MAX = 2000;

const TOO_LARGE = "feed too large";
const DECLARATIONS = "a feed with a DOCTYPE or entity declarations is refused";
const TOO_DEEP = "feed nested too deep";
const NOT_A_FEED = "not an Atom or RSS feed";

/** One element as the parser gives it in document order: `{ name: children, ":@": attributes }`. */
type XmlNode = Record<string, unknown>;

/** Parse an Atom or RSS 2.0 feed, or throw a FeedError saying why it is refused. */
export function parseFeed(text: string, limits: FeedLimits = {}): Feed {
  // `??` rather than a spread, so a limit passed as undefined falls back to its default.
  const maxBytes = limits.maxBytes ?? DEFAULTS.maxBytes;
  const maxDepth = limits.maxDepth ?? DEFAULTS.maxDepth;
  const maxEntries = limits.maxEntries ?? DEFAULTS.maxEntries;
  // A UTF-8 encoding is never shorter than the UTF-16 length, so a long string is refused uncounted.
  if (text.length > maxBytes || Buffer.byteLength(text, "utf8") > maxBytes) throw new FeedError(TOO_LARGE);
  if (/<!(?:DOCTYPE|ENTITY)/i.test(text)) throw new FeedError(DECLARATIONS);
  if (nestsDeeperThan(text, maxDepth)) throw new FeedError(TOO_DEEP);

  // A byte order mark or whitespace around the root comes back as text; only elements count.
  const roots = parseXml(text, maxDepth).filter((n) => nameOf(n) !== "#text");
  const root = roots.length === 1 ? roots[0] : undefined;
  if (root && nameOf(root) === "feed") return atomFeed(root, maxEntries);
  const channel = root && nameOf(root) === "rss" ? first(root, "channel") : undefined;
  if (channel) return rssFeed(channel, maxEntries);
  throw new FeedError(NOT_A_FEED);
}

function parseXml(text: string, maxDepth: number): XmlNode[] {
  const parser = new XMLParser({
    preserveOrder: true, // children as ordered lists: one entry or many look alike, mixed text keeps its order
    processEntities: false, // expand nothing; decodeXml handles the predefined and numeric references
    htmlEntities: false,
    ignoreAttributes: false, // href, rel and term live in attributes
    attributeNamePrefix: "@_",
    parseTagValue: false, // text stays as written: an id "0000320193" keeps its zeros
    parseAttributeValue: false,
    trimValues: false, // keep the spaces between the pieces of mixed content; text() trims the whole
    cdataPropName: "#cdata", // CDATA kept apart, so an "&amp;" inside it is not decoded
    ignoreDeclaration: true,
    ignorePiTags: true,
    maxNestedTags: maxDepth, // the pre-scan already holds this; a second guard inside the parser
  });
  try {
    // `true` runs the well-formedness check first: the parser alone accepts e.g. an unclosed tag.
    const doc: unknown = parser.parse(text, true);
    if (Array.isArray(doc)) return doc.filter(isNode);
  } catch {
    // The parser's message quotes the document, so it is not passed on.
  }
  throw new FeedError(NOT_A_FEED);
}

/**
 * Whether elements nest deeper than `max`, from a scan of the tags alone. Comments, CDATA and
 * processing instructions are skipped; anything unterminated is left for the parser to refuse.
 */
function nestsDeeperThan(text: string, max: number): boolean {
  const after = (token: string, from: number) => {
    const at = text.indexOf(token, from);
    return at === -1 ? -1 : at + token.length;
  };
  let depth = 0;
  let i = text.indexOf("<");
  while (i !== -1) {
    let next: number;
    if (text.startsWith("<!--", i)) next = after("-->", i + 4);
    else if (text.startsWith("<![CDATA[", i)) next = after("]]>", i + 9);
    else if (text.startsWith("<?", i) || text.startsWith("<!", i)) next = after(">", i + 2);
    else if (text.startsWith("</", i)) {
      depth--;
      next = after(">", i + 2);
    } else {
      next = tagEnd(text, i + 1);
      if (next !== -1 && text[next - 2] !== "/" && ++depth > max) return true;
    }
    if (next === -1) return false;
    i = text.indexOf("<", next);
  }
  return false;
}

/** The index just past the `>` closing a start tag, skipping quoted attribute values; -1 if none. */
function tagEnd(text: string, from: number): number {
  let quote = "";
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = "";
    } else if (c === '"' || c === "'") quote = c;
    else if (c === ">") return i + 1;
  }
  return -1;
}

function atomFeed(feed: XmlNode, maxEntries: number): Feed {
  const entries = all(feed, "entry").slice(0, maxEntries).map(atomEntry);
  return { kind: "atom", title: textOf(feed, "title"), updated: textOf(feed, "updated"), entries };
}

function atomEntry(entry: XmlNode): FeedEntry {
  const links = all(entry, "link").filter((l) => attr(l, "href"));
  // A link with no rel is an alternate one.
  const alternate = links.find((l) => (attr(l, "rel") || "alternate") === "alternate");
  const link = attr(alternate ?? links[0], "href");
  return {
    id: textOf(entry, "id") || link,
    title: textOf(entry, "title"),
    link,
    updated: textOf(entry, "updated") || textOf(entry, "published"),
    summary: cut(textOf(entry, "summary") || textOf(entry, "content")),
    categories: all(entry, "category")
      .map((c) => attr(c, "term"))
      .filter(Boolean),
  };
}

function rssFeed(channel: XmlNode, maxEntries: number): Feed {
  const entries = all(channel, "item").slice(0, maxEntries).map(rssEntry);
  const updated = textOf(channel, "lastBuildDate") || textOf(channel, "pubDate");
  return { kind: "rss", title: textOf(channel, "title"), updated, entries };
}

function rssEntry(item: XmlNode): FeedEntry {
  const link = textOf(item, "link");
  return {
    id: textOf(item, "guid") || link,
    title: textOf(item, "title"),
    link,
    updated: textOf(item, "pubDate"),
    summary: cut(textOf(item, "description")),
    categories: all(item, "category").map(text).filter(Boolean),
  };
}

function isNode(v: unknown): v is XmlNode {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** An element's name: its one key besides the attributes. */
function nameOf(node: XmlNode): string | undefined {
  return Object.keys(node).find((k) => k !== ":@");
}

function children(node: XmlNode): XmlNode[] {
  const name = nameOf(node);
  const kids = name === undefined ? undefined : node[name];
  return Array.isArray(kids) ? kids.filter(isNode) : [];
}

/** The child elements called `name`, in document order. */
function all(node: XmlNode, name: string): XmlNode[] {
  return children(node).filter((c) => nameOf(c) === name);
}

function first(node: XmlNode, name: string): XmlNode | undefined {
  return children(node).find((c) => nameOf(c) === name);
}

/** The text of the first child called `name`, or "" when there is none. */
function textOf(node: XmlNode, name: string): string {
  const c = first(node, name);
  return c ? text(c) : "";
}

/** An element's decoded text, trimmed, with any nested markup (an XHTML summary) flattened to its text. */
function text(node: XmlNode): string {
  return innerText(node).trim();
}

function innerText(node: XmlNode): string {
  const name = nameOf(node);
  if (name === "#text") return typeof node[name] === "string" ? decodeXml(node[name]) : "";
  if (name === "#cdata")
    return children(node)
      .map((t) => (typeof t["#text"] === "string" ? t["#text"] : ""))
      .join("");
  return children(node).map(innerText).join("");
}

function attr(node: XmlNode | undefined, name: string): string {
  const attrs = node?.[":@"];
  const v = isNode(attrs) ? attrs[`@_${name}`] : undefined;
  return typeof v === "string" ? decodeXml(v).trim() : "";
}

const PREDEFINED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Decode the five predefined entities and numeric references in one pass; anything else stays as written. */
function decodeXml(s: string): string {
  if (!s.includes("&")) return s;
  return s.replace(/&(?:#x([0-9a-fA-F]{1,6})|#([0-9]{1,7})|(amp|lt|gt|quot|apos));/g, (whole, hex, dec, name) => {
    if (name) return PREDEFINED[name];
    const cp = hex ? parseInt(hex, 16) : Number(dec);
    return isXmlChar(cp) ? String.fromCodePoint(cp) : whole;
  });
}

/** A code point XML allows in a document: no NUL or other C0 controls but tab and newlines, no surrogates. */
function isXmlChar(cp: number): boolean {
  if (cp < 0x20) return cp === 0x9 || cp === 0xa || cp === 0xd;
  return cp < 0xd800 || (cp > 0xdfff && cp < 0xfffe) || (cp > 0xffff && cp <= 0x10ffff);
}

/** At most SUMMARY_MAX characters, never splitting a surrogate pair. */
function cut(s: string): string {
  if (s.length <= SUMMARY_MAX) return s;
  const end = /[\ud800-\udbff]/.test(s[SUMMARY_MAX - 1]) ? SUMMARY_MAX - 1 : SUMMARY_MAX;
  return s.slice(0, end).trimEnd();
}
