// hookspool source test: a captured request through the plugin steps, offline.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { parseHttpCapture } from "../../src/bobbin/captures.ts";
import { cli } from "../helpers/cli.ts";
import { startIntakeIn } from "../helpers/intake.ts";
import { tempDir } from "../helpers/tmp.ts";

const SECRET = "capture-test-secret";

function home(): string {
  const h = tempDir();
  writeFileSync(join(h, "secret"), SECRET, { mode: 0o600 });
  writeFileSync(
    join(h, "config.toml"),
    `[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", prefix = "sha256=", key = ` +
      `"repository.full_name", event_type = "header:X-GitHub-Event", dedup = "header:X-GitHub-Delivery", ` +
      `ignore = "ping" }
secrets.secret = { file = "${join(h, "secret")}" }
keep_headers = ["X-GitHub-Event"]
action = "hermes:gh"

[[routes]]
name = "gh-audit"
source = "gh"
tee = true
destination = "hermes:audit"

[sources.manual]
action = "hermes:manual"
`,
  );
  return h;
}

function capture(h: string, body: string, opts: { event?: string; badSig?: boolean } = {}): string {
  const sig = opts.badSig ? "sha256=00" : `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
  const p = join(h, `cap-${Math.random()}.http`);
  writeFileSync(
    p,
    `POST /hooks/gh HTTP/1.1\nContent-Type: application/json\n` +
      `X-GitHub-Event: ${opts.event ?? "push"}\nX-GitHub-Delivery: d-1\n` +
      `X-Hub-Signature-256: ${sig}\n\n${body}\n`,
  );
  return p;
}

describe("hookspool source test", () => {
  test("its answer is the one the intake gives for the same request", async () => {
    const h = home();
    writeFileSync(
      join(h, "config.toml"),
      `[intake]\nlisten = "127.0.0.1:0"\n\n${readFileSync(join(h, "config.toml"), "utf8")}`,
    );
    const setup = openSpool(join(h, "spool.db"), { create: true });
    migrate(setup);
    setup.close();
    const t = await startIntakeIn(h);
    try {
      const good = '{"repository":{"full_name":"o/r"}}';
      const get = join(h, "get.http");
      writeFileSync(get, "GET /hooks/gh HTTP/1.1\n\n");
      const captures = [
        capture(h, good),
        capture(h, good, { badSig: true }),
        capture(h, '{"zen":"hi"}', { event: "ping" }),
        capture(h, '{"no":"repo"}'),
        get,
      ];
      for (const file of captures) {
        const offline = JSON.parse(
          (await cli(["--home", h, "--json", "source", "test", "gh", "--request", file])).out,
        ).answer;
        const c = parseHttpCapture(readFileSync(file, "utf8"));
        const res = await fetch(`${t.url}${c.url}`, {
          method: c.method,
          headers: c.headers,
          body: c.method === "POST" ? c.body : undefined,
        });
        const text = await res.text();
        const live: Record<string, unknown> = { status: res.status };
        const headers = Object.fromEntries(
          ["allow", "retry-after"].flatMap((k) =>
            res.headers.get(k) === null ? [] : [[k === "allow" ? "Allow" : "Retry-After", res.headers.get(k)]],
          ),
        );
        if (Object.keys(headers).length) live.headers = headers;
        if (text !== "") live.body = JSON.parse(text);
        expect({ file, answer: offline }).toEqual({ file, answer: live });
      }
    } finally {
      await t.stop();
    }
  });

  test("a good capture: what the intake would do, routes and tees included, and nothing written", async () => {
    const h = home();
    const r = await cli([
      "--home",
      h,
      "--json",
      "source",
      "test",
      "gh",
      "--request",
      capture(h, '{"repository":{"full_name":"o/r"}}'),
    ]);
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.out);
    expect(rep).toMatchObject({
      source: "gh",
      outcome: "classified",
      key: "o/r",
      event_type: "push",
      dedup_id: "d-1",
      kept_headers: ["X-GitHub-Event"],
      answer: { status: 202 },
    });
    expect(rep.copies.map((c: { route: string; destination: string }) => `${c.route}->${c.destination}`)).toEqual([
      "gh->hermes:gh",
      "gh-audit->hermes:audit",
    ]);
    // offline: it needs no spool at all
    expect(Bun.file(join(h, "spool.db")).size).toBe(0);
  });

  test("unverified, ignored and quarantined captures say so; failures exit non-zero", async () => {
    const h = home();
    const bad = await cli([
      "--home",
      h,
      "--json",
      "source",
      "test",
      "gh",
      "--request",
      capture(h, '{"repository":{"full_name":"o/r"}}', { badSig: true }),
    ]);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.out)).toMatchObject({ outcome: "unverified", answer: { status: 401 } });
    const ping = await cli([
      "--home",
      h,
      "--json",
      "source",
      "test",
      "gh",
      "--request",
      capture(h, '{"zen":"hi"}', { event: "ping" }),
    ]);
    expect(ping.code).toBe(0);
    expect(JSON.parse(ping.out)).toMatchObject({ outcome: "ignored", reason: "ping" });
    const broken = await cli(["--home", h, "--json", "source", "test", "gh", "--request", capture(h, '{"no":"repo"}')]);
    expect(broken.code).toBe(1);
    expect(JSON.parse(broken.out)).toMatchObject({
      outcome: "quarantine",
      error: "BadPayload",
      answer: { status: 202 },
    });
    const human = await cli([
      "--home",
      h,
      "source",
      "test",
      "gh",
      "--request",
      capture(h, '{"repository":{"full_name":"o/r"}}'),
    ]);
    expect(human.out).toContain("key");
    expect(human.out).toContain("o/r");
    expect(human.out).not.toContain(SECRET);
  });

  test("an unverified capture says why: the reason and its words", async () => {
    const h = home();
    const bad = await cli([
      "--home",
      h,
      "--json",
      "source",
      "test",
      "gh",
      "--request",
      capture(h, '{"repository":{"full_name":"o/r"}}', { badSig: true }),
    ]);
    expect(JSON.parse(bad.out)).toMatchObject({
      outcome: "unverified",
      reason: "mismatch",
      why: "the signature does not match the source's secret",
    });
    expect(JSON.parse(bad.out).hint).toBeUndefined();
    const unsigned = join(h, "unsigned.http");
    writeFileSync(
      unsigned,
      'POST /hooks/gh HTTP/1.1\nContent-Type: application/json\n\n{"repository":{"full_name":"o/r"}}\n',
    );
    const none = await cli(["--home", h, "source", "test", "gh", "--request", unsigned]);
    expect(none.code).toBe(1);
    expect(none.out).toMatch(/reason\s+missing_signature/);
    expect(none.out).toContain("the request carries no signature");
  });

  for (const [bobbin, instance] of [
    ["github.repo", "github"],
    ["stripe.events", "stripe"],
  ] as const) {
    test(
      `${bobbin}: its own capture fails on the operator's secret, says the kit signed it, and ` +
        `passes with --secret-from-kit`,
      async () => {
        const h = tempDir();
        writeFileSync(join(h, "mine"), "the-operators-real-secret", { mode: 0o600 });
        writeFileSync(
          join(h, "config.toml"),
          `[bobbins.${instance}]\nbobbin = "${bobbin}"\nsecrets.secret = { file = "${join(h, "mine")}" ` +
            `}\noutputs = { "*" = "hermes:${instance}" }\n`,
        );
        const dir = join(import.meta.dir, "../../bobbins", ...bobbin.split("."), "captures", "accepted.http");
        const mine = await cli(["--home", h, "--json", "source", "test", instance, "--request", dir]);
        expect(mine.code).toBe(1);
        const r = JSON.parse(mine.out);
        expect(r).toMatchObject({ outcome: "unverified" });
        expect(r.hint).toContain("--secret-from-kit");
        expect(r.hint).toContain("captures/kit.toml");
        const kit = await cli([
          "--home",
          h,
          "--json",
          "source",
          "test",
          instance,
          "--request",
          dir,
          "--secret-from-kit",
        ]);
        expect({ code: kit.code, err: kit.err }).toEqual({ code: 0, err: "" });
        expect(JSON.parse(kit.out)).toMatchObject({ outcome: "classified" });
        expect(kit.out).not.toContain("kit-test-secret");
      },
    );
  }

  test("--secret-from-kit on a plain source: one line, exit 2", async () => {
    const h = home();
    const r = await cli(["--home", h, "source", "test", "gh", "--request", capture(h, "{}"), "--secret-from-kit"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("--secret-from-kit needs a bobbin instance");
  });

  test("refusals: unknown source, a source without a plugin, an unreadable capture", async () => {
    const h = home();
    expect((await cli(["--home", h, "source", "test", "nope", "--request", "x.http"])).code).toBe(1);
    expect((await cli(["--home", h, "source", "test", "manual", "--request", "x.http"])).code).toBe(1);
    const missing = await cli(["--home", h, "source", "test", "gh", "--request", join(h, "missing.http")]);
    expect(missing.code).toBe(2);
    expect(missing.err.trim().split("\n")).toHaveLength(1);
  });
});

describe("hookspool intake", () => {
  test("refuses an older schema with exit 2 and 'run hookspool migrate', never migrating it", async () => {
    const h = home();
    const s = openSpool(join(h, "spool.db"), { create: true });
    migrate(s);
    s.db.run("PRAGMA user_version = 1");
    s.close();
    const r = await cli(["--home", h, "intake"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("run hookspool migrate");
    const again = openSpool(join(h, "spool.db"));
    expect((again.db.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(1);
    again.close();
  });
});
