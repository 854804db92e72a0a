// A manifest's [health] and an instance's health table: the conditions' grammar and what they
// match, each mistake in the section reported at its key, and the instance's values checked
// against the section (every arg given, none unknown, the secret given, probe_every_s at least a
// minute, api_url https or this machine).
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { conditionHolds, parseCondition } from "../../src/bobbin/manifest-health.ts";
import { parseManifest } from "../../src/bobbin/manifest.ts";
import { ConfigError, parseConfig } from "../../src/config/load.ts";
import { manifestText } from "../helpers/bobbins.ts";
import { tempDir } from "../helpers/tmp.ts";

const BASE = `${manifestText("acme.hooks")}\n[secrets.tok]\ndescription = "t"\nrequired = false\n`;
const parse = (health: string) =>
  parseManifest(`${BASE}\n[health]\n${health}`, { dir: "acme/hooks", builtin: false, presets: ["burst"] });
const GOOD =
  'secret = "tok"\nurl = "https://api.acme.dev"\npath = "/hooks/{hook}"\nauth = "bearer"\n' +
  'args = { hook = "the hook" }\nhealthy = ["active=true"]\n';

describe("conditions", () => {
  const holds = (c: string, answer: unknown) => {
    const parsed = parseCondition(c);
    if (!parsed) throw new Error(`not a condition: ${c}`);
    return conditionHolds(parsed, answer);
  };
  test("= and != over alternatives, none for a missing or null value, Nxx for a code", () => {
    expect(holds("active=true", { active: true })).toBe(true);
    expect(holds("active=true", { active: false })).toBe(false);
    expect(holds("status=enabled|paused", { status: "paused" })).toBe(true);
    expect(holds("last.code=|2xx", { last: { code: null } })).toBe(true);
    expect(holds("last.code=|2xx", {})).toBe(true);
    expect(holds("last.code=|2xx", { last: { code: 204 } })).toBe(true);
    expect(holds("last.code=|2xx", { last: { code: 502 } })).toBe(false);
    expect(holds("last.code=|2xx", { last: { code: 2000 } })).toBe(false);
    expect(holds("data.sub.id!=", { data: { sub: null } })).toBe(false);
    expect(holds("data.sub.id!=", { data: { sub: { id: "gid://x/1" } } })).toBe(true);
    expect(holds("status!=disabled", { status: "enabled" })).toBe(true);
    // An object has no text to compare: it matches no value.
    expect(holds("data=", { data: { a: 1 } })).toBe(false);
  });
  test.each(["active", "=true", "a b=c", "a..b=c"])("%s is not a condition", (c) => {
    expect(parseCondition(c)).toBeNull();
  });
});

describe("[health]", () => {
  test("a good section, with defaults", () => {
    const { manifest, problems } = parse(GOOD);
    expect(problems).toEqual([]);
    expect(manifest?.health).toEqual({
      secret: "tok",
      url: "https://api.acme.dev",
      method: "GET",
      path: "/hooks/{hook}",
      auth: "bearer",
      headers: {},
      args: { hook: "the hook" },
      healthy: ["active=true"],
      says: [],
    });
  });

  test("a GraphQL query's own braces are not args", () => {
    const body = `body = '{"query": "query ($id: ID!) { sub(id: $id) { id } }", "variables": {"id": "{hook}"}}'\n`;
    const { problems } = parse(`${GOOD.replace('auth = "bearer"', 'auth = "bearer"\nmethod = "POST"')}${body}`);
    expect(problems).toEqual([]);
  });

  test.each([
    [GOOD.replace('secret = "tok"', 'secret = "nope"'), "health.secret"],
    [GOOD.replace("https://api.acme.dev", "http://api.acme.dev"), "health.url"],
    [GOOD.replace("https://api.acme.dev", "https://api.acme.dev/v1?x=1"), "health.url"],
    [GOOD.replace("/hooks/{hook}", "/hooks/{other}"), "health.path"],
    [GOOD.replace("/hooks/{hook}", "hooks"), "health.path"],
    [GOOD.replace('"bearer"', '"token"'), "health.auth"],
    [GOOD.replace('["active=true"]', '["active"]'), "health.healthy[0]"],
    [GOOD.replace('["active=true"]', "[]"), "health.healthy"],
    [`${GOOD}body = "{}"\n`, "health.body"],
    [`${GOOD}method = "PUT"\n`, "health.method"],
    [`${GOOD}console = "http://acme.dev/{hook}"\n`, "health.console"],
    [`${GOOD}says = ["a b"]\n`, "health.says[0]"],
    [`${GOOD}cadence = 1\n`, "health.cadence"],
    [GOOD.replace('{ hook = "the hook" }', '{ hook = "the hook", api_url = "x" }'), "health.args.api_url"],
  ])("a mistake is reported at its key (%#)", (text, key) => {
    const r = parse(text);
    expect(r.manifest).toBeNull();
    expect(r.problems.map((p) => p.key)).toContain(key);
  });
});

