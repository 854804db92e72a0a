// hookspool bobbin list|show|expand: the catalogue, one manifest, and what an instance becomes.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { cli } from "../helpers/cli.ts";
import { findBobbins } from "../../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../src/config/schema.ts";
import { tempDir } from "../helpers/tmp.ts";

function home(config: string): string {
  const h = tempDir();
  writeFileSync(join(h, "config.toml"), config);
  return h;
}

const GITHUB = `[bobbins.github-ci]
bobbin = "github.repo"
secrets.secret = { file = "/etc/hookspool/secrets/github" }
outputs = { "*" = "hermes:github-ci" }
`;

describe("bobbin list", () => {
  test("the built-ins, then the private ones, with the instances that use each", async () => {
    const root = bobbinRoot();
    writeBobbin(root, "acme/hooks", manifestText("acme.hooks"));
    const h = home(`[spool]\nbobbin_path = ["${root}"]\n\n${GITHUB}`);
    const r = await cli(["--home", h, "--json", "bobbin", "list"]);
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.out) as { name: string; origin: string; instances: string[] }[];
    const builtins = [...findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.keys()];
    // Every built-in first, in name order, then the private one; the instance is named on its bobbin.
    expect(rows.map((x) => x.name)).toEqual([...builtins.sort(), "acme.hooks"]);
    expect(rows.filter((x) => x.instances.length).map((x) => [x.name, x.instances])).toEqual([
      ["github.repo", ["github-ci"]],
    ]);
    expect(rows.map((x) => x.origin)).toEqual([...builtins.map(() => "built-in"), root]);
    const human = await cli(["--home", h, "bobbin", "list"]);
    expect(human.out.split("\n")[0]).toMatch(/^BOBBIN\s+VERSION\s+ORIGIN\s+SCHEME\s+INSTANCES\s+SUMMARY$/);
    expect(human.out).toContain("github-ci");
  });

  test("--markdown is the catalogue of docs/bobbins/README.md, built-ins only", async () => {
    const h = home("");
    const r = await cli(["--home", h, "bobbin", "list", "--markdown"]);
    const lines = r.out.split("\n");
    expect(lines.slice(0, 2)).toEqual([
      "| bobbin | provider | scheme | handshake | sender retries | checked against | summary |",
      "| --- | --- | --- | --- | --- | --- | --- |",
    ]);
    const builtins = findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.size;
    expect(lines.filter((l) => l.startsWith("| `"))).toHaveLength(builtins);
    expect(lines).toContain(
      "| `atlassian.trello` | Atlassian Trello | hmac-sha1-base64-url | HEAD 200 | yes | Trello's webhooks guide " +
        "and REST API webhooks page, trello-archive/api-docs (app/templates/apis/webhooks.html) for the signature | " +
        "Trello webhooks: actions on a watched board, list, card or member |",
    );
    expect(lines.find((l) => l.startsWith("| `hookspool.webhook`"))).toContain(
      "| any scheme | per settings | per settings |",
    );
    expect(lines.find((l) => l.startsWith("| `zoom.meetings`"))).toContain("| code | see README | yes |");
    expect(lines.find((l) => l.startsWith("| `stripe.events`"))).toContain(
      "| yes | stripe-node 663942164d (src/Webhooks.ts) |",
    );
    const doc = await Bun.file(join(import.meta.dir, "..", "..", "docs", "bobbins", "README.md")).text();
    for (const row of lines.slice(2)) expect(doc).toContain(row);
  });
});

