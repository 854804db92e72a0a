// `hookspool bobbin new <vendor>.<product> --poll`: a poll bobbin for a service with no push. Its
// poller makes a conditional GET of a feed (the ETag kept in state), reads it with parseFeed and
// returns the entries it has not seen as items; a poll capture answers the GET in the kit. What
// only the provider's pages can say (its API, why it has no push) is left as TODO.
import { stringify } from "smol-toml";

const FEED_URL = "https://feeds.example.com/entries.atom";
const NOW = 1_735_689_600;

const FEED = `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Example entries</title>
  <updated>2025-01-01T00:00:00Z</updated>
  <entry>
    <id>urn:example:entry:2</id>
    <title>The second entry</title>
    <link rel="alternate" href="https://feeds.example.com/entries/2"/>
    <updated>2025-01-01T00:00:00Z</updated>
  </entry>
  <entry>
    <id>urn:example:entry:1</id>
    <title>The first entry</title>
    <link rel="alternate" href="https://feeds.example.com/entries/1"/>
    <updated>2024-12-31T12:00:00Z</updated>
  </entry>
</feed>
`;

const POLLER = (name: string) =>
  `// The ${name} poller: on each tick of the dispatcher's clock, a conditional GET of the feed (the
// ETag of the last answer kept in state), and the entries not seen before as items. It calls the
// core for everything: ctx.http and ctx.saveState (hookspool/plugin), parseFeed (hookspool/providers).
import { definePoller } from "hookspool/plugin";
import { parseFeed } from "hookspool/providers";

/** How many entry ids are remembered: more than a feed ever lists at once. */
const SEEN = 500;

export default definePoller<{ url: string }>({
  async poll(_batch, ctx) {
    const etag = ctx.loadState<string>("etag", "");
    const answer = await ctx.http.getText(ctx.settings.url, etag ? { etag } : {});
    if (answer.status === 304) return [];
    const seen = ctx.loadState<string[]>("seen", []);
    const feed = parseFeed(answer.text);
    // TODO: what an entry of this service becomes; here its id, title, link and time.
    const fresh = feed.entries.filter((e) => e.id !== "" && !seen.includes(e.id));
    ctx.saveState("etag", answer.headers.etag ?? "");
    ctx.saveState("seen", [...fresh.map((e) => e.id), ...seen].slice(0, SEEN));
    ctx.log(\`\${feed.entries.length} entries, \${fresh.length} new\`);
    return fresh.map((e) => ({ event_type: "entry", key: e.id, id: e.id, title: e.title, ` +
  `link: e.link, updated: e.updated }));
  },
});
`;

const FRONTMATTER = (name: string) => `---\nbobbin: ${name}\nprovider: TODO TODO\napi_docs: https://TODO\n---\n`;

const CONFIG = (name: string) =>
  [
    "```toml",
    "[bobbins.<INSTANCE>]",
    `bobbin = "${name}"`,
    'settings = { url = "<FEED_URL>" }',
    'outputs = { entry = "hermes:<INSTANCE>" }',
    "```",
  ].join("\n");

function documents(name: string): [string, string][] {
  return [
    [
      "README.md",
      `${FRONTMATTER(name)}
# ${name}

TODO: what the service publishes, and why it has no push (the provider's page is no_push_docs).

- Poll: every hour, a conditional GET of the feed in the \`url\` setting; new entries become \`entry\` outputs.
- State: the last answer's ETag and the ids of the last 500 entries, in the instance's state directory.
- Sweep: none needed; the poll is its own (a missed tick is taken at the next one).

What was checked against which of the provider's pages: TODO.
`,
    ],
    [
      "SETUP.md",
      `${FRONTMATTER(name)}
# Setting up ${name}

1. Find the feed's URL: TODO (which page of the provider lists it). It goes into the \`url\` setting.
2. Add the instance and check it:

${CONFIG(name)}

   \`hookspool check\`, then reload. The first tick comes within a few minutes.
3. See it: \`hookspool status --json\` shows the instance under \`polls\`, ` +
        `and \`hookspool list --source <INSTANCE>\` its tick batches.
4. To roll back: remove the table and reload.
`,
    ],
    [
      "AGENTS.md",
      `${FRONTMATTER(name)}
# Agent setup: ${name}

## Needs from the human

- The feed's URL (the \`url\` setting): TODO.

## Steps

1. **Goal: the instance loads.** Add this table, then run \`hookspool check\`; fix what it names.

${CONFIG(name)}

2. **Goal: the config is live.** \`hookspool reload\`.
3. **Goal: the instance ticks.** \`hookspool status --json\` shows it under \`polls\` with a \`next_at\`; ` +
        `if not, read \`hookspool check\` again.
`,
    ],
  ];
}

/** The files of a new poll bobbin. */
export function scaffoldPoll(name: string): Map<string, string> {
  const [, product] = name.split(".");
  const manifest = stringify({
    name,
    version: "1",
    summary: `TODO: what ${product} publishes, in one line`,
    provider: {
      vendor: "TODO",
      product: "TODO",
      homepage: "https://TODO",
      api_docs: "https://TODO",
      no_push_note: "TODO: one sentence: why the service has no push",
      no_push_docs: "https://TODO",
    },
    poll: { every_s: 3600, jitter_s: 300, module: "poller", timeout_s: 120, state: true },
    settings: { url: { description: "the feed's URL", type: "string", required: true } },
    outputs: { entry: { description: "an entry of the feed not seen before" } },
  });
  const files = new Map<string, string>();
  files.set(
    "bobbin.toml",
    `# Made by hookspool bobbin new --poll. Fill in every TODO from the provider's own documentation;\n` +
      `# hookspool bobbin check says what is left.\n${manifest}`,
  );
  files.set("poller.ts", POLLER(name));
  const items = [
    {
      event_type: "entry",
      key: "urn:example:entry:2",
      id: "urn:example:entry:2",
      title: "The second entry",
      link: "https://feeds.example.com/entries/2",
      updated: "2025-01-01T00:00:00Z",
    },
    {
      event_type: "entry",
      key: "urn:example:entry:1",
      id: "urn:example:entry:1",
      title: "The first entry",
      link: "https://feeds.example.com/entries/1",
      updated: "2024-12-31T12:00:00Z",
    },
  ];
  const capture = {
    description: "TODO: the first tick: the feed, as the service answers it (redacted)",
    now: NOW,
    http: [
      {
        method: "GET",
        url: FEED_URL,
        status: 200,
        headers: { etag: '"v1"', "content-type": "application/atom+xml" },
        body: FEED,
      },
    ],
    items,
  };
  files.set("captures/poll-example.json", `${JSON.stringify(capture, null, 2)}\n`);
  files.set(
    "captures/kit.toml",
    `# The example instance the poll captures were made for.\nnow = ${NOW}\n` +
      `\n[instance]\nname = "${product}"\nsettings = { url = "${FEED_URL}" }\n`,
  );
  for (const [f, text] of documents(name)) files.set(f, text);
  files.set(
    "tests/poller.test.ts",
    `// ${name}'s own tests: what poller.ts decides that the poll captures do not show.\n` +
      `import { test } from "bun:test";\n\n// TODO: one test per decision of poller.ts, ` +
      `then remove this line and the todo below.\ntest.todo("what poller.ts decides");\n`,
  );
  return files;
}
