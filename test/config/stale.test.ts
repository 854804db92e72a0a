// A route's stale rule, as routing fixes it in each copy's trace: a rule's own, else its source's
// (the implicit route's, a bobbin instance's for every route it makes), "off" or unset for
// none; a value that is not one of off, mark or skip is refused with its key, and so is a rule
// whose source reads no version (a template without one, a bobbin's that sets none).
import { describe, expect, test } from "bun:test";
import { resolveCopies } from "../../src/config/routes.ts";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { ConfigError, parseConfig } from "../../src/config/load.ts";
import { clean, parse, thrownBy } from "./support.ts";

const staleOf = (copies: ReturnType<typeof resolveCopies>) => copies.map((c) => [c.route, c.trace.stale ?? null]);

describe("the stale rule in the trace", () => {
  test("a rule's own, else its source's; off or unset: none", () => {
    const config = clean(
      `[sources.a]\naction = "hermes:a"\nstale = "skip"\n\n[sources.b]\naction = "hermes:b"\n\n` +
        `[[routes]]\nname = "a-marked"\nsource = "a"\nmatch = { event_type = "m" }\nstale = "mark"\n\n` +
        `[[routes]]\nname = "a-off"\nsource = "a"\nmatch = { event_type = "o" }\nstale = "off"\n\n` +
        `[[routes]]\nname = "a-inherits"\nsource = "a"\nmatch = { event_type = "i" }\n\n` +
        `[[routes]]\nname = "a-tee"\nsource = "a"\ntee = true\ndestination = "hermes:t"\nstale = "mark"\n`,
    );
    expect(staleOf(resolveCopies(config, "a", { event_type: "m" }))).toEqual([
      ["a-marked", "mark"],
      ["a-tee", "mark"],
    ]);
    expect(staleOf(resolveCopies(config, "a", { event_type: "o" }))).toEqual([
      ["a-off", null],
      ["a-tee", "mark"],
    ]);
    expect(staleOf(resolveCopies(config, "a", { event_type: "i" }))).toEqual([
      ["a-inherits", "skip"],
      ["a-tee", "mark"],
    ]);
    // The implicit route is the source's.
    expect(staleOf(resolveCopies(config, "a", { event_type: "x" }))).toEqual([
      ["a", "skip"],
      ["a-tee", "mark"],
    ]);
    expect(staleOf(resolveCopies(config, "b", { event_type: "x" }))).toEqual([["b", null]]);
  });

  test("a value other than off, mark or skip is refused at its key", () => {
    const err = thrownBy(ConfigError, () =>
      parse(`[sources.a]\naction = "hermes:a"\nstale = "drop"\n\n[[routes]]\nname = "r"\nsource = "a"\nstale = true\n`),
    );
    expect(err.problems.map((p) => p.key)).toEqual(["sources.a.stale", "routes[0].stale"]);
  });

  test("a bobbin instance's stale rule is its source's: the implicit route's and its output routes'", () => {
    const root = bobbinRoot();
    writeBobbin(
      root,
      "acme/hooks",
      manifestText(
        "acme.hooks",
        '[outputs.paid]\ndescription = "a paid order"\n',
        'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", ' +
          'event_type = "type", version = "field:at" }\nspan = "burst"\nsender_retries = false',
      ),
    );
    const { config } = parseConfig(
      `[spool]\nbobbin_path = ["${root}"]\n\n[bobbins.shop]\nbobbin = "acme.hooks"\n` +
        `secrets.secret = { file = "/etc/hookspool/secrets/s" }\n` +
        `outputs = { "*" = "hermes:all", paid = "hermes:paid" }\nstale = "mark"\n`,
      "/etc/hookspool/config.toml",
      { home: () => "/var/lib/hs-test" },
    );
    expect(config.sources.shop.stale).toBe("mark");
    expect(staleOf(resolveCopies(config, "shop", { event_type: "paid" }))).toEqual([["shop-paid", "mark"]]);
    expect(staleOf(resolveCopies(config, "shop", { event_type: "other" }))).toEqual([["shop", "mark"]]);
  });

  test("a rule whose source reads no version is refused at load, at the key the operator wrote", () => {
    const source = (template: string) =>
      `[sources.t]\ntemplate = { scheme = "static-token", header = "X-Token", key = "id"${template} }\n` +
      `secrets.secret = { env = "T" }\naction = "hermes:t"\nstale = "mark"\n\n` +
      `[[routes]]\nname = "r"\nsource = "t"\nmatch = { event_type = "x" }\nstale = "skip"\n\n` +
      `[[routes]]\nname = "plain"\nsource = "t"\nmatch = { event_type = "y" }\nstale = "off"\n`;
    const err = thrownBy(ConfigError, () => parse(source("")));
    expect(err.problems.map((p) => [p.key, p.message])).toEqual([
      ["sources.t.stale", 'stale = "mark" needs a version, and source t reads none'],
      ["routes[0].stale", 'stale = "skip" needs a version, and source t reads none'],
    ]);
    expect(parse(source(', version = "header:X-Sent-At"')).problems).toEqual([]);
    // github.repo sets no version: the instance's rule is refused at the instance's own key.
    const gh = thrownBy(ConfigError, () =>
      parse(
        `[bobbins.gh]\nbobbin = "github.repo"\nsecrets.secret = { file = "/etc/hookspool/secrets/gh" }\n` +
          `outputs = { "*" = "hermes:gh" }\nstale = "skip"\n`,
      ),
    );
    expect(gh.problems.map((p) => [p.key, p.message])).toEqual([
      ["bobbins.gh.stale", 'stale = "skip" needs a version, and source gh reads none'],
    ]);
    // stripe.events sets one.
    expect(
      parse(
        `[bobbins.stripe]\nbobbin = "stripe.events"\nsecrets.secret = { file = "/etc/hookspool/secrets/s" }\n` +
          `outputs = { "*" = "hermes:stripe" }\nstale = "mark"\n`,
      ).config.sources.stripe.stale,
    ).toBe("mark");
  });
});
