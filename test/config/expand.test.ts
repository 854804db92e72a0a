// [bobbins.<i>] expands inside config loading into ordinary tables: the source, a processor's
// destination and environment, routes per output; and every mistake is one error with its key.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { findBobbins } from "../../src/bobbin/registry.ts";
import { ConfigError, parseConfig } from "../../src/config/load.ts";
import { expectEvery, loadEverySource, loadSources } from "../../src/config/sources.ts";
import { storableUrl } from "../../src/intake/captures.ts";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";

const HOME = "/var/lib/hs-test";

function parse(root: string, text: string) {
  return parseConfig(`[spool]\nbobbin_path = ["${root}"]\n\n${text}`, "/etc/hookspool/config.toml", {
    home: () => HOME,
  });
}

function errorsOf(root: string, text: string) {
  try {
    parse(root, text);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => ({ key: p.key, message: p.message, hint: p.hint }));
    throw e;
  }
  return [];
}

const SETTINGS_TEMPLATE = 'template = "settings"\nspan = "burst"';
const settingsManifest = (name: string) =>
  manifestText(
    name,
    `[settings.scheme]\ndescription = "s"\ntype = "string"\nrequired = true
[settings.key]\ndescription = "k"\ntype = "list"\nrequired = true
[settings.header]\ndescription = "h"\ntype = "string"\ndefault = ""
[settings.prefix]\ndescription = "p"\ntype = "string"\ndefault = ""
[settings.event_type]\ndescription = "e"\ntype = "string"\ndefault = ""
[settings.attrs]\ndescription = "a"\ntype = "table"\ndefault = {}
[settings.ignore]\ndescription = "i"\ntype = "list"\ndefault = []`,
    SETTINGS_TEMPLATE,
  );

const processorManifest = (name: string, state = true) =>
  manifestText(
    name,
    `[secrets.cred]\ndescription = "the API credential"\nprocessor = true
[settings.owner]\ndescription = "the owner"\ntype = "string"\nrequired = true
[settings.tz]\ndescription = "time zone"\ntype = "string"\ndefault = "UTC"
[processor]\nmodule = "processor"\ntimeout_s = 120\nstate = ${state}
[outputs.scheduling]\ndescription = "asks for a time"
[outputs.agent-mail]\ndescription = "mail for the agent"`,
  );

/** A bobbin root with acme.hooks (fixed template), acme.any (settings template), acme.mail (processor). */
function catalogue(): string {
  const root = bobbinRoot();
  writeBobbin(
    root,
    "acme/hooks",
    manifestText(
      "acme.hooks",
      '[settings.callback_url]\ndescription = "the URL the sender signs"\ntype = "string"\nrequired = true\n',
    ),
  );
  writeBobbin(root, "acme/any", settingsManifest("acme.any"));
  writeBobbin(root, "acme/mail", processorManifest("acme.mail"));
  return root;
}

const SECRET = 'secrets.secret = { file = "/etc/hookspool/secrets/s" }';

