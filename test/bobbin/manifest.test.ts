// bobbin.toml: every rule a manifest is held to, one case per kind of mistake, each reported
// with the key it is at.
import { describe, expect, test } from "bun:test";
import { parseManifest } from "../../src/bobbin/manifest.ts";
import { manifestText } from "../helpers/bobbins.ts";

const PRESETS = ["burst", "mail", "calendar", "sync", "meeting", "immediate"];
const parse = (text: string, dir = "acme/hooks", builtin = false) =>
  parseManifest(text, { dir, builtin, presets: PRESETS });
const keysOf = (text: string, dir?: string, builtin?: boolean) => parse(text, dir, builtin).problems.map((p) => p.key);

/** The base manifest with one line replaced (or a table appended). */
const BASE = manifestText("acme.hooks");
const edited = (from: string, to: string) => {
  if (!BASE.includes(from)) throw new Error(`the base manifest has no ${from}`);
  return BASE.replace(from, to);
};

describe("a good manifest", () => {
  test("parses with defaults filled in", () => {
    const { manifest, problems } = parse(BASE);
    expect(problems).toEqual([]);
    expect(manifest).toMatchObject({
      name: "acme.hooks",
      vendor: "acme",
      product: "hooks",
      provider: { vendor: "acme", product: "hooks", webhook_docs: "https://acme.dev/webhooks" },
      source: { span: "burst", sender_retries: false, template: { scheme: "hmac-sha256-hex" } },
      secrets: { secret: { description: "the signing secret", processor: false, required: true } },
      outputs: { "*": { description: "every accepted event" } },
    });
  });

  test("a product with - may live in a directory written with _", () => {
    expect(parse(manifestText("acme.web-hooks"), "acme/web_hooks").problems).toEqual([]);
  });

  test("a processor's defaults: 300 s, no state", () => {
    const { manifest } = parse(`${BASE}\n[processor]\nmodule = "processor"\n`);
    expect(manifest?.processor).toEqual({ module: "processor", timeout_s: 300, state: false });
  });
});

describe("names", () => {
  test.each([
    ["acme", "no dot"],
    ["acme.hooks.v2", "two dots"],
    ["Acme.hooks", "upper case"],
    ["acme.9hooks", "a part that starts with a digit"],
    [`acme.${"h".repeat(41)}`, "a part over 40 characters"],
  ])("%s is not <vendor>.<product> (%s)", (name) => {
    const r = parse(BASE.replace('name = "acme.hooks"', `name = "${name}"`));
    expect(r.problems).toMatchObject([{ key: "name", message: `"${name}" is not <vendor>.<product>` }]);
    expect(r.manifest).toBeNull();
  });

  test("the name must be its directory's", () => {
    expect(parse(BASE, "acme/other").problems).toMatchObject([
      {
        key: "name",
        message: '"acme.hooks" is not the name of its directory acme/other',
        hint: "move it to acme/hooks/",
      },
    ]);
  });

  test("the hookspool. namespace is the built-ins'", () => {
    const text = manifestText("hookspool.mine").replace("[provider]\n", '[provider]\nchecked = "its own tests"\n');
    expect(keysOf(text, "hookspool/mine", false)).toEqual(["name"]);
    expect(keysOf(text, "hookspool/mine", true)).toEqual([]);
  });
});

