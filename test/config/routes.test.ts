// Route resolution and tee copies: where one event of a source goes.
import { describe, expect, test } from "bun:test";
import { MAX_TEES, resolveCopies, routeMatches } from "../../src/config/routes.ts";
import type { RouteConfig } from "../../src/config/types.ts";
import { HookspoolError } from "../../src/errors.ts";
import { clean, thrownBy } from "./support.ts";

const SOURCES =
  '[sources.github]\naction = "hermes:github"\nspan = "burst"\n[sources.other]\naction = "hermes:other"\n';

type R = Partial<RouteConfig> & { name: string };

/**
 * Two sources and these routes, in file order. The routes are added after loading, so the
 * resolver's own guards are tested even where `check` would refuse the config.
 */
function configWith(...rs: R[]) {
  const config = clean(SOURCES);
  config.routes = rs.map((r) => ({ source: "github", match: {}, tee: false, ...r }));
  return config;
}

/** route -> destination (tee marked), primary first. */
function where(copies: ReturnType<typeof resolveCopies>): string[] {
  return copies.map((c) => `${c.route}->${c.destination}${c.tee ? " (tee)" : ""}`);
}

describe("first match", () => {
  test("the first matching non-tee route in file order wins", () => {
    const config = configWith(
      { name: "ci-main", match: { class: "ci", branch: "main" }, destination: "hermes:ci-main" },
      { name: "ci", match: { class: "ci" }, destination: "hermes:ci" },
      { name: "prs", match: { class: "pr" }, destination: "hermes:prs" },
    );
    expect(where(resolveCopies(config, "github", { class: "ci", branch: "main" }))).toEqual([
      "ci-main->hermes:ci-main",
    ]);
    expect(where(resolveCopies(config, "github", { class: "ci", branch: "dev" }))).toEqual(["ci->hermes:ci"]);
    expect(where(resolveCopies(config, "github", { class: "pr" }))).toEqual(["prs->hermes:prs"]);
  });

  test("with no matching route, the implicit route <source> takes the source's action and window", () => {
    const config = configWith({ name: "ci", match: { class: "ci" }, destination: "hermes:ci", quiet_s: 1 });
    const [primary, ...rest] = resolveCopies(config, "github", { class: "release" });
    expect(rest).toEqual([]);
    expect(primary).toMatchObject({
      route: "github",
      destination: "hermes:github",
      tee: false,
      window: { quiet_s: 120, max_s: 600, max_events: 500, max_bytes: 786432 },
    });
    // The trace says so: the implicit route, no rule, the window from the span preset.
    expect(primary.trace).toEqual({
      stage: "implicit",
      route: "github",
      rule_index: null,
      matched: {},
      destination: "hermes:github",
      window: { quiet_s: 120, max_s: 600, from: "span" },
    });
  });

  test("a matched route carries its own window", () => {
    const config = configWith({ name: "prs", match: { class: "pr" }, destination: "hermes:prs", quiet_s: 60 });
    expect(resolveCopies(config, "github", { class: "pr" })[0].window).toEqual({
      quiet_s: 60,
      max_s: 600,
      max_events: 500,
      max_bytes: 786432,
    });
  });

  test("a route without a destination sends to the source's action, on the route's own name and window", () => {
    const config = configWith({ name: "slow", match: { class: "bulk" }, max_events: 10 });
    const [primary] = resolveCopies(config, "github", { class: "bulk" });
    expect(primary).toMatchObject({ route: "slow", destination: "hermes:github", tee: false });
    expect(primary.window.max_events).toBe(10);
  });

  test("routes of another source are never considered", () => {
    const config = configWith({ name: "other-all", source: "other", destination: "hermes:elsewhere" });
    expect(where(resolveCopies(config, "github", {}))).toEqual(["github->hermes:github"]);
  });

  test("the plugin's action is used when config sets none", () => {
    const config = clean('[sources.plain]\n[[routes]]\nname = "r"\nsource = "plain"\nmatch = { k = "x" }\n');
    expect(where(resolveCopies(config, "plain", {}, { pluginAction: "hermes:from-plugin" }))).toEqual([
      "plain->hermes:from-plugin",
    ]);
    expect(where(resolveCopies(config, "plain", { k: "x" }, { pluginAction: "hermes:from-plugin" }))).toEqual([
      "r->hermes:from-plugin",
    ]);
  });

  test("the source's config action overrides the plugin's", () => {
    const config = clean('[sources.plain]\naction = "hermes:from-config"\n');
    expect(where(resolveCopies(config, "plain", {}, { pluginAction: "hermes:from-plugin" }))).toEqual([
      "plain->hermes:from-config",
    ]);
  });

  test("the plugin's span shapes the implicit route's window when config names none", () => {
    const config = clean('[sources.plain]\naction = "hermes:p"\n');
    expect(resolveCopies(config, "plain", {}, { pluginSpan: "mail" })[0].window).toMatchObject({
      quiet_s: 30,
      max_s: 120,
    });
  });
});