describe("a template bobbin", () => {
  test("becomes a template source with the instance's secrets, settings and the mapped output as action", () => {
    const root = catalogue();
    const { config } = parse(
      root,
      `[bobbins.hooks]\nbobbin = "acme.hooks"\n${SECRET}\nsettings = { callback_url = ` +
        `"https://h.example.net/hooks/hooks" }\noutputs = { "*" = "hermes:hooks" }\n`,
    );
    expect(config.sources.hooks).toEqual({
      template: {
        scheme: "hmac-sha256-hex",
        header: "X-Sig",
        prefix: "sha256=",
        key: "topic",
        event_type: "type",
        callback_url: "https://h.example.net/hooks/hooks",
      },
      secrets: { secret: { file: "/etc/hookspool/secrets/s" } },
      span: "burst",
      expect_every_s: 0,
      dedup_window_s: 86400,
      allow_sensitive_keep_headers: false,
      sender_retries: false,
      action: "hermes:hooks",
    });
    expect(config.routes).toEqual([]);
    expect(Object.keys(config.destinations)).toEqual([]);
  });

  test("the instance's windows, dedup window, body cap and expectation override the manifest's", () => {
    const root = catalogue();
    const { config } = parse(
      root,
      `[bobbins.hooks]\nbobbin = "acme.hooks"\n${SECRET}\nsettings = { callback_url = ` +
        `"https://h.example.net/x" }\noutputs = { "*" = "hermes:hooks" }\nspan = "mail"\nquiet_s = 5\n` +
        `max_events = 10\ndedup_window_s = 3600\nmax_body_bytes = 1000\nexpect_every_s = 600\n`,
    );
    expect(config.sources.hooks).toMatchObject({
      span: "mail",
      quiet_s: 5,
      max_events: 10,
      dedup_window_s: 3600,
      max_body_bytes: 1000,
      expect_every_s: 600,
    });
  });

  test("expect = true applies the manifest's expectation; without it there is none", () => {
    const root = bobbinRoot();
    writeBobbin(
      root,
      "acme/steady",
      manifestText(
        "acme.steady",
        "",
        'template = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "topic" }\nexpect_every_s = 3600',
      ),
    );
    const table = (expect: string) =>
      `[bobbins.s]\nbobbin = "acme.steady"\n${SECRET}\noutputs = { "*" = "hermes:s" }\n${expect}`;
    expect(parse(root, table("expect = true\n")).config.sources.s.expect_every_s).toBe(3600);
    expect(parse(root, table("")).config.sources.s.expect_every_s).toBe(0);
  });

  test('"settings": every key from the instance or its default, an empty value left out', () => {
    const root = catalogue();
    const { config } = parse(
      root,
      `[bobbins.any]\nbobbin = "acme.any"\n${SECRET}\nsettings = { scheme = "hmac-sha256-hex", header ` +
        `= "X-Sig", key = ["topic"], prefix = "" }\noutputs = { "*" = "hermes:any" }\n`,
    );
    expect(config.sources.any.template).toEqual({ scheme: "hmac-sha256-hex", header: "X-Sig", key: ["topic"] });
  });

  test("several outputs become routes on event_type, before the file's own; * is the action", () => {
    const root = catalogue();
    const { config } = parse(
      root,
      `[bobbins.any]\nbobbin = "acme.any"\n${SECRET}\nsettings = { scheme = "hmac-sha256-hex", header ` +
        `= "X-Sig", key = ["topic"], event_type = "type", attrs = { event_type = "type" } }
outputs = { "*" = "hermes:any", push = "hermes:pushes", "pull_request" = "hermes:prs" }

[[routes]]
name = "audit"
source = "any"
tee = true
destination = "hermes:audit"
`,
    );
    expect(config.sources.any.action).toBe("hermes:any");
    expect(config.routes.map((r) => [r.name, r.match, r.destination, r.tee, r.instance])).toEqual([
      ["any-push", { event_type: "push" }, "hermes:pushes", false, "any"],
      ["any-pull_request", { event_type: "pull_request" }, "hermes:prs", false, "any"],
      ["audit", {}, "hermes:audit", true, undefined],
    ]);
  });

  test('several outputs without "*" are an error; the event type needs no attrs setting to be matched', () => {
    const root = catalogue();
    const base = `[bobbins.any]\nbobbin = "acme.any"\n${SECRET}\n`;
    expect(
      errorsOf(
        root,
        `${base}settings = { scheme = "hmac-sha256-hex", header = "X-Sig", key = ["t"], event_type = ` +
          `"type", attrs = { event_type = "type" } }\noutputs = { push = "hermes:p", tag = "hermes:t" ` +
          `}\n`,
      ),
    ).toMatchObject([{ key: "bobbins.any.outputs", message: expect.stringContaining('need "*" mapped') }]);
    expect(
      errorsOf(
        root,
        `${base}settings = { scheme = "hmac-sha256-hex", header = "X-Sig", key = ["t"], event_type = ` +
          `"type" }\noutputs = { "*" = "hermes:a", push = "hermes:p" }\n`,
      ),
    ).toEqual([]);
  });
});

