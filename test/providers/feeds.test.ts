// Feeds: reading Atom and RSS 2.0 as a poll bobbin meets them, and every refusal: declarations
// (entity bombs, external entities) before any parsing, size, depth, and documents that are not
// feeds, each with a fixed reason that never quotes the document.
import { describe, expect, test } from "bun:test";
import { FeedError, parseFeed } from "../../src/providers/feeds.ts";

const DECLARATIONS = "a feed with a DOCTYPE or entity declarations is refused";
const NOT_A_FEED = "not an Atom or RSS feed";

/** The reason parseFeed refuses `text` with, failing the test when it does not refuse. */
function refusal(text: string, limits?: Parameters<typeof parseFeed>[1]): string {
  try {
    parseFeed(text, limits);
  } catch (e) {
    expect(e).toBeInstanceOf(FeedError);
    return (e as FeedError).message;
  }
  throw new Error("parseFeed accepted the document");
}

// Shaped like SEC EDGAR's company filings feed (browse-edgar ... &output=atom).
const EDGAR =
  `<?xml version="1.0" encoding="ISO-8859-1" ?>
<feed xmlns="http://www.w3.org/2005/Atom">
<author><email>webmaster@sec.gov</email><name>Webmaster</name></author>
<company-info>
  <cik>0000320193</cik>
  <conformed-name>Apple Inc.</conformed-name>
  <state-location>CA</state-location>
</company-info>
<id>https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&amp;CIK=0000320193</id>
<link href="https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&amp;CIK=0000320193&amp;` +
  `type=10-K&amp;output=atom" rel="self" type="application/atom+xml"/>
<title>APPLE INC.  (0000320193)</title>
<updated>2024-11-01T06:01:36-04:00</updated>
<entry>
  <category label="form type" scheme="https://www.sec.gov/" term="10-K"/>
  <content type="text/xml">
    <accession-number>0000320193-24-000123</accession-number>
    <filing-date>2024-11-01</filing-date>
    <filing-type>10-K</filing-type>
  </content>
  <id>urn:tag:sec.gov,2008:accession-number=0000320193-24-000123</id>
  <link href="https://www.sec.gov/Archives/edgar/data/320193/000032019324000123/` +
  `0000320193-24-000123-index.htm" rel="alternate" type="text/html"/>
  <summary type="html"> &lt;b&gt;Filed:&lt;/b&gt; 2024-11-01 &lt;b&gt;AccNo:&lt;/b&gt; ` +
  `0000320193-24-000123 &lt;b&gt;Size:&lt;/b&gt; 9 MB</summary>
  <title>10-K  - Annual report [Section 13 and 15(d), not S-K Item 405]</title>
  <updated>2024-11-01T06:01:36-04:00</updated>
</entry>
<entry>
  <category label="form type" scheme="https://www.sec.gov/" term="10-K"/>
  <id>urn:tag:sec.gov,2008:accession-number=0000320193-23-000106</id>
  <link href="https://www.sec.gov/cgi-bin/viewer?action=view&amp;cik=320193&amp;` +
  `accession_number=0000320193-23-000106" rel="related" type="text/html"/>
  <link href="https://www.sec.gov/Archives/edgar/data/320193/000032019323000106/` +
  `0000320193-23-000106-index.htm" rel="alternate" type="text/html"/>
  <summary type="html"> &lt;b&gt;Filed:&lt;/b&gt; 2023-11-03 &lt;b&gt;AccNo:&lt;/b&gt; 0000320193-23-000106</summary>
  <title>10-K  - Annual report [Section 13 and 15(d), not S-K Item 405]</title>
  <updated>2023-11-02T18:08:27-04:00</updated>
</entry>
</feed>
`;

