// The load-time rules of validate.ts: what makes a config unusable is an error, the rest a
// warning that `hookspool check` (strict) escalates.
import { describe, expect, test } from "bun:test";
import { ConfigError } from "../../src/config/load.ts";
import type { ConfigProblem } from "../../src/config/types.ts";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { clean, parse, thrownBy } from "./support.ts";

const GITHUB = '[sources.github]\naction = "hermes:github"\n';

function route(fields: Record<string, string>): string {
  return `[[routes]]\n${Object.entries(fields)
    .map(([k, v]) => `${k} = ${v}`)
    .join("\n")}\n`;
}

/** The problems of a text that must fail to load. */
function errorsOf(text: string): ConfigProblem[] {
  return thrownBy(ConfigError, () => parse(text)).problems;
}

function keysOf(problems: ConfigProblem[]): string[] {
  return problems.map((p) => p.key);
}

describe("routes", () => {
  test("a route name used twice is an error at the second one", () => {
    const text = GITHUB + route({ name: '"ci"', source: '"github"' }) + route({ name: '"ci"', source: '"github"' });
    const [p, ...rest] = errorsOf(text);
    expect(rest).toEqual([]);
    expect(p).toMatchObject({ level: "error", key: "routes[1].name", message: 'route "ci" is defined twice' });
  });

  test("a route named after a source collides with that source's implicit route", () => {
    const [p] = errorsOf(GITHUB + route({ name: '"github"', source: '"github"' }));
    expect(p.key).toBe("routes[0].name");
    expect(p.message).toContain("implicit route");
  });

  test("a route whose source is not defined is an error", () => {
    const [p] = errorsOf(GITHUB + route({ name: '"r"', source: '"gitlab"' }));
    expect(p).toMatchObject({ key: "routes[0].source", message: 'no source "gitlab"' });
  });

  test("a route may take events from a bobbin instance", () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"));
    const instance =
      `[spool]\nbobbin_path = ["${root}"]\n[bobbins.hooks]\nbobbin = "acme.hooks"\n` +
      `secrets.secret = { file = "/s" }\noutputs = { "*" = "hermes:hooks" }\n`;
    const { config, problems } = parse(
      instance + route({ name: '"m"', source: '"hooks"', destination: '"hermes:mail"' }),
    );
    expect(config.routes[0].source).toBe("hooks");
    expect(problems).toEqual([]);
  });

  test("a tee route without a destination is an error", () => {
    const [p] = errorsOf(GITHUB + route({ name: '"audit"', source: '"github"', tee: "true" }));
    expect(p).toMatchObject({ key: "routes[0].destination", message: "a tee route needs a destination" });
  });

  test("a tee route with a destination, and a plain route without one, are fine", () => {
    const config = clean(
      GITHUB +
        route({ name: '"audit"', source: '"github"', tee: "true", destination: '"hermes:audit"' }) +
        route({ name: '"slow"', source: '"github"', quiet_s: "30", max_s: "60" }),
    );
    expect(config.routes.map((r) => [r.name, r.tee, r.destination])).toEqual([
      ["audit", true, "hermes:audit"],
      ["slow", false, undefined],
    ]);
  });

  test("a route to the reserved quarantine destination is reported, and refused by check", () => {
    const text = GITHUB + route({ name: '"q"', source: '"github"', destination: '"quarantine"' });
    const { problems } = parse(text);
    expect(problems).toEqual([
      {
        level: "warning",
        key: "routes[0].destination",
        message: 'destination "quarantine": quarantine is reserved and never delivers',
        hint: undefined,
      },
    ]);
    expect(thrownBy(ConfigError, () => parse(text, true)).key).toBe("routes[0].destination");
  });

  test("a route to a script destination with no table is reported", () => {
    const { problems } = parse(GITHUB + route({ name: '"r"', source: '"github"', destination: '"script:missing"' }));
    expect(problems.map((p) => [p.level, p.key])).toEqual([["warning", "routes[0].destination"]]);
    expect(problems[0].message).toContain('[destinations."script:missing"]');
  });
});

