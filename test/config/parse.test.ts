// Reading config text against the schema: unknown keys, type errors with their key paths,
// invalid TOML, the dotted bobbin header, and secrets written as values.
import { describe, expect, test } from "bun:test";
import { ConfigError } from "../../src/config/load.ts";
import { clean, FILE, parse, thrownBy } from "./support.ts";

const SENTINEL = "S3NTINEL-7f2c9d41-never-print-me";

/** Everything an operator could be shown about an error. */
function allText(e: ConfigError): string {
  return [e.message, e.describe(), e.hint ?? "", String(e), JSON.stringify(e.problems)].join("\n");
}

describe("unknown keys", () => {
  test("are a warning with the key path and a did-you-mean hint, and are dropped", () => {
    const { config, problems } = parse("[dispatch]\nparalel = 8\n");
    expect(problems).toEqual([
      { level: "warning", key: "dispatch.paralel", message: "unknown key", hint: "did you mean parallel?" },
    ]);
    expect(config.dispatch.parallel).toBe(4);
    expect("paralel" in config.dispatch).toBe(false);
  });

  test.each([
    ["[dispatch.breaker]\ntrip_afer = 2\n", "dispatch.breaker.trip_afer", "did you mean trip_after?"],
    ["[dispatcher]\nparallel = 2\n", "dispatcher", "did you mean dispatch?"],
    ['[sources.github]\nactoin = "hermes:gh"\n', "sources.github.actoin", "did you mean action?"],
    [
      '[sources.s]\naction = "hermes:s"\n[[routes]]\nname = "r"\nsource = "s"\ndestinaton = "hermes:x"\n',
      "routes[0].destinaton",
      "did you mean destination?",
    ],
    [
      '[destinations."script:x"]\nargv = ["/bin/true"]\ntimeout = 5\n',
      'destinations."script:x".timeout',
      "did you mean timeout_s?",
    ],
  ])("a near miss %#: the path and the key it was meant to be", (text, key, hint) => {
    const { problems } = parse(text);
    expect(problems).toEqual([{ level: "warning", key, message: "unknown key", hint }]);
  });

  test("a key like no known key gets no hint", () => {
    const { problems } = parse("[spool]\nzzzzzzzzzz = 1\n");
    expect(problems).toHaveLength(1);
    expect(problems[0].key).toBe("spool.zzzzzzzzzz");
    expect(problems[0].hint).toBeUndefined();
  });

  test("are errors with strict: true (hookspool check), keeping the path and hint", () => {
    const e = thrownBy(ConfigError, () => parse("[dispatch]\nparalel = 8\n", true));
    expect(e.code).toBe("E_CONFIG");
    expect(e.key).toBe("dispatch.paralel");
    expect(e.hint).toBe("did you mean parallel?");
    expect(e.problems.map((p) => p.level)).toEqual(["error"]);
  });

  test("strict reports every unknown key, not just the first", () => {
    const e = thrownBy(ConfigError, () => parse("[spool]\nhom = 1\n[intake]\nlisen = 2\n", true));
    expect(e.problems.map((p) => p.key)).toEqual(["spool.hom", "intake.lisen"]);
  });

  test.each(["constructor", "toString", "__proto__", "hasOwnProperty"])(
    "a key named %s (an Object.prototype name) is an unknown key, not a crash",
    (name) => {
      const { config, problems } = parse(`[dispatch]\n${name} = 2\n`);
      expect(problems.map((p) => [p.level, p.key])).toEqual([["warning", `dispatch.${name}`]]);
      expect(config.dispatch.parallel).toBe(4);
    },
  );

  test("a table named __proto__ is refused instead of vanishing", () => {
    const e = thrownBy(ConfigError, () => parse('[sources.__proto__]\naction = "hermes:x"\n'));
    expect(e.key).toBe("sources.__proto__");
  });
});

