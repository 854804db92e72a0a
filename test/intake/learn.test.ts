// A secret learned from the handshake (Asana's X-Hook-Secret, Notion's verification_token)
// through a real intake: kept in the file secrets.secret names (0600) only while the source is
// armed and only when none is kept yet; the same handshake again is answered, another one is
// refused; no secret in any log line; events then verify with the learned secret. Also: a split
// request whose array is empty (Asana's heartbeat) is acked as ignored. On both backends.
import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOG_LINES } from "../helpers/intake.ts";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";
import { cli } from "../helpers/cli.ts";
import { armSource, withArm } from "../helpers/arm.ts";

setDefaultTimeout(30_000);

let running: WorldIntake | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});
let openWorld: OpenWorld | null = null;
/** An intake over a fresh world of the backend under test (its clock at T0 on SQLite, a day ahead on PostgreSQL). */
async function startIntake(config: string): Promise<WorldIntake> {
  if (!openWorld) throw new Error("no world to open");
  running = await startIntakeOn(openWorld, config);
  return running;
}
/** The CLI over an intake's home, with the environment its config needs (spool.url's, on PostgreSQL). */
const cliOf = (s: WorldIntake, argv: string[]) => cli(argv, s.world.pgUrl ? { env: s.env } : {});

const ASANA = `[sources.asana]
${
  'template = { scheme = "hmac-sha256-hex", header = "X-Hook-Signature", ' +
  'learn = "header:X-Hook-Secret", key = "resource.gid", split = "events", dedup = "none", ' +
  'event_type = "resource.resource_type" }'
}
secrets.secret = { file = "{{home}}/asana.secret" }
action = "hermes:asana"
`;
const NOTION = `[sources.notion]
${
  'template = { scheme = "hmac-sha256-hex", header = "X-Notion-Signature", ' +
  'prefix = "sha256=", learn = "field:verification_token", key = "entity.id", dedup = "id", ' +
  'event_type = "type" }'
}
secrets.secret = { file = "{{home}}/notion.secret" }
action = "hermes:notion"
`;
const hex = (key: string, data: string) => createHmac("sha256", key).update(data).digest("hex");
const arm = (h: WorldIntake, file: string, until = h.world.t0 + 600) => armSource(join(h.home, file), until);
const HOOK_SECRET = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81";