describe("an instance's health table", () => {
  const dir = tempDir();
  writeFileSync(join(dir, "s"), "whsec_x", { mode: 0o600 });
  const instance = (extra: string, key = true) =>
    `[destinations.a]\ntype = "http"\nurl = "http://127.0.0.1:9/"\nallow_insecure = true\nunsigned = true\n\n` +
    `[bobbins.stripe]\nbobbin = "stripe.events"\nsecrets.secret = { file = "${join(dir, "s")}" }\n` +
    (key ? `secrets.api_key = { file = "${join(dir, "s")}" }\n` : "") +
    `outputs = { "*" = "a" }\n${extra}`;
  const problems = (text: string): string[] => {
    try {
      parseConfig(text, join(dir, "config.toml"));
      return [];
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      return e.problems.map((p) => `${p.key}: ${p.message}`);
    }
  };

  test("turns the probe on, with its schedule", () => {
    const { config } = parseConfig(
      instance('health = { endpoint = "we_1" }\nprobe_every_s = 120\n'),
      join(dir, "config.toml"),
    );
    expect(config.probes?.stripe).toMatchObject({ vendor: "Stripe", args: { endpoint: "we_1" }, everyS: 120 });
    expect(config.probes?.stripe.section.path).toBe("/v1/webhook_endpoints/{endpoint}");
    expect(parseConfig(instance(""), join(dir, "config.toml")).config.probes).toBeUndefined();
  });

  test.each([
    ['health = { endpont = "we_1" }\n', "bobbins.stripe.health.endpont: stripe.events's health probe takes no endpont"],
    ["health = {}\n", "bobbins.stripe.health.endpoint: required by stripe.events's health probe"],
    ['health = { endpoint = "" }\n', "bobbins.stripe.health.endpoint: expected a non-empty string"],
    ['health = { endpoint = "we_1" }\nprobe_every_s = 10\n', "bobbins.stripe.probe_every_s: at least 60"],
    ["probe_every_s = 600\n", "bobbins.stripe.probe_every_s: no health probe to schedule"],
    [
      'health = { endpoint = "we_1", api_url = "http://api.example.com" }\n',
      "bobbins.stripe.health.api_url: expected an https URL",
    ],
  ])("%s", (extra, expected) => {
    expect(problems(instance(extra)).some((p) => p.startsWith(expected))).toBe(true);
  });

  test("the probe needs the section's secret", () => {
    expect(problems(instance('health = { endpoint = "we_1" }\n', false))).toContainEqual(
      expect.stringContaining("bobbins.stripe.secrets.api_key: the health probe needs it"),
    );
  });

  test("a bobbin without a [health] takes no health table", () => {
    const text = instance('health = { endpoint = "we_1" }\n').replace("stripe.events", "paddle.billing");
    expect(problems(text).some((p) => p.includes("paddle.billing has no health probe"))).toBe(true);
  });
});