describe("sources", () => {
  test("keep_headers naming an auth header is an error, whatever the case", () => {
    const text =
      '[sources.github]\nauth_headers = ["X-Hub-Signature-256"]\nkeep_headers = ["X-GitHub-Event", ' +
      '"x-hub-signature-256"]\n';
    const [p] = errorsOf(text);
    expect(p).toMatchObject({
      key: "sources.github.keep_headers",
      message: "x-hub-signature-256 is an auth header and is never stored",
    });
  });

  test("a span that is not a preset is an error listing the presets", () => {
    const [p] = errorsOf('[sources.github]\nspan = "bursty"\n');
    expect(p).toMatchObject({ key: "sources.github.span", message: 'no span preset "bursty"' });
    expect(p.hint).toContain("burst");
  });

  test.each(["toString", "constructor", "hasOwnProperty"])(
    "span = %j (an Object.prototype name) is not a preset",
    (name) => {
      const [p] = errorsOf(`[sources.github]\nspan = "${name}"\n`);
      expect(p.key).toBe("sources.github.span");
    },
  );

  test("a user-added span may be named by a source", () => {
    expect(
      clean('[spans]\nnightly = { quiet_s = 600, max_s = 3600 }\n[sources.feed]\nspan = "nightly"\n').sources.feed.span,
    ).toBe("nightly");
  });

  test("module and template together are an error", () => {
    const [p] = errorsOf('[sources.s]\nmodule = "./s.ts"\ntemplate = { scheme = "static-token" }\n');
    expect(p).toMatchObject({ key: "sources.s", message: "set module or template, not both" });
  });

  test("a source name that cannot be a URL path segment is an error", () => {
    const [p] = errorsOf('[sources."git hub"]\naction = "hermes:x"\n');
    expect(p.key).toBe('sources."git hub"');
  });

  test("an action that names no usable destination is reported", () => {
    const { problems } = parse('[sources.s]\naction = "mystery"\n');
    expect(problems.map((p) => [p.level, p.key])).toEqual([["warning", "sources.s.action"]]);
  });

  test("a dedup window longer than delivered retention is reported", () => {
    const { problems } = parse("[retention]\ndelivered_days = 1\n[sources.s]\ndedup_window_s = 172800\n");
    expect(problems.map((p) => [p.level, p.key])).toEqual([["warning", "sources.s.dedup_window_s"]]);
  });
});

describe("quiet_s > max_s", () => {
  test("on a source is a warning (the quiet window can never fire)", () => {
    const { problems } = parse("[sources.s]\nquiet_s = 300\nmax_s = 60\n");
    expect(problems).toEqual([
      {
        level: "warning",
        key: "sources.s",
        message: "quiet_s (300) > max_s (60): the quiet window can never fire",
        hint: undefined,
      },
    ]);
  });

  test("is judged on the inherited values: a source max_s under its span's quiet_s", () => {
    const { problems } = parse('[sources.s]\nspan = "burst"\nmax_s = 60\n');
    expect(problems.map((p) => [p.key, p.message])).toEqual([
      ["sources.s", "quiet_s (120) > max_s (60): the quiet window can never fire"],
    ]);
  });

  test("a quiet_s with max_s left at its default 0 is reported (max_s = 0 seals at once)", () => {
    const { problems } = parse("[sources.s]\nquiet_s = 30\n");
    expect(problems.map((p) => [p.key, p.message])).toEqual([
      ["sources.s", "quiet_s (30) > max_s (0): the quiet window can never fire"],
    ]);
  });

  test("on a route it follows route -> source -> span: a route max_s under the source's quiet window", () => {
    const text =
      '[sources.s]\nspan = "burst"\naction = "hermes:s"\n' + route({ name: '"r"', source: '"s"', max_s: "60" });
    const { problems } = parse(text);
    expect(problems.map((p) => [p.key, p.message])).toEqual([
      ["routes[0]", "quiet_s (120) > max_s (60): the quiet window can never fire"],
    ]);
  });

  test("a route that fixes its source's bad window is not reported for it", () => {
    const text =
      '[sources.s]\nquiet_s = 300\nmax_s = 60\naction = "hermes:s"\n' +
      route({ name: '"r"', source: '"s"', max_s: "600" });
    expect(keysOf(parse(text).problems)).toEqual(["sources.s"]);
  });

  test("a route that sets no window field is not reported again for its source's window", () => {
    const text =
      '[sources.s]\nquiet_s = 300\nmax_s = 60\naction = "hermes:s"\n' +
      route({ name: '"r"', source: '"s"', max_events: "10" });
    expect(keysOf(parse(text).problems)).toEqual(["sources.s"]);
  });

  test("equal values, and the default (0, 0) window, are fine", () => {
    expect(clean("[sources.a]\nquiet_s = 60\nmax_s = 60\n[sources.b]\n").sources.a.quiet_s).toBe(60);
  });

  test("is an error with strict: true", () => {
    expect(thrownBy(ConfigError, () => parse("[sources.s]\nquiet_s = 300\nmax_s = 60\n", true)).key).toBe("sources.s");
  });
});