const RSS = `<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="/rss.xsl"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel>
    <title>Status: Example Cloud</title>
    <link>https://status.example.com/</link>
    <atom:link href="https://status.example.com/history.rss" rel="self" type="application/rss+xml"/>
    <description>Incident history</description>
    <lastBuildDate>Tue, 05 Mar 2024 10:12:00 +0000</lastBuildDate>
    <!-- newest first -->
    <item>
      <title>Elevated API error rates</title>
      <link>https://status.example.com/incidents/42</link>
      <guid isPermaLink="false">incident-42</guid>
      <pubDate>Tue, 05 Mar 2024 09:58:00 +0000</pubDate>
      <description>We are investigating errors on the API.</description>
      <category>api</category>
      <category>eu-west</category>
      <dc:creator>ops</dc:creator>
    </item>
    <item>
      <title>Scheduled maintenance</title>
      <link>https://status.example.com/incidents/41</link>
      <pubDate>Mon, 04 Mar 2024 22:00:00 +0000</pubDate>
    </item>
  </channel>
</rss>
`;

const atom = (body: string) => `<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>${body}</feed>`;
const atomEntries = (n: number) => atom(Array.from({ length: n }, (_, i) => `<entry><id>e${i}</id></entry>`).join(""));

describe("reading feeds", () => {
  test("an SEC EDGAR company filings feed", () => {
    const feed = parseFeed(EDGAR);
    expect(feed.kind).toBe("atom");
    expect(feed.title).toBe("APPLE INC.  (0000320193)");
    expect(feed.updated).toBe("2024-11-01T06:01:36-04:00");
    expect(feed.entries).toHaveLength(2);
    expect(feed.entries[0]).toEqual({
      id: "urn:tag:sec.gov,2008:accession-number=0000320193-24-000123",
      title: "10-K  - Annual report [Section 13 and 15(d), not S-K Item 405]",
      link: "https://www.sec.gov/Archives/edgar/data/320193/000032019324000123/0000320193-24-000123-index.htm",
      updated: "2024-11-01T06:01:36-04:00",
      summary: "<b>Filed:</b> 2024-11-01 <b>AccNo:</b> 0000320193-24-000123 <b>Size:</b> 9 MB",
      categories: ["10-K"],
    });
    // The alternate link, not the first one.
    expect(feed.entries[1].link).toBe(
      "https://www.sec.gov/Archives/edgar/data/320193/000032019323000106/0000320193-23-000106-index.htm",
    );
  });

  test("an RSS 2.0 feed", () => {
    const feed = parseFeed(RSS);
    expect(feed).toEqual({
      kind: "rss",
      title: "Status: Example Cloud",
      updated: "Tue, 05 Mar 2024 10:12:00 +0000",
      entries: [
        {
          id: "incident-42",
          title: "Elevated API error rates",
          link: "https://status.example.com/incidents/42",
          updated: "Tue, 05 Mar 2024 09:58:00 +0000",
          summary: "We are investigating errors on the API.",
          categories: ["api", "eu-west"],
        },
        // No guid: the link stands in as the id.
        {
          id: "https://status.example.com/incidents/41",
          title: "Scheduled maintenance",
          link: "https://status.example.com/incidents/41",
          updated: "Mon, 04 Mar 2024 22:00:00 +0000",
          summary: "",
          categories: [],
        },
      ],
    });
  });

  test("a feed with a single entry or item", () => {
    const a = parseFeed(
      atom(`<entry><id>only</id><title>One</title><link href="https://a.example/1"/><category term="x"/></entry>`),
    );
    expect(a.entries).toEqual([
      { id: "only", title: "One", link: "https://a.example/1", updated: "", summary: "", categories: ["x"] },
    ]);
    const r = parseFeed(
      `<rss version="2.0"><channel><title>c</title><item><title>One</title><category>y</category></` +
        `item></channel></rss>`,
    );
    expect(r.entries).toEqual([{ id: "", title: "One", link: "", updated: "", summary: "", categories: ["y"] }]);
  });

  test("a feed after a byte order mark", () => {
    expect(parseFeed(`\uFEFF<?xml version="1.0"?>\n${atomEntries(1)}`).entries[0].id).toBe("e0");
  });

  test(
    "an Atom entry: published when no updated, content when no summary, the first link when none " + "is alternate",
    () => {
      const [e] = parseFeed(
        atom(
          `<entry><published>2024-01-01T00:00:00Z</published><content type="text">body</content><link ` +
            `rel="self" href="https://a.example/self"/><link rel="edit" ` +
            `href="https://a.example/edit"/></entry>`,
        ),
      ).entries;
      expect(e).toMatchObject({
        id: "https://a.example/self",
        updated: "2024-01-01T00:00:00Z",
        summary: "body",
        link: "https://a.example/self",
      });
    },
  );

  test("CDATA is taken as written, entities in it undecoded", () => {
    const feed = parseFeed(
      `<rss version="2.0"><channel><title><![CDATA[ Q3 <b>results</b> ]]></title>
      <item><title>Fish <![CDATA[& chips]]> &amp; peas</title><description><![CDATA[<p>Tom &amp; ` +
        `Jerry</p>]]></description></item></channel></rss>`,
    );
    expect(feed.title).toBe("Q3 <b>results</b>");
    expect(feed.entries[0].title).toBe("Fish & chips & peas");
    expect(feed.entries[0].summary).toBe("<p>Tom &amp; Jerry</p>");
  });

  test("the predefined entities and numeric references are decoded, once", () => {
    const feed = parseFeed(
      atom(
        `<entry><title>Caf&#233; &amp; Cr&#xE8;me &lt;b&gt; &quot;x&quot; &apos;y&apos; &amp;lt; ` +
          `&#128512;</title><link href="https://a.example/?a=1&amp;b=&#233;"/></entry>`,
      ),
    );
    expect(feed.entries[0].title).toBe(`Café & Crème <b> "x" 'y' &lt; 😀`);
    expect(feed.entries[0].link).toBe("https://a.example/?a=1&b=é");
  });

  test("an XHTML summary reads as its text, in order", () => {
    const [e] = parseFeed(
      atom(
        `<entry><summary type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">Hello <b>bold</b> ` +
          `world</div></summary></entry>`,
      ),
    ).entries;
    expect(e.summary).toBe("Hello bold world");
  });

  test("a summary is cut to 2,000 characters", () => {
    const [e] = parseFeed(atom(`<entry><summary>${"a".repeat(5000)}</summary></entry>`)).entries;
    expect(e.summary).toBe("a".repeat(2000));
    // Never half of a surrogate pair: "a" then emoji puts one across the cut.
    const [f] = parseFeed(atom(`<entry><summary>a${"😀".repeat(1500)}</summary></entry>`)).entries;
    expect(f.summary).toBe(`a${"😀".repeat(999)}`);
  });

  test("past maxEntries the first ones are kept", () => {
    expect(parseFeed(atomEntries(5), { maxEntries: 3 }).entries.map((e) => e.id)).toEqual(["e0", "e1", "e2"]);
    expect(parseFeed(atomEntries(1001)).entries).toHaveLength(1000);
  });
});