describe("a bobbin with a processor", () => {
  const table = (extra = "") =>
    `[bobbins.mail]\nbobbin = "acme.mail"\n${SECRET}\nsecrets.cred = { file = ` +
    `"/etc/hookspool/google/owner.json" }\nsettings = { owner = "owner@example.com" }\noutputs = { ` +
    `scheduling = "hermes:sched", agent-mail = "hermes:mail" }\n${extra}`;

  test("its source acts to script:<i>; the destination runs the processor with its environment", () => {
    const root = catalogue();
    const { config } = parse(root, table());
    expect(config.sources.mail.action).toBe("script:mail");
    expect(config.destinations["script:mail"]).toEqual({
      processor: "mail",
      timeout_s: 120,
      max_inflight: 1,
      unsigned: false,
      allow_insecure: false,
      unwrap: false,
      state_dir: join(HOME, "bobbins", "mail"),
      env: {
        HOOKSPOOL_BOBBIN: "acme.mail",
        HOOKSPOOL_BOBBIN_INSTANCE: "mail",
        HOOKSPOOL_BOBBIN_DIR: join(root, "acme/mail"),
        HOOKSPOOL_SETTINGS: JSON.stringify({ owner: "owner@example.com", tz: "UTC" }),
        HOOKSPOOL_DELTA_ROUTES: JSON.stringify({ scheduling: "hermes:sched", "agent-mail": "hermes:mail" }),
        // Only the secrets the processor is given, and only as references.
        HOOKSPOOL_SECRET_REFS: JSON.stringify({ cred: { file: "/etc/hookspool/google/owner.json" } }),
        // Journals are kept as long as delivered batches (retention.delivered_days, 7 by default).
        HOOKSPOOL_JOURNAL_KEEP_S: "604800",
      },
    });
    expect(config.routes).toEqual([]);
  });

  test("the instance's timeout_s and state_dir win; no state, no state_dir", () => {
    const root = catalogue();
    writeBobbin(root, "acme/stateless", processorManifest("acme.stateless", false));
    expect(
      parse(root, table('timeout_s = 30\nstate_dir = "/srv/state/mail"\n')).config.destinations["script:mail"],
    ).toMatchObject({ timeout_s: 30, state_dir: "/srv/state/mail" });
    const { config } = parse(root, table().replace("acme.mail", "acme.stateless"));
    expect(config.destinations["script:mail"].state_dir).toBeUndefined();
  });

  test("a non-tee route that bypasses the processor is an error; a tee route is fine", () => {
    const root = catalogue();
    const route = (tee: boolean) =>
      `\n[[routes]]\nname = "r"\nsource = "mail"\ndestination = "hermes:raw"\ntee = ${tee}\n`;
    expect(errorsOf(root, table() + route(false))).toMatchObject([
      { key: "routes[0].destination", message: expect.stringContaining("would bypass it") },
    ]);
    expect(errorsOf(root, table() + route(true))).toEqual([]);
  });

  test(
    "an output to a destination that does not exist, and an { env } reference for a processor " + "secret, are errors",
    () => {
      const root = catalogue();
      expect(errorsOf(root, table().replace('scheduling = "hermes:sched"', 'scheduling = "audit"'))).toMatchObject([
        { key: "bobbins.mail.outputs.scheduling", message: 'no destination "audit"' },
      ]);
      expect(
        errorsOf(
          root,
          table().replace(
            'secrets.cred = { file = "/etc/hookspool/google/owner.json" }',
            'secrets.cred = { env = "CRED" }',
          ),
        ),
      ).toMatchObject([
        { key: "bobbins.mail.secrets.cred", message: expect.stringContaining("does not inherit the environment") },
      ]);
    },
  );
});