describe("destinations", () => {
  test("a [destinations.quarantine] table is an error: the name is reserved", () => {
    const [p] = errorsOf('[destinations.quarantine]\ntype = "http"\nurl = "https://example.invalid/q"\n');
    expect(p).toMatchObject({ key: "destinations.quarantine", message: "quarantine is a reserved destination name" });
  });

  test("a script destination without argv is an error", () => {
    const [p] = errorsOf('[destinations."script:refresh"]\ntimeout_s = 30\n');
    expect(p).toMatchObject({ key: 'destinations."script:refresh".argv', message: "a script destination needs argv" });
  });

  test("a script destination with an empty argv is an error", () => {
    const [p] = errorsOf('[destinations."script:refresh"]\nargv = []\n');
    expect(p).toMatchObject({ key: 'destinations."script:refresh".argv', message: "argv is empty" });
  });

  test("a script destination may run a processor instead of argv, but not both", () => {
    expect(clean('[destinations."script:gmail"]\nprocessor = "gmail"\n').destinations["script:gmail"].processor).toBe(
      "gmail",
    );
    const [p] = errorsOf('[destinations."script:gmail"]\nprocessor = "gmail"\nargv = ["/bin/true"]\n');
    expect(p.message).toBe("set argv or processor, not both");
  });

  test("a hermes: or script: name cannot take another type", () => {
    const [p] = errorsOf('[destinations."hermes:ci"]\ntype = "script"\n');
    expect(p).toMatchObject({
      key: 'destinations."hermes:ci".type',
      message: 'a hermes: destination cannot have type = "script"',
    });
  });

  test("a table whose type cannot be told is an error", () => {
    const [p] = errorsOf("[destinations.mystery]\ntimeout_s = 5\n");
    expect(p.key).toBe("destinations.mystery");
    expect(p.message).toBe("cannot tell the destination's type");
  });

  test("an http destination needs a url", () => {
    const [p] = errorsOf('[destinations.audit]\ntype = "http"\n');
    expect(p).toMatchObject({ key: "destinations.audit.url", message: "an http destination needs url" });
  });

  test("an http:// url is refused without allow_insecure", () => {
    const [p] = errorsOf('[destinations.audit]\ntype = "http"\nurl = "http://10.0.0.5/hook"\n');
    expect(p).toMatchObject({
      key: "destinations.audit.url",
      message: "http:// needs allow_insecure = true",
      hint: "use https://",
    });
  });

  test("allow_insecure = true allows an http:// url", () => {
    const config = clean('[destinations.audit]\ntype = "http"\nurl = "http://10.0.0.5/hook"\nallow_insecure = true\n');
    expect(config.destinations.audit.url).toBe("http://10.0.0.5/hook");
  });

  test("an https:// url needs nothing more, and its type is inferred from url", () => {
    expect(clean('[destinations.audit]\nurl = "https://example.invalid/h"\n').destinations.audit.allow_insecure).toBe(
      false,
    );
  });

  test("a url that is not http(s) is an error even with allow_insecure", () => {
    const [p] = errorsOf(
      '[destinations.audit]\ntype = "http"\nurl = "ftp://example.invalid/h"\nallow_insecure = true\n',
    );
    expect(p).toMatchObject({ key: "destinations.audit.url", message: "expected an http(s) URL" });
  });

  test("large is refused on a destination that is not http, in one problem at its key", () => {
    const cases: [string, string, string][] = [
      ['"hermes:ci"', "", "hermes"],
      ['"script:log"', 'argv = ["true"]\n', "script"],
      ["audit", 'type = "script"\nargv = ["true"]\n', "script"],
    ];
    for (const [name, rest, type] of cases) {
      const problems = errorsOf(`[destinations.${name}]\n${rest}large = "reference"\n`);
      expect(problems, `${name}: ${JSON.stringify(problems)}`).toHaveLength(1);
      expect(problems[0]).toMatchObject({
        level: "error",
        key: `destinations.${name}.large`,
        message: `large applies only to an http destination, not a ${type} one`,
      });
      expect(problems[0].message).not.toContain("\n");
    }
    const http = clean('[destinations.audit]\nurl = "https://example.invalid/h"\nlarge = "refuse"\n').destinations
      .audit;
    expect(http.large).toBe("refuse");
  });

  test("script env names must match ^[A-Z][A-Z0-9_]*$", () => {
    const problems = errorsOf(
      '[destinations."script:x"]\nargv = ["/bin/true"]\nenv = { lower = "1", "9LIVES" = "2", ' +
        '"WITH-DASH" = "3", GOOD_NAME_2 = "4" }\n',
    );
    expect(keysOf(problems)).toEqual([
      'destinations."script:x".env.lower',
      'destinations."script:x".env.9LIVES',
      'destinations."script:x".env.WITH-DASH',
    ]);
    expect(problems[0].message).toBe("environment names match ^[A-Z][A-Z0-9_]*$");
  });

  test("script env may not set HOOKSPOOL_* variables", () => {
    const [p] = errorsOf('[destinations."script:x"]\nargv = ["/bin/true"]\nenv = { HOOKSPOOL_BATCH_ID = "1" }\n');
    expect(p).toMatchObject({
      key: 'destinations."script:x".env.HOOKSPOOL_BATCH_ID',
      message: "HOOKSPOOL_* variables are set by hookspool, not by config",
    });
  });

  test("a well-formed script env loads", () => {
    expect(
      clean('[destinations."script:x"]\nargv = ["/bin/true"]\nenv = { TZ = "UTC", API_BASE = "https://x" }\n')
        .destinations["script:x"].env,
    ).toEqual({ TZ: "UTC", API_BASE: "https://x" });
  });
});