describe("keys and shapes", () => {
  test("an unknown key anywhere is an error", () => {
    expect(keysOf(`extra = 1\n${BASE}`)).toEqual(["extra"]);
    expect(keysOf(edited("[source]\n", "[source]\nfoo = 1\n"))).toEqual(["source.foo"]);
    expect(keysOf(edited("[provider]\n", '[provider]\nlogo = "x"\n'))).toEqual(["provider.logo"]);
  });

  test("[provider] checked is one line of at most 160 characters, without |", () => {
    const checked = (v: string) => keysOf(edited("[provider]\n", `[provider]\nchecked = ${JSON.stringify(v)}\n`));
    expect(checked("stripe-node 17.x (src/Webhooks.ts)")).toEqual([]);
    expect(parse(edited("[provider]\n", '[provider]\nchecked = "an SDK 1.0"\n')).manifest?.provider.checked).toBe(
      "an SDK 1.0",
    );
    for (const bad of ["", " ", "two\nlines", "a | b", "x".repeat(161)])
      expect(checked(bad)).toEqual(["provider.checked"]);
  });

  test("a built-in says what it was checked against; a private bobbin need not", () => {
    expect(BASE).not.toContain("checked");
    expect(keysOf(BASE, "acme/hooks", false)).toEqual([]);
    expect(parse(BASE, "acme/hooks", true).problems).toMatchObject([
      { key: "provider.checked", message: "required: a built-in says what it was checked against" },
    ]);
    expect(
      keysOf(edited("[provider]\n", '[provider]\nchecked = "acme-sdk 1.2 (src/verify.ts)"\n'), "acme/hooks", true),
    ).toEqual([]);
    // A checked that is there but wrong is said once, as such.
    expect(keysOf(edited("[provider]\n", '[provider]\nchecked = ""\n'), "acme/hooks", true)).toEqual([
      "provider.checked",
    ]);
  });

  test("not TOML at all", () => {
    expect(parse("name = ").problems[0].message).toMatch(/^not valid TOML/);
  });

  test("[provider] is required, and its values are strings", () => {
    const noProvider = BASE.replace(/\[provider\][^[]*/, "");
    expect(keysOf(noProvider)).toEqual(["provider"]);
    expect(keysOf(edited('homepage = "https://acme.dev/"', "homepage = 3"))).toEqual(["provider.homepage"]);
    expect(keysOf(edited('vendor = "acme"\n', ""))).toEqual(["provider.vendor"]);
  });

  test("exactly one of module and template", () => {
    expect(keysOf(edited("span = ", 'module = "source"\nspan = '))).toEqual(["source"]);
    expect(keysOf(BASE.replace(/template = \{[^\n]*\n/, ""))).toEqual(["source"]);
    expect(keysOf(BASE.replace(/template = \{[^\n]*\n/, "template = 3\n"))).toEqual(["source.template"]);
  });

  test("source.config names a code source's settings, and only a code source has it", () => {
    const code = BASE.replace(/template = \{[^\n]*\n/, 'module = "source"\nconfig = ["env"]\n');
    expect(parse(code).problems).toMatchObject([
      { key: "source.config", message: '"env" is not a setting of this bobbin' },
    ]);
    expect(keysOf(`${code}\n[settings.env]\ndescription = "e"\ntype = "string"\ndefault = "prod"\n`)).toEqual([]);
    expect(keysOf(edited("span = ", 'config = ["topic"]\nspan = '))).toContain("source.config");
    expect(keysOf(edited("span = ", "config = 3\nspan = "))).toEqual(["source.config"]);
  });

  test("[sweep]: a kind hookspool has, and a declared secret for its token", () => {
    const sweep = (kind: string, secret: string, extra = "") =>
      `${BASE}\n[secrets.tok]\ndescription = "t"\nrequired = false\n\n[sweep]\nkind = "${kind}"\n` +
      `secret = "${secret}"\n${extra}`;
    expect(parse(sweep("github-redeliver", "tok")).manifest?.sweep).toEqual({
      kind: "github-redeliver",
      secret: "tok",
    });
    expect(parse(sweep("gitlab-redeliver", "tok")).problems).toMatchObject([
      {
        key: "sweep.kind",
        message: '"gitlab-redeliver" is not a sweep hookspool has: github-redeliver, stripe-events, events-api',
      },
    ]);
    expect(keysOf(sweep("github-redeliver", "nope"))).toEqual(["sweep.secret"]);
    expect(keysOf(sweep("github-redeliver", "tok", "every = 1\n"))).toEqual(["sweep.every"]);
    expect(parse(sweep("stripe-events", "tok")).manifest?.sweep).toEqual({ kind: "stripe-events", secret: "tok" });
    // Only an events-api sweep describes its list; the others know their provider's API.
    expect(keysOf(sweep("stripe-events", "tok", '[sweep.api]\nurl = "https://acme.dev"\n'))).toEqual(["sweep.api"]);
    expect(keysOf(sweep("events-api", "tok"))).toEqual(["sweep.api"]);
  });

  test("[sweep.api]: an events-api list's URL, auth, selectors, cursor, pace and retention", () => {
    const api = (lines: string) =>
      `${BASE}\n[secrets.tok]\ndescription = "t"\nrequired = false\n\n[sweep]\nkind = "events-api"\n` +
      `secret = "tok"\n\n[sweep.api]\n${lines}\n`;
    const GOOD = [
      'url = "https://api.acme.dev"',
      'path = "/events"',
      'query = { status = "failed" }',
      'args = { hook = "the hook id" }',
      'auth = "bearer"',
      'items = "data"',
      'payload = "payload"',
      'id = "payload.id"',
      'headers = { "X-Acme-Delivery" = "id" }',
      'since_param = "from"',
      'next = "meta.next"',
      'more = "meta.has_more"',
      "keeps_s = 86400",
    ];
    const good = parse(api(GOOD.join("\n")));
    expect(good.problems).toEqual([]);
    expect(good.manifest?.sweep?.api).toEqual({
      url: "https://api.acme.dev",
      path: "/events",
      query: { status: "failed" },
      args: { hook: "the hook id" },
      auth: "bearer",
      items: "data",
      payload: "payload",
      id: "payload.id",
      headers: { "X-Acme-Delivery": "id" },
      since_param: "from",
      since_format: "rfc3339",
      next: "meta.next",
      more: "meta.has_more",
      per_s: 1,
      keeps_s: 86400,
    });
    const swap = (from: string, to: string) => api(GOOD.map((l) => (l.startsWith(from) ? to : l)).join("\n"));
    expect(keysOf(swap("url", 'url = "http://api.acme.dev"'))).toEqual(["sweep.api.url"]);
    expect(keysOf(swap("url", 'url = "https://api.acme.dev/?key=1"'))).toEqual(["sweep.api.url"]);
    expect(keysOf(swap("path", 'path = "events"'))).toEqual(["sweep.api.path"]);
    expect(keysOf(swap("auth", 'auth = "token"'))).toEqual(["sweep.api.auth"]);
    expect(keysOf(swap("id", 'id = "payload[0]"'))).toEqual(["sweep.api.id"]);
    expect(keysOf(swap("keeps_s", "keeps_s = 0"))).toEqual(["sweep.api.keeps_s"]);
    expect(keysOf(swap("args", 'args = { status = "x" }'))).toEqual(["sweep.api.args.status"]);
    expect(keysOf(swap("since_param", 'since_format = "iso"'))).toEqual([
      "sweep.api.since_format",
      "sweep.api.since_param",
    ]);
    // A cursor is the next page's URL or a parameter with its value, not both and not neither.
    expect(keysOf(swap("next", 'cursor_param = "after"'))).toEqual(["sweep.api.cursor_value"]);
    expect(keysOf(swap("next", 'cursor_param = "after"\ncursor_value = "last:id"'))).toEqual([]);
    expect(keysOf(swap("more", 'more = "meta.has_more"\ncursor_param = "after"\ncursor_value = "x"'))).toEqual([
      "sweep.api.next",
    ]);
    expect(keysOf(swap("more", 'more = "meta.has_more"\nrate = 3'))).toEqual(["sweep.api.rate"]);
    // Svix's `done` says the opposite of "more".
    expect(keysOf(swap("more", 'more = "!done"'))).toEqual([]);
    expect(keysOf(swap("more", 'more = "!"'))).toEqual(["sweep.api.more"]);
  });

  test("a sweep that enqueues needs a dedup id from the event, not the body's hash", () => {
    const text = manifestText(
      "acme.hooks",
      '\n[secrets.tok]\ndescription = "t"\nrequired = false\n\n[sweep]\nkind = "stripe-events"\nsecret = "tok"\n',
      'template = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "topic", dedup = "body_sha256" }\n' +
        'span = "burst"',
    );
    expect(parse(text).problems).toMatchObject([
      { key: "sweep.kind", message: expect.stringContaining("needs a dedup id from the event itself") },
    ]);
  });

  test("indexed: payload paths as --where takes them, each once, a few at most", () => {
    const indexed = (list: string) => `indexed = ${list}
${BASE}`;
    expect(parse(BASE).manifest?.indexed).toEqual([]);
    expect(parse(indexed('["repository.full_name", "items.0.id"]')).manifest?.indexed).toEqual([
      "repository.full_name",
      "items.0.id",
    ]);
    expect(parse(indexed('"repository.full_name"')).problems).toMatchObject([
      { key: "indexed", message: "expected a list of payload paths" },
    ]);
    expect(parse(indexed('["a", "a..b", "a", "x.-1"]')).problems).toMatchObject([
      { key: "indexed[1]", message: "a path is keys of letters, digits, _, $ and - joined by single dots" },
      { key: "indexed[2]", message: '"a" is listed twice' },
      { key: "indexed[3]", message: "a key may not be a negative number" },
    ]);
    const many = JSON.stringify(Array.from({ length: 9 }, (_, i) => `p${i}`));
    expect(keysOf(indexed(many))).toEqual(["indexed"]);
  });

  test("a span must be a preset", () => {
    expect(parse(edited('span = "burst"', 'span = "slow"')).problems).toMatchObject([
      {
        key: "source.span",
        message: '"slow" is not a span preset: one of burst, mail, calendar, sync, meeting, immediate',
      },
    ]);
  });

  test("settings: a type from the list, a default of that type, a default when not required", () => {
    const with_ = (t: string) => keysOf(`${BASE}\n[processor]\nmodule = "processor"\n${t}`);
    expect(with_('[settings.owner]\ndescription = "o"\nrequired = true\n')).toEqual(["settings.owner.type"]);
    expect(with_('[settings.owner]\ndescription = "o"\ntype = "email"\nrequired = true\n')).toEqual([
      "settings.owner.type",
    ]);
    expect(with_('[settings.n]\ndescription = "n"\ntype = "int"\ndefault = "3"\n')).toEqual(["settings.n.default"]);
    expect(with_('[settings.n]\ndescription = "n"\ntype = "int"\n')).toEqual(["settings.n.default"]);
    expect(with_('[settings.n]\ndescription = "n"\ntype = "int"\ndefault = 3\n')).toEqual([]);
    expect(with_('[settings.tags]\ndescription = "t"\ntype = "list"\ndefault = ["a", 1]\n')).toEqual([
      "settings.tags.default",
    ]);
  });

  test("secrets: a description, and booleans for processor and required", () => {
    expect(keysOf(edited('description = "the signing secret"', 'description = "s"\nprocessor = "yes"'))).toEqual([
      "secrets.secret.processor",
    ]);
    expect(keysOf(edited('description = "the signing secret"\n', ""))).toEqual(["secrets.secret.description"]);
  });

  test("outputs: event-type tokens or *, each with a description; at least one", () => {
    expect(keysOf(`${BASE}\n[outputs."bad type"]\ndescription = "x"\n`)).toEqual(['outputs."bad type"']);
    expect(
      keysOf(
        `${BASE}\n[outputs.push]\ndescription = "a push"\n[outputs."pull_request.opened"]\ndescription = "a PR"\n`,
      ),
    ).toEqual([]);
    expect(keysOf(BASE.replace(/\[outputs\."\*"\][^[]*/, ""))).toEqual(["outputs"]);
  });

  test("[poll] excludes [source] and [processor], and needs every_s >= 60 and module = poller", () => {
    expect(keysOf(`${BASE}\n[poll]\nevery_s = 900\nmodule = "poller"\n`)).toEqual(["poll"]);
    const poll = (body: string) => keysOf(BASE.replace(/\[source\][^[]*/, `[poll]\n${body}\n`));
    expect(poll('every_s = 900\nmodule = "poller"')).toEqual([]);
    expect(poll('every_s = 30\nmodule = "poller"')).toEqual(["poll.every_s"]);
    expect(poll('every_s = 900\nmodule = "fetch"')).toEqual(["poll.module"]);
    expect(poll('every_s = 900\nmodule = "poller"\njitter_s = 400')).toEqual(["poll.jitter_s"]);
    const { manifest } = parse(BASE.replace(/\[source\][^[]*/, '[poll]\nevery_s = 900\nmodule = "poller"\n'));
    expect(manifest?.poll).toEqual({ every_s: 900, jitter_s: 90, module: "poller", timeout_s: 300, state: true });
  });
});

describe("template settings", () => {
  const settingsBobbin = (settings: string, processor = "") =>
    manifestText("acme.hooks", `${processor}\n${settings}`, 'template = "settings"\nspan = "burst"');
  const SCHEME_KEY =
    '[settings.scheme]\ndescription = "s"\ntype = "string"\nrequired = true\n[settings.key]\n' +
    'description = "k"\ntype = "list"\nrequired = true\n';

  test('a "settings" template takes every key from settings, scheme and key among them', () => {
    expect(keysOf(settingsBobbin(SCHEME_KEY))).toEqual([]);
    expect(keysOf(settingsBobbin('[settings.scheme]\ndescription = "s"\ntype = "string"\nrequired = true\n'))).toEqual([
      "settings.key",
    ]);
  });

  test("a template key's setting has the key's type", () => {
    expect(
      keysOf(
        settingsBobbin(`${SCHEME_KEY}[settings.head_handshake]\ndescription = "h"\ntype = "string"\ndefault = ""\n`),
      ),
    ).toEqual(["settings.head_handshake.type"]);
    expect(
      keysOf(settingsBobbin(`${SCHEME_KEY}[settings.attrs]\ndescription = "a"\ntype = "table"\ndefault = {}\n`)),
    ).toEqual([]);
  });

  test("a fixed table's own keys are never a setting", () => {
    const text = manifestText(
      "acme.hooks",
      '[settings.header]\ndescription = "h"\ntype = "string"\ndefault = "X-Other"\n',
    );
    expect(parse(text).problems).toMatchObject([
      { key: "settings.header", message: "the fixed template sets header already; a setting cannot override it" },
    ]);
    const callback = manifestText(
      "acme.hooks",
      '[settings.callback_url]\ndescription = "the URL"\ntype = "string"\nrequired = true\n',
    );
    expect(keysOf(callback)).toEqual([]);
  });

  test("without a processor, a template bobbin takes no setting that is not a template key", () => {
    const other = '[settings.owner]\ndescription = "o"\ntype = "string"\nrequired = true\n';
    expect(keysOf(manifestText("acme.hooks", other))).toEqual(["settings.owner"]);
    expect(keysOf(manifestText("acme.hooks", `[processor]\nmodule = "processor"\n${other}`))).toEqual([]);
  });
});