describe("match", () => {
  const route = (match: RouteConfig["match"]): RouteConfig => ({ name: "r", source: "s", match, tee: false });

  test("is a subset match: extra attrs do not matter, a missing one fails", () => {
    expect(routeMatches(route({ class: "ci" }), { class: "ci", repo: "o/r", n: 3 })).toBe(true);
    expect(routeMatches(route({ class: "ci", repo: "o/r" }), { class: "ci" })).toBe(false);
  });

  test("an empty match matches every event", () => {
    expect(routeMatches(route({}), {})).toBe(true);
    expect(routeMatches(route({}), { anything: "x" })).toBe(true);
  });

  test("compares values as text", () => {
    expect(routeMatches(route({ pr: 12 }), { pr: "12" })).toBe(true);
    expect(routeMatches(route({ pr: "12" }), { pr: 12 })).toBe(true);
    expect(routeMatches(route({ draft: false }), { draft: "false" })).toBe(true);
    expect(routeMatches(route({ draft: "true" }), { draft: true })).toBe(true);
  });

  test("different text is no match, even when the numbers are equal", () => {
    expect(routeMatches(route({ v: "1.0" }), { v: 1 })).toBe(false);
    expect(routeMatches(route({ class: "CI" }), { class: "ci" })).toBe(false);
  });

  test("an attr that is null, an object or an array never matches", () => {
    expect(routeMatches(route({ a: "null" }), { a: null })).toBe(false);
    expect(routeMatches(route({ a: "[object Object]" }), { a: {} })).toBe(false);
    expect(routeMatches(route({ a: "x" }), { a: ["x"] })).toBe(false);
  });

  test("resolution uses it: a number attr picks the route written with a string", () => {
    const config = configWith({ name: "pr-12", match: { pr: "12" }, destination: "hermes:pr-12" });
    expect(where(resolveCopies(config, "github", { pr: 12 }))).toEqual(["pr-12->hermes:pr-12"]);
  });
});