describe("declarations are refused before parsing", () => {
  test("billion laughs, at once", () => {
    const lol = [
      '<!ENTITY lol0 "lol">',
      ...Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i};`.repeat(10)}">`),
    ];
    const bomb =
      `<?xml version="1.0"?>\n<!DOCTYPE feed [\n${lol.join("\n")}\n]>\n<feed ` +
      `xmlns="http://www.w3.org/2005/Atom"><title>&lol9;</title></feed>`;
    const start = performance.now();
    expect(refusal(bomb)).toBe(DECLARATIONS);
    expect(performance.now() - start).toBeLessThan(100);
  });

  test("an external entity", () => {
    expect(
      refusal(
        `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><feed><title>&e;</title></feed>`,
      ),
    ).toBe(DECLARATIONS);
  });

  test("a DOCTYPE with no internal subset, in any case, after a BOM or inside the prolog", () => {
    expect(refusal(`<!DOCTYPE feed><feed><title>t</title></feed>`)).toBe(DECLARATIONS);
    expect(refusal(`\uFEFF<?xml version="1.0"?><!-- x --><!doctype rss SYSTEM "rss.dtd"><rss/>`)).toBe(DECLARATIONS);
    expect(refusal(`<!DOCTYPE html><html><head><title>Home</title></head></html>`)).toBe(DECLARATIONS);
  });

  test("an entity declaration anywhere, even without a DOCTYPE", () => {
    expect(refusal(atom(`<entry><title><!eNtItY e "x"></title></entry>`))).toBe(DECLARATIONS);
  });
});