describe("the mistakes of an instance, one error each", () => {
  const root = catalogue();
  const good =
    `bobbin = "acme.hooks"\n${SECRET}\nsettings = { callback_url = ` +
    `"https://h.example.net/x" }\noutputs = { "*" = "hermes:h" }\n`;

  test("a missing bobbin names the one the instance is probably for", () => {
    expect(errorsOf(root, `[bobbins.hooks]\n${good.replace('bobbin = "acme.hooks"\n', "")}`)).toEqual([
      {
        key: "bobbins.hooks.bobbin",
        message: "required: the bobbin this instance runs, <vendor>.<product>",
        hint: 'did you mean bobbin = "acme.hooks"?',
      },
    ]);
  });

  test("an unknown bobbin, with a did-you-mean when the product matches", () => {
    expect(errorsOf(root, `[bobbins.h]\n${good.replace("acme.hooks", "other.hooks")}`)).toEqual([
      { key: "bobbins.h.bobbin", message: 'no bobbin "other.hooks"', hint: 'did you mean bobbin = "acme.hooks"?' },
    ]);
    expect(errorsOf(root, `[bobbins.h]\n${good.replace("acme.hooks", "nobody.nothing")}`)[0]).toMatchObject({
      message: 'no bobbin "nobody.nothing"',
      hint: expect.stringContaining("hookspool bobbin list"),
    });
  });

  test("a required setting or secret left out", () => {
    expect(
      errorsOf(root, `[bobbins.h]\n${good.replace('settings = { callback_url = "https://h.example.net/x" }\n', "")}`),
    ).toMatchObject([
      { key: "bobbins.h.settings.callback_url", message: "required by acme.hooks: the URL the sender signs" },
    ]);
    expect(errorsOf(root, `[bobbins.h]\n${good.replace(`${SECRET}\n`, "")}`)).toMatchObject([
      { key: "bobbins.h.secrets.secret", message: "required by acme.hooks: the signing secret" },
    ]);
  });

  test("a setting of the wrong type, a setting, secret or output not in the manifest", () => {
    expect(
      errorsOf(root, `[bobbins.h]\n${good.replace('callback_url = "https://h.example.net/x"', "callback_url = 3")}`),
    ).toMatchObject([{ key: "bobbins.h.settings.callback_url", message: "expected a string, not a number (3)" }]);
    expect(
      errorsOf(
        root,
        "[bobbins.h]\n" +
          good.replace('callback_url = "https://h.example.net/x"', 'callback_url = "https://x", colour = "red"'),
      ),
    ).toMatchObject([{ key: "bobbins.h.settings.colour", message: "acme.hooks has no setting colour" }]);
    expect(errorsOf(root, `[bobbins.h]\n${good}secrets.token = { file = "/t" }\n`)).toMatchObject([
      { key: "bobbins.h.secrets.token", message: "acme.hooks has no secret token" },
    ]);
    expect(
      errorsOf(
        root,
        "[bobbins.h]\n" +
          good.replace('outputs = { "*" = "hermes:h" }', 'outputs = { "*" = "hermes:h", push = "hermes:p" }'),
      ),
    ).toMatchObject([{ key: "bobbins.h.outputs.push", message: "acme.hooks has no output push" }]);
  });

  test("a misspelt setting, secret or output: did you mean the one it is close to", () => {
    expect(errorsOf(root, `[bobbins.h]\n${good.replace("callback_url =", "callbak_url =")}`)).toContainEqual({
      key: "bobbins.h.settings.callbak_url",
      message: "acme.hooks has no setting callbak_url",
      hint: "did you mean callback_url?",
    });
    expect(errorsOf(root, `[bobbins.h]\n${good.replace("secrets.secret", "secrets.secrt")}`)).toContainEqual({
      key: "bobbins.h.secrets.secrt",
      message: "acme.hooks has no secret secrt",
      hint: "did you mean secret?",
    });
    expect(errorsOf(root, `[bobbins.h]\n${good.replace("callback_url =", "colour =")}`)).toContainEqual({
      key: "bobbins.h.settings.colour",
      message: "acme.hooks has no setting colour",
      hint: "its settings: callback_url",
    });
  });

  test(
    "a secret by an earlier name (the manifest's aliases) is the secret by its name; both at once " + "is an error",
    () => {
      const aliased = bobbinRoot();
      writeBobbin(
        aliased,
        "acme/renamed",
        manifestText("acme.renamed", "").replace(
          /\[secrets\.secret\]\n(description = [^\n]*\n)/,
          '[secrets.secret]\n$1aliases = ["old_token"]\n',
        ),
      );
      const inst = (secrets: string) =>
        `[bobbins.r]\nbobbin = "acme.renamed"\n${secrets}\noutputs = { "*" = "hermes:r" }\n`;
      const { config } = parse(aliased, inst('secrets.old_token = { file = "/etc/hookspool/secrets/r" }'));
      expect(config.sources.r.secrets).toEqual({ secret: { file: "/etc/hookspool/secrets/r" } });
      expect(
        errorsOf(aliased, inst('secrets.old_token = { file = "/a" }\nsecrets.secret = { file = "/b" }')),
      ).toMatchObject([
        {
          key: "bobbins.r.secrets.old_token",
          message: "old_token is an earlier name of secrets.secret, which is given too",
        },
      ]);
    },
  );

  test('a list setting given as one string is that list of one (hookspool.webhook\'s key = "id")', () => {
    const text =
      `[bobbins.w]\nbobbin = "hookspool.webhook"\nsecrets.secret = { file = ` +
      `"/etc/hookspool/secrets/w" }\nsettings = { scheme = "hmac-sha256-hex", header = "X-Sig", key = ` +
      `"id", event_type = "type", ignore = "ping" }\noutputs = { "*" = "hermes:w" }\n`;
    const { config } = parseConfig(text, "/etc/hookspool/config.toml", { home: () => HOME });
    expect(config.sources.w.template).toMatchObject({ key: ["id"], ignore: ["ping"] });
    // A value of another kind is refused, and the error says what was given, cut short.
    expect(errorsOf(bobbinRoot(), text.replace('key = "id"', `key = { nested = "${"x".repeat(60)}" }`))).toMatchObject([
      { key: "bobbins.w.settings.key", message: `expected a list, not a table ({"nested":"${"x".repeat(29)}...)` },
    ]);
  });

  test("no output mapped at all", () => {
    expect(errorsOf(root, `[bobbins.h]\n${good.replace('outputs = { "*" = "hermes:h" }\n', "")}`)).toMatchObject([
      { key: "bobbins.h.outputs", message: "required: where the instance's events go" },
    ]);
  });

  test("a collision with a hand-written source or destination", () => {
    expect(errorsOf(root, `[bobbins.h]\n${good}\n[sources.h]\naction = "hermes:x"\n`)).toMatchObject([
      { key: "sources.h", message: "[bobbins.h] expands into this source; both cannot be set" },
    ]);
    const mail =
      `[bobbins.m]\nbobbin = "acme.mail"\n${SECRET}\nsecrets.cred = { file = "/c" }\n` +
      `settings = { owner = "o" }\noutputs = { scheduling = "hermes:s" }\n\n[destinations."script:m"]\n` +
      `argv = ["/bin/true"]\n`;
    expect(errorsOf(root, mail)).toMatchObject([
      { key: 'destinations."script:m"', message: "[bobbins.m] expands into this destination; both cannot be set" },
    ]);
  });

  test("an instance name that is not an identifier, and an unknown instance key", () => {
    expect(errorsOf(root, `[bobbins."my.hooks"]\n${good}`)).toMatchObject([
      { key: 'bobbins."my.hooks"', hint: 'write [bobbins.hooks] with bobbin = "my.hooks"' },
    ]);
    expect(errorsOf(root, `[bobbins.h]\n${good}colour = "red"\n`)).toMatchObject([{ key: "bobbins.h.colour" }]);
  });
});

