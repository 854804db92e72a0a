// makeDestination: names and tables to instances, with each type's defaults.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { parseConfig } from "../../src/config/load.ts";
import { HermesDestination } from "../../src/destinations/hermes.ts";
import { HttpDestination } from "../../src/destinations/http.ts";
import { checkDestinations, makeDestination } from "../../src/destinations/registry.ts";
import { ScriptDestination } from "../../src/destinations/script.ts";
import { tempDir } from "../helpers/tmp.ts";

const dir = tempDir();
const subs = join(dir, "subs.json");
writeFileSync(subs, JSON.stringify({ ci: { secret: "s", coalesce: true }, plain: { secret: "s" } }));

const { config } = parseConfig(
  `
[hermes]
subscriptions_path = "${subs}"
timeout_s = 12

[destinations.audit]
type = "http"
url = "https://example.invalid/hook"
secret = { env = "AUDIT_SECRET" }
secret_previous = { env = "OLD_SECRET" }
max_inflight = 8
headers = { "X-Team" = "ops" }

[destinations."script:log"]
argv = ["/bin/true"]
timeout_s = 5

[destinations."script:gmail"]
processor = "gmail"

[destinations."hermes:ci"]
unwrap = true
event_header = "X-GitHub-Event"
`,
  "/etc/hookspool/config.toml",
);

// The loader refuses this one; check() must still say why if a config reaches it another way.
config.destinations.insecure = {
  type: "http",
  url: "http://example.invalid/hook",
  allow_insecure: false,
  unwrap: false,
  unsigned: true,
};

const opts = { env: { AUDIT_SECRET: "a", PATH: process.env.PATH }, clock: new FakeClock(), instanceId: "inst9" };

describe("makeDestination", () => {
  test("each type with its defaults and overrides", () => {
    const ci = makeDestination(config, "hermes:ci", opts);
    expect(ci).toBeInstanceOf(HermesDestination);
    expect(ci).toMatchObject({
      name: "hermes:ci",
      type: "hermes",
      unwrap: true,
      idempotency: "per-event",
      maxInflight: 2,
      timeoutS: 12,
      maxBodyBytes: 1048576,
    });
    const plain = makeDestination(config, "hermes:plain", opts);
    expect(plain).toMatchObject({ type: "hermes", unwrap: false, idempotency: "per-attempt" });
    const audit = makeDestination(config, "audit", opts);
    expect(audit).toBeInstanceOf(HttpDestination);
    expect(audit).toMatchObject({
      type: "http",
      idempotency: "per-batch",
      maxInflight: 8,
      timeoutS: 30,
      maxBodyBytes: 1048576,
    });
    const log = makeDestination(config, "script:log", opts);
    expect(log).toBeInstanceOf(ScriptDestination);
    expect(log).toMatchObject({
      type: "script",
      idempotency: "per-batch",
      maxInflight: 1,
      timeoutS: 5,
      maxBodyBytes: Number.POSITIVE_INFINITY,
    });
  });

  test("quarantine and names that do not resolve give null", () => {
    for (const name of ["quarantine", "nope", "script:missing", "hermes:", ""])
      expect(makeDestination(config, name, opts)).toBeNull();
  });
});

describe("check()", () => {
  test("lists config and secret problems per destination", () => {
    const problems = checkDestinations(
      config,
      ["hermes:ci", "hermes:plain", "hermes:gone", "audit", "insecure", "script:log", "script:gmail", "quarantine"],
      opts,
    );
    // A processor destination runs this binary: whether its bobbin loads is config's to say.
    expect([...problems.keys()].sort()).toEqual(["audit", "hermes:gone", "insecure"]);
    expect(problems.get("audit")).toEqual(["secret_previous: secret (environment variable OLD_SECRET) is not set"]);
    expect(problems.get("insecure")).toEqual(["https required (http:// needs allow_insecure = true)"]);
    expect(problems.get("hermes:gone")?.[0]).toContain('route "gone" is not in');
  });

  test("a hermes route with coalesce fed without unwrap is a problem", () => {
    const { config: c2 } = parseConfig(`[hermes]\nsubscriptions_path = "${subs}"\n`, "/etc/hookspool/config.toml");
    expect(makeDestination(c2, "hermes:ci", opts)?.check()[0]).toContain("sets coalesce");
  });
});