describe("limits", () => {
  test("too large, counted in UTF-8 bytes", () => {
    expect(refusal(atomEntries(10), { maxBytes: 100 })).toBe("feed too large");
    // The 60 é are 60 characters but 120 bytes, so the text has more bytes than characters.
    const text = atom(`<entry><title>${"é".repeat(60)}</title></entry>`);
    const bytes = new TextEncoder().encode(text).length;
    expect(bytes).toBe(text.length + 60);
    expect(parseFeed(text, { maxBytes: bytes }).entries[0].title).toBe("é".repeat(60));
    expect(refusal(text, { maxBytes: bytes - 1 })).toBe("feed too large");
    expect(refusal(text, { maxBytes: text.length })).toBe("feed too large");
    // A limit passed as undefined is the default, not no limit.
    expect(refusal(`<feed>${" ".repeat(5 * 1024 * 1024)}</feed>`, { maxBytes: undefined })).toBe("feed too large");
  });

  test("too deep", () => {
    const deep = atom(`<entry><summary>${"<d>".repeat(100)}x${"</d>".repeat(100)}</summary></entry>`);
    expect(refusal(deep)).toBe("feed nested too deep");
  });

  test("depth counts open elements only: not empty ones, nor tags in CDATA, comments or attribute values", () => {
    // feed > entry > title is 3 deep.
    const flat = atom(
      `<entry><link href="a"/><link href="b"/><link href="c"/><title a="x>y" ` +
        `b='<z'><![CDATA[<a><b><c>]]><!-- <d><e> -->t</title></entry>`,
    );
    expect(parseFeed(flat, { maxDepth: 3 }).entries[0].title).toBe("<a><b><c>t");
    expect(refusal(atom(`<entry><title><b>t</b></title></entry>`), { maxDepth: 3 })).toBe("feed nested too deep");
  });
});

describe("documents that are not feeds", () => {
  test.each([
    ["malformed XML", `<feed xmlns="http://www.w3.org/2005/Atom"><title>t</feed>`],
    ["an unclosed root", `<feed><entry><id>1</id></entry>`],
    ["an HTML page", `<html><head><title>Home</title></head><body><p>Welcome</p></body></html>`],
    ["an HTML page that is not XML", `<html><body><p>Welcome<br></body></html>`],
    ["RSS without a channel", `<rss version="2.0"><item><title>t</title></item></rss>`],
    ["two roots", `<feed><title>a</title></feed><feed><title>b</title></feed>`],
    ["two roots, the first empty", `<feed/><rss version="2.0"><channel><title>c</title></channel></rss>`],
    ["plain text", `hello`],
    ["nothing", ``],
  ])("%s", (_name, text) => {
    expect(refusal(text)).toBe(NOT_A_FEED);
  });
});

test("a refusal never carries text from the document", () => {
  const S = "SENTINEL_q7Zx";
  const bad = [
    `<!DOCTYPE ${S} [<!ENTITY ${S} "${S}">]><feed>&${S};</feed>`,
    `<feed><${S}>${S}</feed>`,
    `<feed><title a="${S}>${S}</title></feed>`,
    `<html><title>${S}</title></html>`,
    `${S}<feed/>`,
    `<feed><title>${"é".repeat(20)}${S}</title></feed>`,
    `<feed>${`<${S}>`.repeat(40)}</feed>`,
  ];
  for (const [i, text] of bad.entries()) {
    let err: unknown;
    try {
      parseFeed(text, i === 5 ? { maxBytes: 40 } : undefined);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FeedError);
    const e = err as FeedError;
    expect(e.message).not.toContain(S);
    expect(String(e)).not.toContain(S);
    expect(e.cause).toBeUndefined();
  }
});