describe("where bobbins come from", () => {
  test("a broken private bobbin: an error where an instance uses it, a warning where none does", () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/broken", manifestText("acme.broken").replace('span = "burst"', 'span = "never"'));
    const [e] = errorsOf(root, `[bobbins.b]\nbobbin = "acme.broken"\n${SECRET}\noutputs = { "*" = "hermes:b" }\n`);
    expect(e.key).toBe("bobbins.b.bobbin");
    expect(e.message).toMatch(
      /^acme\.broken cannot load: \/.*\/acme\/broken\/bobbin\.toml: source\.span: "never" is not a span preset/,
    );
    const { problems } = parse(root, "");
    expect(problems).toMatchObject([
      {
        level: "warning",
        key: "spool.bobbin_path",
        message: expect.stringContaining("acme/broken/bobbin.toml: source.span"),
      },
    ]);
  });

  test("a private bobbin may not take a built-in's name, nor one that differs only by - and _", () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"));
    writeBobbin(root, "acme/web_hooks", manifestText("acme.web-hooks"));
    writeBobbin(root, "acme/web-hooks", manifestText("acme.web-hooks"));
    // A built-in says what it was checked against.
    const shipped = manifestText("acme.hooks").replace("[provider]\n", '[provider]\nchecked = "the kit"\n');
    const builtin = { dir: "acme/hooks", files: { "bobbin.toml": shipped }, modules: {} };
    const { bobbins, problems } = findBobbins({ bobbinPath: [root], presets: ["burst"], builtins: [builtin] });
    expect([...bobbins.values()].map((b) => [b.name, b.origin])).toEqual([
      ["acme.hooks", "built-in"],
      ["acme.web-hooks", root],
    ]);
    expect(problems.map((p) => [p.file.slice(root.length), p.message])).toEqual([
      ["/acme/hooks/bobbin.toml", "acme.hooks is already the name of a bobbin (built-in)"],
      ["/acme/web_hooks/bobbin.toml", "acme.web-hooks is already the name of a bobbin (" + root + ")"],
    ]);
  });

  test("expect = true on a code bobbin whose manifest names no expectation leaves the plugin's own", async () => {
    const root = bobbinRoot();
    const plugin = join(import.meta.dir, "..", "fixtures", "routed.ts"); // expectEverySec = 600
    writeBobbin(root, "acme/coded", manifestText("acme.coded", "", 'module = "source"'), {
      "source.ts": `export { default } from ${JSON.stringify(plugin)};\n`,
    });
    const table = (expect: string) =>
      parse(root, `[bobbins.c]\nbobbin = "acme.coded"\n${SECRET}\noutputs = { "*" = "hermes:c" }\n${expect}`).config;
    const on = table("expect = true\n");
    expect(on.sources.c.expect_every_s).toBeUndefined();
    const plugins = await loadSources(on, { configDir: "/", env: {}, file: "t.toml" });
    expect(expectEvery(on, "c", plugins)).toBe(600);
    const off = table("");
    expect(expectEvery(off, "c", await loadSources(off, { configDir: "/", env: {}, file: "t.toml" }))).toBe(0);
  });

  test("a private code bobbin's source loads from its directory", async () => {
    const root = bobbinRoot();
    const plugin = join(import.meta.dir, "..", "fixtures", "routed.ts");
    writeBobbin(root, "acme/coded", manifestText("acme.coded", "", 'module = "source"'), {
      "source.ts": `export { default } from ${JSON.stringify(plugin)};\n`,
    });
    const { config } = parse(root, `[bobbins.c]\nbobbin = "acme.coded"\n${SECRET}\noutputs = { "*" = "hermes:c" }\n`);
    expect(config.sources.c.module).toBe(join(root, "acme/coded/source.ts"));
    const sources = await loadSources(config, { configDir: "/", env: {}, file: "t.toml" });
    expect(sources.get("c")?.plugin.verify).toBeFunction();
  });

  test("a manifest's dedup_window_s is the instance's default; the instance's own wins", () => {
    const root = bobbinRoot();
    writeBobbin(
      root,
      "acme/hooks",
      manifestText(
        "acme.hooks",
        "",
        'template = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "topic" }\nspan = "burst"\n' +
          "dedup_window_s = 600",
      ),
    );
    const table = (extra: string) =>
      `[bobbins.h]\nbobbin = "acme.hooks"\n${SECRET}\noutputs = { "*" = "hermes:h" }\n${extra}`;
    expect(parse(root, table("")).config.sources.h.dedup_window_s).toBe(600);
    expect(parse(root, table("dedup_window_s = 60\n")).config.sources.h.dedup_window_s).toBe(60);
  });

  test("a code source's secretParams are kept out of a stored request URL", async () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/coded", manifestText("acme.coded", "", 'module = "source"'), {
      "source.ts": 'export default { authHeaders: [], secretParams: ["sig"], verify: () => true, key: () => "k" };\n',
    });
    const { config } = parse(root, `[bobbins.c]\nbobbin = "acme.coded"\n${SECRET}\noutputs = { "*" = "hermes:c" }\n`);
    const src = (await loadSources(config, { configDir: "/", env: {}, file: "t.toml" })).get("c");
    expect(src?.secretParams).toEqual(["sig"]);
    expect(storableUrl("/hooks/c?sig=s3cret&room=a", src?.secretParams ?? [])).toBe("/hooks/c?room=a");
  });

  test(
    "source.config hands settings to a code source's withConfig; a config key it does not take is " + "an error",
    async () => {
      const root = bobbinRoot();
      const source = `export default {
  authHeaders: [],
  configKeys: ["env"],
  verify: () => true,
  key: () => "unset",
  withConfig(config) {
    return { ...this, key: () => \`env-\${config.env}\` };
  },
};
`;
      const extra = '\n[settings.env]\ndescription = "which environment"\ntype = "string"\ndefault = "sandbox"\n';
      writeBobbin(root, "acme/coded", manifestText("acme.coded", extra, 'module = "source"\nconfig = ["env"]'), {
        "source.ts": source,
      });
      const { config } = parse(
        root,
        `[bobbins.c]\nbobbin = "acme.coded"\n${SECRET}\nsettings = { env = "production" }\noutputs = { ` +
          `"*" = "hermes:c" }\n`,
      );
      expect(config.sources.c.config).toEqual({ env: "production" });
      const sources = await loadSources(config, { configDir: "/", env: {}, file: "t.toml" });
      expect(sources.get("c")?.plugin.key({}, {} as never)).toBe("env-production");
      config.sources.c.config = { env: "production", region: "eu" };
      const { problems } = await loadEverySource(config, { configDir: "/", env: {}, file: "t.toml" });
      expect(problems.map((p) => [p.key, p.message])).toEqual([
        ["sources.c.config.region", "the source takes no such setting"],
      ]);
    },
  );
});
