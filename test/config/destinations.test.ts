// Destination names, types and effective settings.
import { describe, expect, test } from "bun:test";
import { destinationProblem, destinationSettings, destinationType, QUARANTINE } from "../../src/config/destinations.ts";
import { clean } from "./support.ts";

const CONFIG = clean(
  [
    '[destinations."script:refresh"]\nargv = ["/opt/refresh"]',
    '[destinations."script:gmail"]\nprocessor = "gmail"',
    '[destinations."hermes:ci"]\nmax_inflight = 5\ntimeout_s = 12',
    '[destinations.audit]\ntype = "http"\nurl = "https://example.invalid/a"\nmax_body_bytes = 2048',
    '[destinations.inferred]\nurl = "https://example.invalid/b"',
    '[destinations.custom]\nmodule = "pkg:Sink"',
  ].join("\n"),
);

describe("destinationType", () => {
  test.each([
    ["hermes:anything", "hermes"],
    ["hermes:ci", "hermes"],
    ["script:refresh", "script"],
    ["script:gmail", "script"],
    ["audit", "http"],
    ["inferred", "http"],
    ["custom", "module"],
  ])("%s is %s", (name, type) => {
    expect(destinationType(CONFIG, name)).toBe(type as ReturnType<typeof destinationType>);
  });

  test.each([
    [QUARANTINE, "the reserved quarantine"],
    ["", "an empty name"],
    ["hermes:", "hermes: without a route"],
    ["script:undefined-here", "a script with no table"],
    ["nowhere", "a bare name with no table"],
    ["constructor", "an Object.prototype name"],
  ])("%j (%s) is no destination", (name) => {
    expect(destinationType(CONFIG, name)).toBeNull();
  });
});

describe("destinationProblem", () => {
  test("is null for a usable destination", () => {
    expect(destinationProblem(CONFIG, "hermes:ci")).toBeNull();
    expect(destinationProblem(CONFIG, "audit")).toBeNull();
  });

  test.each([
    [QUARANTINE, "quarantine is reserved and never delivers"],
    ["script:nope", 'no [destinations."script:nope"] table with argv'],
    ["hermes:", "a hermes destination needs a route name after hermes:"],
    ["nope", 'no [destinations."nope"] table (an http destination needs type = "http" and url)'],
  ])("%j: %s", (name, why) => {
    expect(destinationProblem(CONFIG, name)).toBe(why);
  });
});

describe("destinationSettings", () => {
  test("hermes: [hermes] timeout_s and max_body_bytes, two in flight", () => {
    expect(destinationSettings(CONFIG, "hermes:other")).toEqual({
      name: "hermes:other",
      type: "hermes",
      timeout_s: 30,
      max_inflight: 2,
      max_body_bytes: 1048576,
      table: undefined,
    });
  });

  test("hermes follows a changed [hermes] section", () => {
    const config = clean("[hermes]\ntimeout_s = 45\nmax_body_bytes = 4096\n");
    expect(destinationSettings(config, "hermes:x")).toMatchObject({ timeout_s: 45, max_body_bytes: 4096 });
  });

  test("a hermes table overrides per key", () => {
    expect(destinationSettings(CONFIG, "hermes:ci")).toMatchObject({
      timeout_s: 12,
      max_inflight: 5,
      max_body_bytes: 1048576,
    });
  });

  test("script: one in flight, no body cap unless configured", () => {
    expect(destinationSettings(CONFIG, "script:refresh")).toMatchObject({
      type: "script",
      timeout_s: 300,
      max_inflight: 1,
      max_body_bytes: Number.POSITIVE_INFINITY,
    });
  });

  test("http: four in flight, 1 MiB unless configured", () => {
    expect(destinationSettings(CONFIG, "inferred")).toMatchObject({
      type: "http",
      timeout_s: 30,
      max_inflight: 4,
      max_body_bytes: 1048576,
    });
    expect(destinationSettings(CONFIG, "audit")?.max_body_bytes).toBe(2048);
  });

  test("is null for a name that does not resolve", () => {
    expect(destinationSettings(CONFIG, "script:nope")).toBeNull();
    expect(destinationSettings(CONFIG, QUARANTINE)).toBeNull();
  });
});
