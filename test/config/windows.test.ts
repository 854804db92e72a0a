// Per-field window inheritance: each of quiet_s, max_s, max_events, max_bytes comes
// from the route, else the source, else the source's span preset, else [coalesce].
import { describe, expect, test } from "bun:test";
import { windowFor } from "../../src/config/windows.ts";
import { clean } from "./support.ts";

describe("windowFor", () => {
  test("a source with nothing set gets [coalesce]: 0, 0, 500, 786432", () => {
    const config = clean('[sources.s]\naction = "hermes:s"\n');
    expect(windowFor(config, "s", null)).toEqual({ quiet_s: 0, max_s: 0, max_events: 500, max_bytes: 786432 });
  });

  test("one resolution takes a field from each level: route, source, span, [coalesce]", () => {
    const config = clean(
      [
        "[coalesce]\nmax_bytes = 123456",
        '[sources.github]\nspan = "mail"\nmax_events = 42\naction = "hermes:github"',
        '[[routes]]\nname = "prs"\nsource = "github"\nmatch = { class = "pr" }\nquiet_s = 7',
      ].join("\n"),
    );
    expect(windowFor(config, "github", "prs")).toEqual({
      quiet_s: 7, // route
      max_s: 120, // the mail preset
      max_events: 42, // source
      max_bytes: 123456, // [coalesce]
    });
  });

  test("the implicit route (null) skips the routes and starts at the source", () => {
    const config = clean(
      '[sources.github]\nspan = "mail"\nmax_events = 42\n[[routes]]\nname = "prs"\nsource = "github"\nquiet_s = 7\n',
    );
    expect(windowFor(config, "github", null)).toEqual({ quiet_s: 30, max_s: 120, max_events: 42, max_bytes: 786432 });
  });

  test("one route's values never reach another route of the same source", () => {
    const config = clean(
      '[sources.s]\n[[routes]]\nname = "a"\nsource = "s"\nmax_s = 999\n[[routes]]\nname = "b"\nsource = "s"\n',
    );
    expect(windowFor(config, "s", "b").max_s).toBe(0);
    expect(windowFor(config, "s", "a").max_s).toBe(999);
  });

  test("a source value wins over its span for the same field", () => {
    const config = clean('[sources.s]\nspan = "burst"\nquiet_s = 5\n');
    expect(windowFor(config, "s", null)).toMatchObject({ quiet_s: 5, max_s: 600 });
  });

  test("0 is a value, not 'unset': a route quiet_s = 0 overrides the source's 30", () => {
    const config = clean(
      '[sources.s]\nquiet_s = 30\nmax_s = 60\n[[routes]]\nname = "now"\nsource = "s"\nquiet_s = 0\n',
    );
    expect(windowFor(config, "s", "now")).toMatchObject({ quiet_s: 0, max_s: 60 });
  });

  test("the immediate preset's zeros override [coalesce]", () => {
    const config = clean('[coalesce]\nquiet_s = 10\nmax_s = 20\n[sources.s]\nspan = "immediate"\n');
    expect(windowFor(config, "s", null)).toMatchObject({ quiet_s: 0, max_s: 0 });
  });

  test("a preset sets quiet_s and max_s only; the size bounds still come from [coalesce]", () => {
    const config = clean('[coalesce]\nmax_events = 50\nmax_bytes = 4096\n[sources.s]\nspan = "meeting"\n');
    expect(windowFor(config, "s", null)).toEqual({ quiet_s: 60, max_s: 900, max_events: 50, max_bytes: 4096 });
  });

  test("a user-added span is used like a preset", () => {
    const config = clean('[spans]\nnightly = { quiet_s = 600, max_s = 3600 }\n[sources.s]\nspan = "nightly"\n');
    expect(windowFor(config, "s", null)).toMatchObject({ quiet_s: 600, max_s: 3600 });
  });

  test("the plugin's span is used when config names none", () => {
    const config = clean("[sources.github]\n");
    expect(windowFor(config, "github", null, "burst")).toMatchObject({ quiet_s: 120, max_s: 600 });
  });

  test("a span in config wins over the plugin's span", () => {
    const config = clean('[sources.github]\nspan = "sync"\n');
    expect(windowFor(config, "github", null, "burst")).toMatchObject({ quiet_s: 60, max_s: 300 });
  });

  test("with the plugin's span, route and source fields still win per field", () => {
    const config = clean('[sources.github]\nmax_s = 900\n[[routes]]\nname = "ci"\nsource = "github"\nquiet_s = 15\n');
    expect(windowFor(config, "github", "ci", "burst")).toEqual({
      quiet_s: 15,
      max_s: 900,
      max_events: 500,
      max_bytes: 786432,
    });
  });

  test("a source that is not in config (a plugin-only source) gets its plugin span and [coalesce]", () => {
    const config = clean("");
    expect(windowFor(config, "unlisted", null, "calendar")).toEqual({
      quiet_s: 45,
      max_s: 180,
      max_events: 500,
      max_bytes: 786432,
    });
  });

  test("the result is a fresh object: changing it leaves [coalesce] alone", () => {
    const config = clean("");
    windowFor(config, "s", null).max_events = 1;
    expect(config.coalesce.max_events).toBe(500);
  });
});