describe("type errors", () => {
  test("are a ConfigError naming the file, the key path and what is expected", () => {
    const e = thrownBy(ConfigError, () => parse('[dispatch.breaker]\ntrip_after = "3"\n'));
    expect(e.code).toBe("E_CONFIG");
    expect(e.exitCode).toBe(2);
    expect(e.file).toBe(FILE);
    expect(e.key).toBe("dispatch.breaker.trip_after");
    expect(e.message).toBe("expected an integer, got a string");
    expect(e.describe()).toBe(`${FILE}: dispatch.breaker.trip_after: expected an integer, got a string`);
  });

  test("a match value that is not a scalar names the route by index and the attr", () => {
    const text = [
      '[sources.github]\naction = "hermes:gh"',
      '[[routes]]\nname = "ci"\nsource = "github"\nmatch = { class = "ci" }',
      '[[routes]]\nname = "prs"\nsource = "github"\nmatch = { x = [1, 2] }',
    ].join("\n");
    const e = thrownBy(ConfigError, () => parse(text));
    expect(e.key).toBe("routes[1].match.x");
    expect(e.message).toBe("expected a string, number or boolean, got an array");
  });

  test("a span that is not a string", () => {
    const e = thrownBy(ConfigError, () => parse("[sources.github]\nspan = 5\n"));
    expect(e.key).toBe("sources.github.span");
    expect(e.message).toBe("expected a string, got a number");
  });

  test.each([
    ["[dispatch]\nparallel = 0\n", "dispatch.parallel", "expected an integer >= 1, got 0"],
    ["[dispatch]\nparallel = 2.5\n", "dispatch.parallel", "expected an integer, got a number"],
    ["[dispatch]\npoll_s = -1\n", "dispatch.poll_s", "expected a number >= 0, got -1"],
    ['[spool]\nstore_raw = "yes"\n', "spool.store_raw", "expected true or false, got a string"],
    ["[spool]\nhome = 1979-05-27\n", "spool.home", "expected a string, got a date"],
    ['[alerts]\nargv = "logger"\n', "alerts.argv", "expected an array of strings, got a string"],
    [
      '[destinations.d]\ntype = "ftp"\n',
      "destinations.d.type",
      'expected one of http, hermes, script, pull, got "ftp"',
    ],
    [
      '[destinations.d]\ntype = "http"\nurl = "https://x.invalid"\nheaders = { X-N = 1 }\n',
      "destinations.d.headers.X-N",
      "expected a string, got a number",
    ],
    [
      '[destinations.d]\ntype = "http"\nurl = "https://x.invalid"\nheaders = { "x.y" = 1 }\n',
      'destinations.d.headers."x.y"',
      "expected a string, got a number",
    ],
    ['dispatch = "fast"\n', "dispatch", "expected a table, got a string"],
    ['[routes]\nname = "r"\n', "routes", "expected an array of tables ([[routes]]), got a table"],
    ['sources = { github = "x" }\n', "sources.github", "expected a table, got a string"],
  ])("%j", (text, key, message) => {
    const e = thrownBy(ConfigError, () => parse(text));
    expect({ key: e.key, message: e.message }).toEqual({ key, message });
  });

  test("a route without name or source names each missing key", () => {
    const e = thrownBy(ConfigError, () => parse('[[routes]]\ndestination = "hermes:x"\n'));
    expect(e.problems.map((p) => `${p.key}: ${p.message}`)).toEqual([
      "routes[0].name: is required",
      "routes[0].source: is required",
    ]);
  });

  test("every error of a file is reported at once, the first one as the message", () => {
    const e = thrownBy(ConfigError, () => parse('[dispatch]\nparallel = "a"\nmax_attempts = "b"\n'));
    expect(e.key).toBe("dispatch.parallel");
    expect(e.problems.map((p) => p.key)).toEqual(["dispatch.parallel", "dispatch.max_attempts"]);
  });
});

describe("invalid TOML", () => {
  test("gives the line and column, and does not echo the offending line", () => {
    const text = `[spool]\nhome = "/srv/h"\ntoken = ${SENTINEL}\n`;
    const e = thrownBy(ConfigError, () => parse(text));
    expect(e.code).toBe("E_CONFIG");
    expect(e.file).toBe(FILE);
    expect(e.key).toMatch(/^line 3, column \d+$/);
    expect(e.message).toStartWith("invalid TOML: ");
    expect(allText(e)).not.toContain(SENTINEL);
    expect(allText(e)).not.toContain("token =");
  });

  test("an unterminated string holding a secret is not echoed either", () => {
    const e = thrownBy(ConfigError, () => parse(`[spool]\nhome = "${SENTINEL}\n`));
    expect(e.key).toMatch(/^line 2, column \d+$/);
    expect(allText(e)).not.toContain(SENTINEL);
  });

  test("a key defined twice is invalid TOML at the second definition", () => {
    const e = thrownBy(ConfigError, () => parse("[dispatch]\nparallel = 1\nparallel = 2\n"));
    expect(e.key).toMatch(/^line 3, column \d+$/);
  });
});

