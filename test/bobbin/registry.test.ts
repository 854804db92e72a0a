// The built-in registry: src/bobbin/builtins.gen.ts carries exactly the files under bobbins/,
// every built-in's manifest loads without a problem, and its captures and kit parse.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { capturesOf, parseKit, pollCapturesOf } from "../../src/bobbin/captures.ts";
import { BUILTINS } from "../../src/bobbin/builtins.gen.ts";
import { builtinModule, findBobbins } from "../../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../src/config/schema.ts";
import { generate, scanBobbins } from "../../scripts/gen-bobbins.ts";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";

const ROOT = join(import.meta.dir, "..", "..", "bobbins");

describe("the registry", () => {
  test("lists every bobbin directory and every file in it, with the same text", async () => {
    const { bobbins, problems } = scanBobbins(ROOT);
    expect(problems).toEqual([]);
    expect(BUILTINS.map((b) => b.dir)).toEqual(bobbins.map((b) => b.dir));
    for (const b of bobbins) {
      const bi = BUILTINS.find((x) => x.dir === b.dir);
      // Code is carried twice: the module, and its text for the kit's scan.
      expect(Object.keys(bi?.files ?? {}).sort()).toEqual([...b.files].sort());
      for (const f of b.files) expect(bi?.files[f]).toBe(await Bun.file(join(ROOT, b.dir, f)).text());
      expect(Object.keys(bi?.modules ?? {}).sort()).toEqual(
        b.files
          .filter((f) => f.endsWith(".ts"))
          .map((f) => f.slice(0, -3))
          .sort(),
      );
    }
  });

  test("the generator embeds text, imports code, and refuses a file the binary cannot carry", () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"), {
      "README.md": "# hi\n",
      "source.ts": "export default {};\n",
      "captures/a.http": "POST / HTTP/1.1\n",
    });
    const text = generate(root);
    // Documents and captures are embedded files, read when asked for; the manifest is held as text.
    expect(text).toContain('import f0 from "../../bobbins/acme/hooks/README.md" with { type: "file" };');
    expect(text).toContain('import f1 from "../../bobbins/acme/hooks/bobbin.toml" with { type: "text" };');
    expect(text).toContain('import f2 from "../../bobbins/acme/hooks/captures/a.http" with { type: "file" };');
    expect(text).toContain('import * as f3 from "../../bobbins/acme/hooks/source.ts";');
    // A module's text is a literal: the bundler would answer a text import of a .ts with the module.
    expect(text).toContain(
      '{ dir: "acme/hooks", files: { get "README.md"() { return readEmbedded(f0); }, "bobbin.toml": f1, ' +
        'get "captures/a.http"() { return readEmbedded(f2); }, "source.ts": "export default {};\\n" }, ' +
        'modules: { "source": f3 } },',
    );
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"), { "logo.png": "x" });
    expect(() => generate(root)).toThrow(
      "bobbins/acme/hooks/logo.png: only .toml, .md, .http, .json and .ts files are carried in the binary",
    );
  });

  test("a vendor directory holds only its bobbins: no code the products share", async () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"));
    await Bun.write(join(root, "acme", "shared.ts"), "export const x = 1;\n");
    expect(scanBobbins(root).problems).toEqual([
      "bobbins/acme/shared.ts: a vendor directory holds only its bobbins' directories",
    ]);
  });

  test("a built-in's code is found by its builtin: reference", () => {
    const mod = { default: { verify: () => true } };
    const builtins = [{ dir: "acme/hooks", files: {}, modules: { source: mod } }];
    expect(builtinModule("builtin:acme/hooks/source", builtins)).toBe(mod);
    expect(builtinModule("builtin:acme/hooks/processor", builtins)).toBeUndefined();
    expect(builtinModule("/abs/source.ts", builtins)).toBeUndefined();
  });
});

const BUILT_INS = [
  "airtable.bases",
  "asana.tasks",
  "atlassian.jira",
  "atlassian.trello",
  "bitbucket.repo",
  "box.webhooks",
  "buildkite.webhooks",
  "calcom.bookings",
  "calendly.events",
  "circleci.webhooks",
  "clerk.users",
  "clickup.webhooks",
  "coinbase.commerce",
  "discord.interactions",
  "dropbox.files",
  "gitea.repo",
  "github.repo",
  "gitlab.project",
  "google.calendar",
  "google.drive",
  "google.gmail",
  "hookspool.digest",
  "hookspool.webhook",
  "hubspot.webhooks",
  "intercom.conversations",
  "kaneo.projects",
  "lemonsqueezy.billing",
  "linear.issues",
  "meta.whatsapp",
  "mux.video",
  "notion.pages",
  "okta.events",
  "paddle.billing",
  "pagerduty.incidents",
  "paypal.webhooks",
  "plaid.items",
  "postmark.messages",
  "razorpay.webhooks",
  "resend.emails",
  "sec.edgar",
  "segment.webhooks",
  "sendgrid.events",
  "sentry.issues",
  "shopify.shop",
  "slack.events",
  "square.webhooks",
  "stripe.events",
  "telegram.bot",
  "twilio.messaging",
  "typeform.responses",
  "vercel.deployments",
  "zendesk.webhooks",
  "zoom.meetings",
];

describe("every built-in", () => {
  const { bobbins, problems } = findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) });

  test("loads without a problem", () => {
    expect(problems).toEqual([]);
    // None of these may go missing (the catalogue grows; docs/bobbins/README.md lists it whole).
    expect([...bobbins.keys()].sort()).toEqual(expect.arrayContaining(BUILT_INS));
  });

  test.each([...bobbins.keys()])(
    "%s: its kit and captures parse, with an accepted and a rejected capture (a poll bobbin: poll captures)",
    (name) => {
      const b = bobbins.get(name);
      if (!b) throw new Error(name);
      const kit = parseKit(b.files().get("captures/kit.toml") ?? "");
      expect(Object.keys(kit.secrets)).toEqual(Object.keys(b.manifest.secrets));
      const captures = capturesOf(b.files());
      if (b.manifest.poll) {
        expect(captures).toEqual([]);
        expect(pollCapturesOf(b.files()).length).toBeGreaterThan(0);
        return;
      }
      // Queued: 202, or 200 for a source that answers with its own ack (Discord, Twilio).
      expect(
        captures.some(
          (c) =>
            c.file === "captures/accepted.http" &&
            (c.expect.status === 202 || (c.expect.status === 200 && b.manifest.source?.template !== undefined)) &&
            c.expect.word === "queued",
        ),
      ).toBe(true);
      expect(captures.some((c) => c.file === "captures/rejected.http" && c.expect.status === 401)).toBe(true);
    },
  );
});