onBothWorlds((open) => {
  beforeEach(() => {
    openWorld = open;
  });

  describe("Asana: the X-Hook-Secret handshake", () => {
    test("armed: the secret is kept (0600), echoed, the arm used up; events then verify with it", async () => {
      const s = await startIntake(ASANA);
      const token = arm(s, "asana.secret");
      const before = LOG_LINES.length;
      const r = await s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": HOOK_SECRET });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-hook-secret")).toBe(HOOK_SECRET);
      const file = join(s.home, "asana.secret");
      expect(readFileSync(file, "utf8")).toBe(`${HOOK_SECRET}\n`);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(existsSync(`${file}.armed`)).toBe(false);
      expect(LOG_LINES.slice(before).some((l) => l.includes("secret learned"))).toBe(true);
      expect(LOG_LINES.slice(before).some((l) => l.includes(HOOK_SECRET))).toBe(false);
      expect(await s.count("events")).toBe(0);

      const body = JSON.stringify({
        events: [
          { action: "changed", resource: { gid: "1201", resource_type: "task" } },
          { action: "added", resource: { gid: "1202", resource_type: "story" } },
        ],
      });
      const ok = await s.post("/hooks/asana", body, {
        "X-Hook-Signature": hex(HOOK_SECRET, body),
        "Content-Type": "application/json",
      });
      expect(ok.status).toBe(202);
      expect(await s.count("events")).toBe(2);
      const bad = await s.post("/hooks/asana", body, {
        "X-Hook-Signature": hex("not-it", body),
        "Content-Type": "application/json",
      });
      expect(bad.status).toBe(401);
      // The heartbeat: signed, with no event in it.
      const beat = JSON.stringify({ events: [] });
      const hb = await s.post("/hooks/asana", beat, {
        "X-Hook-Signature": hex(HOOK_SECRET, beat),
        "Content-Type": "application/json",
      });
      expect(hb.status).toBe(200);
      expect(await hb.json()).toEqual({ status: "ignored" });
      expect(await s.count("events")).toBe(2);
    });

    test("not armed, or armed too long ago: 403, nothing kept", async () => {
      const s = await startIntake(ASANA);
      expect((await s.post("/hooks/asana", "", { "X-Hook-Secret": HOOK_SECRET })).status).toBe(403);
      const late = arm(s, "asana.secret", s.world.t0 - 1);
      expect((await s.post(withArm("/hooks/asana", late), "", { "X-Hook-Secret": HOOK_SECRET })).status).toBe(403);
      expect(existsSync(join(s.home, "asana.secret"))).toBe(false);
      // Until a secret is learned, an event cannot be verified: the sender is asked to come back.
      const body = JSON.stringify({ events: [{ resource: { gid: "1" } }] });
      expect((await s.post("/hooks/asana", body, { "X-Hook-Signature": hex(HOOK_SECRET, body) })).status).toBe(503);
    });

    test(
      "armed, but the handshake's URL lacks the arm token (a stranger who knows only the hook URL):" +
        " 403, nothing kept, the arm still open",
      async () => {
        const s = await startIntake(ASANA);
        const token = arm(s, "asana.secret");
        expect((await s.post("/hooks/asana", "", { "X-Hook-Secret": "planted" })).status).toBe(403);
        expect((await s.post(withArm("/hooks/asana", `${token}x`), "", { "X-Hook-Secret": "planted" })).status).toBe(
          403,
        );
        expect(existsSync(join(s.home, "asana.secret"))).toBe(false);
        expect((await s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": HOOK_SECRET })).status).toBe(200);
        expect(readFileSync(join(s.home, "asana.secret"), "utf8")).toBe(`${HOOK_SECRET}\n`);
      },
    );

    test(
      "the secret file exists and is empty (as SETUP.md has it created):" +
        " the handshake is kept, 0600, and events verify",
      async () => {
        const s = await startIntake(ASANA);
        const file = join(s.home, "asana.secret");
        for (const empty of ["", "\n"]) {
          writeFileSync(file, empty, { mode: 0o644 });
          const token = arm(s, "asana.secret");
          const r = await s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": HOOK_SECRET });
          expect(r.status).toBe(200);
          expect(r.headers.get("x-hook-secret")).toBe(HOOK_SECRET);
          expect(readFileSync(file, "utf8")).toBe(`${HOOK_SECRET}\n`);
          expect(statSync(file).mode & 0o777).toBe(0o600);
          const body = JSON.stringify({
            events: [{ action: "changed", resource: { gid: "1", resource_type: "task" } }],
          });
          expect(
            (
              await s.post("/hooks/asana", body, {
                "X-Hook-Signature": hex(HOOK_SECRET, body),
                "Content-Type": "application/json",
              })
            ).status,
          ).toBe(202);
          rmSync(file);
        }
        expect(readdirSync(s.home).filter((f) => f.includes(".learning-") || f.includes(".taken-"))).toEqual([]);
      },
    );

    test("two handshakes at once on an empty file: one secret kept, the other refused", async () => {
      const s = await startIntake(ASANA);
      writeFileSync(join(s.home, "asana.secret"), "");
      const token = arm(s, "asana.secret");
      const [a, b] = await Promise.all([
        s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": "first-secret" }),
        s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": "second-secret" }),
      ]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      expect(readFileSync(join(s.home, "asana.secret"), "utf8").trim()).toBe(
        a.status === 200 ? "first-secret" : "second-secret",
      );
    });

    test("two handshakes at once: one secret kept, the other refused; no temp file left", async () => {
      const s = await startIntake(ASANA);
      const token = arm(s, "asana.secret");
      const [a, b] = await Promise.all([
        s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": "first-secret" }),
        s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": "second-secret" }),
      ]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      const kept = readFileSync(join(s.home, "asana.secret"), "utf8").trim();
      expect(kept).toBe(a.status === 200 ? "first-secret" : "second-secret");
      expect(readdirSync(s.home).filter((f) => f.includes(".learning-"))).toEqual([]);
    });

    test(
      "a kept secret stays: the same handshake is answered again," + " another is refused 409 even when armed",
      async () => {
        const s = await startIntake(ASANA);
        const token = arm(s, "asana.secret");
        expect((await s.post(withArm("/hooks/asana", token), "", { "X-Hook-Secret": HOOK_SECRET })).status).toBe(200);
        const again = await s.post("/hooks/asana", "", { "X-Hook-Secret": HOOK_SECRET });
        expect(again.status).toBe(200);
        expect(again.headers.get("x-hook-secret")).toBe(HOOK_SECRET);
        const rearmed = arm(s, "asana.secret");
        const other = await s.post(withArm("/hooks/asana", rearmed), "", { "X-Hook-Secret": "an-attackers-secret" });
        expect(other.status).toBe(409);
        expect(other.headers.get("x-hook-secret")).toBeNull();
        expect(readFileSync(join(s.home, "asana.secret"), "utf8")).toBe(`${HOOK_SECRET}\n`);
      },
    );
  });

  describe("Notion: the verification_token capture", () => {
    test("armed: the unsigned token is kept and answered 200, not queued; a signed event then verifies", async () => {
      const s = await startIntake(NOTION);
      const armToken = arm(s, "notion.secret");
      const token = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl";
      const r = await s.post(withArm("/hooks/notion", armToken), JSON.stringify({ verification_token: token }), {
        "Content-Type": "application/json",
      });
      expect(r.status).toBe(200);
      expect(readFileSync(join(s.home, "notion.secret"), "utf8")).toBe(`${token}\n`);
      expect(await s.count("events")).toBe(0);
      const body = JSON.stringify({
        id: "evt-1",
        type: "page.content_updated",
        entity: { id: "page-1", type: "page" },
      });
      const ok = await s.post("/hooks/notion", body, {
        "X-Notion-Signature": `sha256=${hex(token, body)}`,
        "Content-Type": "application/json",
      });
      expect(ok.status).toBe(202);
      // A token offered under a signature is an event like any other (and this one does not verify).
      const forged = JSON.stringify({ verification_token: "x" });
      expect(
        (
          await s.post("/hooks/notion", forged, {
            "X-Notion-Signature": "sha256=00",
            "Content-Type": "application/json",
          })
        ).status,
      ).toBe(401);
    });
  });

  describe("hookspool source arm", () => {
    test(
      "writes the arm beside the secret file; refuses a source that does not learn," +
        " or one that already keeps a secret",
      async () => {
        const s = await startIntake(
          `${ASANA}\n[sources.plain]\ntemplate = { scheme = "hmac-sha256-hex", header = "X-Sig", key = "k" }\n` +
            `secrets.secret = { file = "{{home}}/plain.secret" }\naction = "hermes:plain"\n`,
        );
        const r = await cliOf(s, ["--home", s.home, "--json", "source", "arm", "asana", "--for", "90s"]);
        expect(r.code).toBe(0);
        const doc = JSON.parse(r.out);
        expect(doc).toMatchObject({ source: "asana", secret_file: join(s.home, "asana.secret") });
        const armed = JSON.parse(readFileSync(join(s.home, "asana.secret.armed"), "utf8"));
        expect(armed.until).toBe(doc.armed_until);
        expect(doc.url_suffix).toBe(`?hookspool_arm_token=${armed.token}`);
        expect(armed.token.length).toBeGreaterThanOrEqual(16);
        expect(statSync(join(s.home, "asana.secret.armed")).mode & 0o777).toBe(0o600);
        expect((await cliOf(s, ["--home", s.home, "source", "arm", "plain"])).err).toContain(
          "does not learn its secret from a handshake",
        );
        expect((await cliOf(s, ["--home", s.home, "source", "arm", "asana", "--for", "forever"])).code).toBe(2);
        writeFileSync(join(s.home, "asana.secret"), "kept\n", { mode: 0o600 });
        const kept = await cliOf(s, ["--home", s.home, "source", "arm", "asana"]);
        expect(kept.code).toBe(1);
        expect(kept.err).toContain("already keeps a learned secret");
      },
    );
  });
});