describe("bobbin instances", () => {
  test("a dotted [bobbins.google.gmail] header is refused with the plain form to write", () => {
    const e = thrownBy(ConfigError, () => parse('[bobbins.google.gmail]\nsecrets.push_token = { file = "/etc/t" }\n'));
    expect(e.key).toBe("bobbins.google.gmail");
    expect(e.message).toContain("[bobbins.google.gmail]");
    expect(e.hint).toBe('write [bobbins.gmail] with bobbin = "google.gmail"');
    // One clear problem, not a second "bobbin is required" for the vendor table.
    expect(e.problems).toHaveLength(1);
  });

  test("an instance of a bobbin this build does not have is an error that says so", () => {
    const e = thrownBy(ConfigError, () =>
      parse('[bobbins.gmail]\nbobbin = "nobody.gmail"\nsecrets.push_token = { file = "/etc/t" }\n'),
    );
    expect(e.key).toBe("bobbins.gmail.bobbin");
    expect(e.message).toBe('no bobbin "nobody.gmail"');
    expect(e.problems).toHaveLength(1);
  });

  test("an instance without bobbin is an error", () => {
    const e = thrownBy(ConfigError, () => parse("[bobbins.gmail]\nexpect = true\n"));
    expect(e.key).toBe("bobbins.gmail.bobbin");
    expect(e.message).toBe("required: the bobbin this instance runs, <vendor>.<product>");
  });
});

describe("secret references in config", () => {
  test.each([
    ['{ file = "/etc/hookspool/secrets/audit" }', { file: "/etc/hookspool/secrets/audit" }],
    ['{ env = "AUDIT_SECRET" }', { env: "AUDIT_SECRET" }],
    [
      '{ env_file = "/etc/hookspool/audit.env", key = "SECRET" }',
      { env_file: "/etc/hookspool/audit.env", key: "SECRET" },
    ],
  ])("%s is a reference", (ref, want) => {
    const config = clean(`[destinations.audit]\ntype = "http"\nurl = "https://example.invalid/h"\nsecret = ${ref}\n`);
    expect(config.destinations.audit.secret).toEqual(want);
  });

  test("a plain string secret is a config error that never repeats the value", () => {
    const e = thrownBy(ConfigError, () =>
      parse(`[destinations.audit]\ntype = "http"\nurl = "https://example.invalid/h"\nsecret = "${SENTINEL}"\n`),
    );
    expect(e.key).toBe("destinations.audit.secret");
    expect(e.message).toContain("expected a secret reference");
    expect(e.hint).toBe("secrets are references, never values");
    expect(allText(e)).not.toContain(SENTINEL);
  });

  test("a plain string in a source's secrets table is a config error at its own key", () => {
    const e = thrownBy(ConfigError, () => parse(`[sources.github]\nsecrets.secret = "${SENTINEL}"\n`));
    expect(e.key).toBe("sources.github.secrets.secret");
    expect(allText(e)).not.toContain(SENTINEL);
  });

  test.each([
    ['{ value = "x" }', "an unknown shape"],
    ['{ file = "/a", env = "B" }', "two kinds at once"],
    ['{ env_file = "/a" }', "env_file without key"],
    ['{ file = "" }', "an empty path"],
    ["{ file = 3 }", "a number"],
  ])("%s (%s) is not a reference", (ref) => {
    const e = thrownBy(ConfigError, () => parse(`[sources.github]\nsecrets.secret = ${ref}\n`));
    expect(e.key).toBe("sources.github.secrets.secret");
  });

  test("secret_previous takes one reference or an array of them, each checked", () => {
    const base =
      '[destinations.audit]\ntype = "http"\nurl = "https://example.invalid/h"\nsecret = { file = "/s/now" }\n';
    const one = clean(`${base}secret_previous = { file = "/s/old" }\n`);
    expect(one.destinations.audit.secret_previous).toEqual({ file: "/s/old" });
    const many = clean(`${base}secret_previous = [{ file = "/s/old" }, { env = "OLDER" }]\n`);
    expect(many.destinations.audit.secret_previous).toEqual([{ file: "/s/old" }, { env: "OLDER" }]);
    const e = thrownBy(ConfigError, () => parse(`${base}secret_previous = [{ file = "/s/old" }, "${SENTINEL}"]\n`));
    expect(e.key).toBe("destinations.audit.secret_previous[1]");
    expect(allText(e)).not.toContain(SENTINEL);
  });
});