describe("tees", () => {
  test("a matching tee gets a copy and does not claim the event", () => {
    const config = configWith(
      { name: "audit", match: { class: "ci" }, destination: "hermes:audit", tee: true },
      { name: "ci", match: { class: "ci" }, destination: "hermes:ci" },
    );
    expect(where(resolveCopies(config, "github", { class: "ci" }))).toEqual([
      "ci->hermes:ci",
      "audit->hermes:audit (tee)",
    ]);
  });

  test("an event that only tees match still goes to the implicit route first", () => {
    const config = configWith({ name: "audit", destination: "hermes:audit", tee: true });
    expect(where(resolveCopies(config, "github", { class: "x" }))).toEqual([
      "github->hermes:github",
      "audit->hermes:audit (tee)",
    ]);
  });

  test("every matching tee gets one copy, in file order; a tee that does not match gets none", () => {
    const config = configWith(
      { name: "t1", destination: "hermes:t1", tee: true },
      { name: "t2", match: { class: "pr" }, destination: "hermes:t2", tee: true },
      { name: "t3", destination: "hermes:t3", tee: true },
      { name: "ci", match: { class: "ci" }, destination: "hermes:ci" },
      { name: "t4", match: { class: "ci" }, destination: "hermes:t4", tee: true },
    );
    expect(where(resolveCopies(config, "github", { class: "ci" }))).toEqual([
      "ci->hermes:ci",
      "t1->hermes:t1 (tee)",
      "t3->hermes:t3 (tee)",
      "t4->hermes:t4 (tee)",
    ]);
  });

  test("a tee copy has its own route's window", () => {
    const config = configWith({ name: "audit", destination: "hermes:audit", tee: true, quiet_s: 0, max_s: 0 });
    const [primary, tee] = resolveCopies(config, "github", {});
    expect(primary.window).toMatchObject({ quiet_s: 120, max_s: 600 });
    expect(tee.window).toMatchObject({ quiet_s: 0, max_s: 0 });
  });

  test(`at most ${MAX_TEES} tee copies per event, the first ones in file order`, () => {
    expect(MAX_TEES).toBe(8);
    const tees = Array.from({ length: 10 }, (_, i) => ({ name: `t${i}`, destination: `hermes:t${i}`, tee: true }));
    const copies = resolveCopies(configWith(...tees), "github", {});
    expect(copies).toHaveLength(1 + 8);
    expect(copies.slice(1).map((c) => c.route)).toEqual(["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
  });

  test("a tee whose destination already has a copy is skipped (primary or earlier tee)", () => {
    const config = configWith(
      { name: "dup-primary", destination: "hermes:github", tee: true },
      { name: "audit", destination: "hermes:audit", tee: true },
      { name: "audit-again", destination: "hermes:audit", tee: true },
    );
    expect(where(resolveCopies(config, "github", {}))).toEqual(["github->hermes:github", "audit->hermes:audit (tee)"]);
  });

  test("a skipped tee does not use up one of the eight places", () => {
    const tees = [
      { name: "dup", destination: "hermes:github", tee: true },
      ...Array.from({ length: 8 }, (_, i) => ({ name: `t${i}`, destination: `hermes:t${i}`, tee: true })),
    ];
    const copies = resolveCopies(configWith(...tees), "github", {});
    expect(copies.map((c) => c.route)).toEqual(["github", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
  });
});

describe("destinationOverride (hookspool enqueue --destination, an emit's destination)", () => {
  /** route | destination, primary first: override routes contain "->" themselves. */
  const placed = (copies: ReturnType<typeof resolveCopies>) =>
    copies.map((c) => `${c.route} | ${c.destination}${c.tee ? " (tee)" : ""}`);

  test("a group of its own, <route>-><destination>, with the route's window; the tees still apply", () => {
    const config = configWith(
      { name: "ci", match: { class: "ci" }, destination: "hermes:ci", quiet_s: 7 },
      { name: "audit", destination: "hermes:audit", tee: true },
    );
    const copies = resolveCopies(config, "github", { class: "ci" }, { destinationOverride: "hermes:manual" });
    expect(placed(copies)).toEqual(["ci->hermes:manual | hermes:manual", "audit | hermes:audit (tee)"]);
    expect(copies[0].window).toEqual(resolveCopies(config, "github", { class: "ci" })[0].window);
    expect(copies[0].window.quiet_s).toBe(7);
    // Not matched by the route: the implicit route's group, overridden.
    expect(placed(resolveCopies(config, "github", { class: "pr" }, { destinationOverride: "hermes:manual" }))[0]).toBe(
      "github->hermes:manual | hermes:manual",
    );
  });

  test("an override to where the event goes anyway changes nothing", () => {
    const config = configWith({ name: "ci", match: { class: "ci" }, destination: "hermes:ci" });
    expect(placed(resolveCopies(config, "github", { class: "ci" }, { destinationOverride: "hermes:ci" }))).toEqual([
      "ci | hermes:ci",
    ]);
    expect(placed(resolveCopies(config, "github", {}, { destinationOverride: "hermes:github" }))).toEqual([
      "github | hermes:github",
    ]);
  });

  test("a tee to the overriding destination is skipped", () => {
    const config = configWith({ name: "audit", destination: "hermes:audit", tee: true });
    expect(placed(resolveCopies(config, "github", {}, { destinationOverride: "hermes:audit" }))).toEqual([
      "github->hermes:audit | hermes:audit",
    ]);
  });

  test("works for a source with no action at all", () => {
    const config = clean("[sources.bare]\n");
    expect(placed(resolveCopies(config, "bare", {}, { destinationOverride: "hermes:x" }))).toEqual([
      "bare->hermes:x | hermes:x",
    ]);
  });

  test("a configured route may not be named like an override group", () => {
    expect(() =>
      clean(`${SOURCES}[[routes]]\nname = "github->x"\nsource = "github"\ndestination = "hermes:x"\n`),
    ).toThrow('a route name may not contain "->"');
  });
});

describe("no destination", () => {
  test("no route, no action: an E_CONFIG error naming the source and what to set", () => {
    const config = clean("[sources.bare]\n");
    const e = thrownBy(HookspoolError, () => resolveCopies(config, "bare", {}));
    expect(e.code).toBe("E_CONFIG");
    expect(e.key).toBe("sources.bare.action");
    expect(e.message).toBe("route bare of source bare has no destination");
    expect(e.hint).toContain("action");
  });

  test("a matching route without destination on a source without action names the route", () => {
    const config = clean('[sources.bare]\n[[routes]]\nname = "slow"\nsource = "bare"\nmatch = { k = "v" }\n');
    expect(thrownBy(HookspoolError, () => resolveCopies(config, "bare", { k: "v" })).message).toBe(
      "route slow of source bare has no destination",
    );
  });

  test("a tee alone is not a destination for the event", () => {
    const config = clean(
      '[sources.bare]\n[[routes]]\nname = "audit"\nsource = "bare"\ntee = true\ndestination = "hermes:audit"\n',
    );
    expect(thrownBy(HookspoolError, () => resolveCopies(config, "bare", {})).code).toBe("E_CONFIG");
  });
});

describe("compiled once per config", () => {
  test("the rules and windows are worked out on first use; a request then only matches its attrs", () => {
    const config = configWith(
      { name: "ci", match: { class: "ci" }, destination: "hermes:ci", quiet_s: 7 },
      { name: "audit", match: {}, tee: true, destination: "hermes:audit" },
    );
    // Count every read of a rule out of config.routes (by index, as filter, find and forEach do).
    let reads = 0;
    const rules = config.routes;
    config.routes = new Proxy(rules, {
      get(target, prop, receiver) {
        if (typeof prop === "string" && /^\d+$/.test(prop)) reads++;
        return Reflect.get(target, prop, receiver);
      },
    });
    const first = resolveCopies(config, "github", { class: "ci" });
    expect(reads).toBeGreaterThan(0);
    reads = 0;
    for (let i = 0; i < 50; i++) {
      const again = resolveCopies(config, "github", i % 2 ? { class: "ci" } : { class: "pr" });
      if (i % 2) expect(again).toEqual(first);
      else expect(where(again)).toEqual(["github->hermes:github", "audit->hermes:audit (tee)"]);
    }
    expect(reads).toBe(0);
    // Each request gets its own copies: a caller changing one changes no later answer.
    first[0].window.quiet_s = 999;
    expect(resolveCopies(config, "github", { class: "ci" })[0].window.quiet_s).toBe(7);
    // A new routes list is a new configuration of routes: worked out afresh.
    config.routes = [{ name: "all", source: "github", match: {}, tee: false, destination: "hermes:all" }];
    expect(where(resolveCopies(config, "github", { class: "ci" }))).toEqual(["all->hermes:all"]);
  });
});