describe("bobbin list --search", () => {
  test("keeps the bobbins whose name, provider, summary or scheme holds the word, any letter case", async () => {
    const h = home("");
    const names = async (word: string) =>
      (
        JSON.parse((await cli(["--home", h, "--json", "bobbin", "list", "--search", word])).out) as { name: string }[]
      ).map((b) => b.name);
    // hookspool.webhook's checked column names Trello's guide too.
    expect(await names("TRELLO")).toEqual(["atlassian.trello", "hookspool.webhook"]);
    // By what its captures were checked against ([provider] checked).
    expect(await names("stripe-node")).toEqual(["hookspool.webhook", "stripe.events"]);
    expect(await names("sec.edgar")).toEqual(["sec.edgar"]);
    // By the provider's name, not in the bobbin's.
    expect(await names("Atlassian")).toContain("atlassian.trello");
    // By scheme: every bobbin verified that way, and only those.
    const rows = JSON.parse(
      (await cli(["--home", h, "--json", "bobbin", "list", "--search", "hmac-sha1-base64-url"])).out,
    ) as { name: string; scheme: string }[];
    expect(rows.map((r) => r.scheme)).toEqual(rows.map(() => "hmac-sha1-base64-url"));
    expect(rows.map((r) => r.name)).toContain("atlassian.trello");
  });
  test("no match exits 1 with one line", async () => {
    const h = home("");
    const r = await cli(["--home", h, "bobbin", "list", "--search", "no-such-provider"]);
    expect(r.code).toBe(1);
    expect(r.err.trim().split("\n")[0]).toContain('no bobbin matches "no-such-provider"');
  });
});

describe("bobbin show", () => {
  test("the provider's pages, secrets, settings, outputs, and whether the sender retries", async () => {
    const h = home("");
    const r = await cli(["--home", h, "bobbin", "show", "atlassian.trello"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("provider     Atlassian Trello");
    expect(r.out).toContain("webhook_docs");
    expect(r.out).toMatch(/^callback_url\s+string\s+yes/m);
    expect(r.out).toMatch(/^sender\s+retries a failed delivery$/m);
    const gh = JSON.parse((await cli(["--home", h, "--json", "bobbin", "show", "github.repo"])).out);
    expect(gh).toMatchObject({
      name: "github.repo",
      origin: "built-in",
      dir: "builtin:github/repo",
      sender_retries: false,
      secrets: { secret: { required: true } },
      outputs: { "*": {} },
      indexed: ["repository.full_name"],
    });
    const text = (await cli(["--home", h, "bobbin", "show", "github.repo"])).out;
    expect(text).toMatch(/^indexed +repository\.full_name \(migrate builds a payload index of each\)$/m);
    expect((await cli(["--home", h, "bobbin", "show", "github.nothing"])).code).toBe(1);
  });
});

describe("bobbin expand", () => {
  test("prints the tables an instance becomes, secret references as references", async () => {
    const h = home(GITHUB);
    const r = await cli(["--home", h, "bobbin", "expand", "github-ci"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("# [bobbins.github-ci] (github.repo)");
    expect(r.out).toContain("[sources.github-ci]");
    expect(r.out).toContain('action = "hermes:github-ci"');
    expect(r.out).toContain('file = "/etc/hookspool/secrets/github"');
    const doc = JSON.parse((await cli(["--home", h, "--json", "bobbin", "expand"])).out);
    expect(doc["github-ci"].sources["github-ci"].template).toMatchObject({
      scheme: "hmac-sha256-hex",
      header: "X-Hub-Signature-256",
    });
    expect((await cli(["--home", h, "bobbin", "expand", "nothing"])).code).toBe(1);
  });

  test("a processor's secret references are named, never shown twice", async () => {
    const root = bobbinRoot();
    writeBobbin(
      root,
      "acme/mail",
      manifestText(
        "acme.mail",
        '[secrets.cred]\ndescription = "c"\nprocessor = true\n[processor]\nmodule = "processor"\n',
      ),
    );
    const h = home(
      `[spool]\nbobbin_path = ["${root}"]\n[bobbins.mail]\nbobbin = "acme.mail"\nsecrets.secret = { ` +
        `file = "/s" }\nsecrets.cred = { file = "/etc/hookspool/cred.json" }\noutputs = { "*" = ` +
        `"hermes:mail" }\n`,
    );
    const doc = JSON.parse((await cli(["--home", h, "--json", "bobbin", "expand", "mail"])).out);
    expect(doc.mail.destinations["script:mail"].env.HOOKSPOOL_SECRET_REFS).toBe("cred");
  });
});
