// What the catalogue says of each bobbin at a glance: how a request is verified, which handshake
// it answers, and whether the sender retries. `bobbin list --markdown` (docs/bobbins/README.md)
// and `bobbin list --search` read it from the manifest; a code source's details are its README's.
import type { Bobbin } from "./registry.ts";

export interface CatalogueFacts {
  /** The template's scheme, "any scheme" (hookspool.webhook), "code", or "poll". */
  scheme: string;
  /** The handshake answered, or "-". */
  handshake: string;
  /** "yes", "no", or "-" when the manifest does not say. */
  retries: string;
}

export function catalogueFacts(b: Bobbin): CatalogueFacts {
  const m = b.manifest;
  const retries = (v: unknown) => (v === true ? "yes" : v === false ? "no" : "-");
  if (m.poll) return { scheme: "poll", handshake: "-", retries: "-" };
  const t = m.source?.template;
  if (t === "settings") return { scheme: "any scheme", handshake: "per settings", retries: "per settings" };
  if (!t) return { scheme: "code", handshake: "see README", retries: retries(m.source?.sender_retries) };
  const handshakes = [
    t.head_handshake === true ? "HEAD 200" : null,
    typeof t.echo_when === "string" ? `echoes ${String(t.echo_field)} (${t.echo_when})` : null,
    t.get_verify === true ? "GET verify token" : null,
    typeof t.reply_when === "string" ? `replies to ${t.reply_when}` : null,
    typeof t.learn === "string"
      ? `learns the secret from ${t.learn.replace(/^header:/, "header ").replace(/^field:/, "field ")} (armed)`
      : null,
  ].filter((x): x is string => x !== null);
  return {
    scheme: String(t.scheme),
    handshake: handshakes.join(", ") || "-",
    retries: retries(m.source?.sender_retries ?? t.sender_retries),
  };
}

/**
 * Whether a bobbin matches a search word: its name, provider, summary, scheme or what it was checked
 * against, any letter case.
 */
export function matchesSearch(b: Bobbin, word: string): boolean {
  const w = word.toLowerCase();
  const m = b.manifest;
  return [
    b.name,
    m.provider.vendor,
    m.provider.product,
    m.summary,
    catalogueFacts(b).scheme,
    m.provider.checked ?? "",
  ].some((s) => s.toLowerCase().includes(w));
}

/** A Markdown table cell: one line, pipes escaped. */
const cell = (s: string) => s.replaceAll("|", "\\|").replaceAll("\n", " ");

/** The catalogue table of docs/bobbins/README.md (`bobbin list --markdown`): one row per bobbin. */
export function catalogueMarkdown(bobbins: readonly Bobbin[]): string {
  const row = (b: Bobbin) => {
    const f = catalogueFacts(b);
    return (
      `| \`${b.name}\` | ${cell(`${b.manifest.provider.vendor} ${b.manifest.provider.product}`)} | ` +
      `${cell(f.scheme)} | ${cell(f.handshake)} | ${cell(f.retries)} | ${cell(b.manifest.provider.checked ?? "-")} | ` +
      `${cell(b.manifest.summary)} |`
    );
  };
  return [
    "| bobbin | provider | scheme | handshake | sender retries | checked against | summary |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...bobbins.map(row),
  ].join("\n");
}
