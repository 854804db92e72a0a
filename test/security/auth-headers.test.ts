// Auth headers are never stored: keep_headers cannot name one (a config error at load,
// at intake start and in hookspool check), quarantine strips the source's auth headers and always
// Authorization, Proxy-Authorization and Cookie, and a queued event keeps only keep_headers.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cli } from "../helpers/cli.ts";
import { startIntake } from "../helpers/intake.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { tempDir } from "../helpers/tmp.ts";

const SECRET = `auth-${SECRET_SENTINEL}`;
const ZOOMISH = join(import.meta.dir, "..", "fixtures", "zoomish.ts");

/** A home whose config.toml is `body` (with {{home}}), its secret written 0600. */
function home(body: string): string {
  const h = tempDir();
  writeFileSync(join(h, "secret"), SECRET, { mode: 0o600 });
  writeFileSync(join(h, "config.toml"), `[intake]\nlisten = "127.0.0.1:0"\n\n${body.replaceAll("{{home}}", h)}`);
  return h;
}

describe("keep_headers may not name an auth header", () => {
  const cases: { name: string; source: string }[] = [
    {
      name: "a template's signature header, in another case",
      source: `template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", prefix = "sha256=", key = "k" }
secrets.secret = { file = "{{home}}/secret" }
keep_headers = ["X-GitHub-Event", "x-hub-signature-256"]`,
    },
    {
      name: "standard-webhooks' webhook-signature",
      source: `template = { scheme = "standard-webhooks", key = "k" }
secrets.secret = { file = "{{home}}/secret" }
keep_headers = ["webhook-id", "Webhook-Signature"]`,
    },
    {
      name: "a static token's header",
      source: `template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "{{home}}/secret" }
keep_headers = ["X-TOKEN"]`,
    },
    {
      name: "a code source's authHeaders",
      source: `module = "${ZOOMISH}"
secrets.webhook_secret = { file = "{{home}}/secret" }
keep_headers = ["X-Zm-Signature"]`,
    },
    {
      name: "an auth header the config itself declares",
      source: `template = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "k" }
secrets.secret = { file = "{{home}}/secret" }
auth_headers = ["X-Api-Key"]
keep_headers = ["x-api-key"]`,
    },
  ];
  for (const c of cases) {
    test(`${c.name}: the intake refuses to start and hookspool check names the key`, async () => {
      const h = home(`[sources.src]\n${c.source}\naction = "hermes:x"\n`);
      await expect(
        startIntake(`[sources.src]\n${c.source.replaceAll("{{home}}/secret", "{{secret:s}}")}\naction = "hermes:x"\n`, {
          secrets: { s: SECRET },
        }),
      ).rejects.toThrow(/auth header/);
      const r = await cli(["--home", h, "check"]);
      expect(r.code).not.toBe(0);
      expect(r.out + r.err).toMatch(/sources\.src\.keep_headers/);
      expect(r.out + r.err).toMatch(/auth header/);
      expect(r.out + r.err).not.toContain(SECRET_SENTINEL);
    });
  }
});

describe("what is stored", () => {
  const config = `[sources.src]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "k" }
secrets.secret = { file = "{{secret:s}}" }
auth_headers = ["X-Api-Key"]
keep_headers = ["X-Event"]
action = "hermes:x"
`;
  const sig = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
  const credentials = (body: string) => ({
    "X-Sig": sig(body),
    "X-API-KEY": `key-${SECRET_SENTINEL}`,
    Authorization: `Bearer ${SECRET_SENTINEL}`,
    "Proxy-Authorization": `Basic ${SECRET_SENTINEL}`,
    cookie: `session=${SECRET_SENTINEL}`,
    "X-Event": "push",
    "X-Other": "kept in quarantine",
    "Content-Type": "application/json",
  });

  test(
    "quarantine keeps an allowlist: what the body is, who sent it, the kept headers; never a " + "credential",
    async () => {
      const t = await startIntake(config, { secrets: { s: SECRET } });
      try {
        const body = JSON.stringify({ no_k: true, note: PAYLOAD_SENTINEL });
        const res = await t.post("/hooks/src", body, {
          ...credentials(body),
          "X-Auth-Token": `tok-${SECRET_SENTINEL}`,
          "User-Agent": "sender/1",
        });
        expect(await res.json()).toEqual({ status: "quarantined" });
        const row = t.db.db
          .query(
            "SELECT e.headers FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = 'quarantine'",
          )
          .get() as { headers: string };
        // X-Auth-Token is nobody's declared auth header: an allowlist, not a blocklist, keeps it out.
        expect(Object.keys(JSON.parse(row.headers)).sort()).toEqual([
          "content-length",
          "content-type",
          "user-agent",
          "x-event",
        ]);
        expect(row.headers).not.toContain(SECRET_SENTINEL);
      } finally {
        await t.stop();
      }
    },
  );

  test("quarantine also keeps the headers a template classifies by, so a replay can classify it again", async () => {
    const t = await startIntake(
      config.replace('key = "k" }', 'key = ["header:X-Repo", "k"], event_type = "header:X-Kind" }'),
      { secrets: { s: SECRET } },
    );
    try {
      const body = JSON.stringify({ no_k: true });
      const res = await t.post("/hooks/src", body, { ...credentials(body), "X-Repo": "o/r", "X-Kind": "push" });
      expect(await res.json()).toEqual({ status: "quarantined" });
      const row = t.db.db
        .query("SELECT e.headers FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = 'quarantine'")
        .get() as { headers: string };
      expect(Object.keys(JSON.parse(row.headers)).sort()).toEqual([
        "content-length",
        "content-type",
        "user-agent",
        "x-event",
        "x-kind",
        "x-repo",
      ]);
    } finally {
      await t.stop();
    }
  });

  test("keep_headers that look like credentials are refused unless the source allows them", async () => {
    for (const header of [
      "Authorization",
      "Cookie",
      "Proxy-Authorization",
      "X-Api-Key",
      "X-Gitlab-Token",
      "X-Client-Secret",
    ]) {
      const source =
        `template = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "k" }\n` +
        `secrets.secret = { file = "{{home}}/secret" }\nkeep_headers = ["${header}"]\naction = ` +
        `"hermes:x"\n`;
      const r = await cli(["--home", home(`[sources.src]\n${source}`), "check"]);
      expect([header, r.code]).toEqual([header, 2]);
      expect(r.out).toContain(`error: sources.src.keep_headers: ${header} in keep_headers looks like a credential`);
      const allowed = await cli([
        "--home",
        home(`[sources.src]\n${source}allow_sensitive_keep_headers = true\n`),
        "check",
      ]);
      expect([header, allowed.out]).not.toEqual([header, expect.stringContaining("looks like a credential")]);
    }
  });

  test("a queued event: only keep_headers, whatever else arrived", async () => {
    const t = await startIntake(config, { secrets: { s: SECRET } });
    try {
      const body = JSON.stringify({ k: "key", note: PAYLOAD_SENTINEL });
      const res = await t.post("/hooks/src", body, credentials(body));
      expect(await res.json()).toEqual({ status: "queued" });
      const row = t.db.db.query("SELECT headers FROM events").get() as { headers: string };
      expect(JSON.parse(row.headers)).toEqual({ "X-Event": "push" });
    } finally {
      await t.stop();
    }
  });
});