describe("awaited outcomes and run budgets", () => {
  const dest = (lines: string) => `${GITHUB}[destinations."hermes:github"]\n${lines}\n`;

  test("outcome = await with its timeout and on_timeout, and budgets, load clean", () => {
    const config = clean(
      dest('outcome = "await"\noutcome_timeout_s = 60\non_timeout = "delivered"\nbudget = "20/h"\nkey_budget = "3/h"'),
    );
    expect(config.destinations["hermes:github"]).toMatchObject({
      outcome: "await",
      outcome_timeout_s: 60,
      on_timeout: "delivered",
      budget: "20/h",
      key_budget: "3/h",
    });
  });

  test("await with unwrap is an error at outcome: one outcome settles one delivery", () => {
    const [p] = errorsOf(dest('outcome = "await"\nunwrap = true'));
    expect(p).toMatchObject({ key: 'destinations."hermes:github".outcome' });
    expect(p.message).toContain("unwrap");
  });

  test(
    "an outcome that is neither answer nor await, an on_timeout of another word, a timeout under 1 " +
      "s: errors at their keys",
    () => {
      expect(keysOf(errorsOf(dest('outcome = "later"')))).toEqual(['destinations."hermes:github".outcome']);
      expect(keysOf(errorsOf(dest('outcome = "await"\non_timeout = "drop"')))).toEqual([
        'destinations."hermes:github".on_timeout',
      ]);
      expect(keysOf(errorsOf(dest('outcome = "await"\noutcome_timeout_s = 0')))).toEqual([
        'destinations."hermes:github".outcome_timeout_s',
      ]);
    },
  );

  test("a timeout without await is a warning: it would do nothing", () => {
    const { problems } = parse(dest("outcome_timeout_s = 60"));
    expect(problems).toMatchObject([{ level: "warning", key: 'destinations."hermes:github".outcome_timeout_s' }]);
  });

  test("a budget must be a count in a window: none, a bad unit, a bad count are errors at the key", () => {
    expect(keysOf(errorsOf(dest('budget = "none"')))).toEqual(['destinations."hermes:github".budget']);
    expect(keysOf(errorsOf(dest('key_budget = "3/fortnight"')))).toEqual(['destinations."hermes:github".key_budget']);
    expect(keysOf(errorsOf(dest('budget = "lots"')))).toEqual(['destinations."hermes:github".budget']);
  });
});
