// hookspool send: every built-in template bobbin's accepted capture, re-signed now with the
// instance's configured secret, through a real `hookspool run`, is queued and delivered; its
// rejected capture, sent as captured, is refused. What send cannot sign, it says so in a line.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { parseKit } from "../../src/bobbin/captures.ts";
import { type Bobbin, findBobbins } from "../../src/bobbin/registry.ts";
import { DEFAULT_SPANS } from "../../src/config/schema.ts";
import { canSign } from "../../src/plugin/sign.ts";
import type { TemplateSettings } from "../../src/plugin/template.ts";
import { cli } from "../helpers/cli.ts";
import { type Hookspool, startHookspool } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const all = [...findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.values()];
const fixed = (b: Bobbin) => (typeof b.manifest.source?.template === "object" ? (b.manifest.source.template as unknown as TemplateSettings) : null);
// Template bobbins send can sign (a settings-template one signs by its kit's settings), without a processor.
const signable = all.filter((b) => {
  if (b.manifest.processor || b.manifest.poll || !b.manifest.source?.template) return false;
  const t = fixed(b);
  const kit = parseKit(b.files().get("captures/kit.toml") ?? "");
  return canSign(t ?? ({ scheme: String(kit.instance.settings?.scheme) } as TemplateSettings));
});

let home: string;
let hs: Hookspool;
let port: number;

beforeAll(async () => {
  home = tempDir("hookspool-send-");
  const bobbins: Record<string, unknown> = {};
  for (const b of [...signable, ...all.filter((x) => ["sendgrid.events", "zoom.meetings"].includes(x.name))]) {
    const kit = parseKit(b.files().get("captures/kit.toml") ?? "");
    const secrets: Record<string, { file: string }> = {};
    for (const [name, value] of Object.entries(kit.secrets)) {
      const file = join(home, `${kit.instance.name}-${name}`);
      writeFileSync(file, value, { mode: 0o600 });
      secrets[name] = { file };
    }
    bobbins[kit.instance.name] = { bobbin: b.name, secrets, settings: kit.instance.settings ?? {}, outputs: { "*": "script:sink" }, span: "immediate" };
  }
  writeFileSync(join(home, "follow-secret"), "follow-token", { mode: 0o600 });
  const tokened = { scheme: "static-token", header: "X-Token", key: "id" };
  // slow waits 30 s before its batch seals; doomed's destination refuses every batch for good.
  const sources = {
    slow: { template: tokened, secrets: { secret: { file: join(home, "follow-secret") } }, quiet_s: 30, max_s: 60, action: "script:sink" },
    doomed: { template: tokened, secrets: { secret: { file: join(home, "follow-secret") } }, action: "script:refuse" },
  };
  const config = {
    intake: { listen: "127.0.0.1:0" },
    dispatch: { poll_s: 0.1 },
    bobbins,
    sources,
    destinations: { "script:sink": { argv: ["/bin/sh", "-c", "cat > /dev/null"] }, "script:refuse": { argv: ["/bin/sh", "-c", "cat > /dev/null; exit 65"] } },
  };
  writeFileSync(join(home, "config.toml"), stringify(config));
  expect((await cli(["--home", home, "migrate"])).code).toBe(0);
  hs = await startHookspool(home, ["run"]);
  port = await hs.port();
}, 30_000);

afterAll(async () => {
  hs?.kill("SIGTERM");
  await hs?.exited;
});

const send = (instance: string, ...argv: string[]) => cli(["--home", home, "--json", "send", instance, "--url", `http://127.0.0.1:${port}/hooks/${instance}`, ...argv]);
/** What a refused send says, in either form (--json puts the error on stdout). */
const said = (r: { out: string; err: string }) => `${r.out}${r.err}`;
const lines = (out: string) => out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);

describe("send, for every built-in template bobbin", () => {
  test("there are many to send", () => expect(signable.length).toBeGreaterThanOrEqual(25));
  for (const b of signable) {
    test(`${b.name}: the accepted capture, signed now with the instance's secret, is queued and delivered; the rejected one is 401`, async () => {
      const instance = parseKit(b.files().get("captures/kit.toml") ?? "").instance.name;
      const ok = await send(instance, "--capture", "accepted", "--follow");
      expect({ code: ok.code, err: ok.err }).toEqual({ code: 0, err: "" });
      const [answer, ...steps] = lines(ok.out);
      const word = (answer.word as string | null) ?? (JSON.parse(String(answer.body)) as { status?: string }).status;
      expect({ status: answer.status, word }).toMatchObject({ word: "queued" });
      expect([200, 202]).toContain(answer.status as number);
      expect(steps.at(-1)).toMatchObject({ state: "delivered" });
      const bad = await send(instance, "--capture", "rejected");
      expect({ code: bad.code, status: lines(bad.out)[0]?.status }).toEqual({ code: 1, status: 401 });
    }, 20_000);
  }
});

describe("send --follow until the batch ends", () => {
  test("a batch that dies: exit 1, and it says so", async () => {
    const r = await send("doomed", "--data", '{"id":"d1"}', "--follow");
    expect(r.code).toBe(1);
    expect(lines(r.out).at(-1)).toMatchObject({ followed: "dead", state: "dead" });
    const text = await cli(["--home", home, "send", "doomed", "--url", `http://127.0.0.1:${port}/hooks/doomed`, "--data", '{"id":"d2"}', "--follow"]);
    expect(text.code).toBe(1);
    expect(text.err).toMatch(/^hookspool: batch \d+ is dead \(rejected\): hookspool show \d+ --attempts says why$/m);
  }, 20_000);

  test("a batch still on its way when --timeout runs out: exit 1, naming its state", async () => {
    const r = await cli(["--home", home, "send", "slow", "--url", `http://127.0.0.1:${port}/hooks/slow`, "--data", '{"id":"s1"}', "--follow", "--timeout", "1s"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/stopped following after 1 s: batch \d+ is still open/);
    expect((await cli(["--home", home, "send", "slow", "--timeout", "1s"])).code).toBe(2);
  }, 20_000);
});

describe("send --handshake", () => {
  const handshaking = signable.filter((b) => {
    const t = fixed(b);
    return t !== null && (t.echo_when !== undefined || t.get_verify === true || t.reply_when !== undefined || t.head_handshake === true);
  });
  test("the handshakes among them: Slack's challenge, Meta's GET verify token, Trello's HEAD", () => {
    expect(handshaking.map((b) => b.name)).toEqual(expect.arrayContaining(["slack.events", "meta.whatsapp", "atlassian.trello"]));
  });
  for (const b of handshaking) {
    test(`${b.name}: its handshake, made as its sender makes it, gets the answer the sender needs`, async () => {
      const instance = parseKit(b.files().get("captures/kit.toml") ?? "").instance.name;
      const r = await send(instance, "--handshake");
      expect({ code: r.code, line: lines(r.out)[0] }).toMatchObject({ code: 0, line: { status: 200, ok: true } });
    });
  }
  test("a source with no handshake says so", async () => {
    const r = await send("kaneo", "--handshake");
    expect(r.code).toBe(2);
    expect(said(r)).toContain("answers no handshake");
  });
});

describe("what send cannot sign", () => {
  test("a public-key scheme, a code source, a poll or unknown source, a missing capture: one line, exit 2 or 1", async () => {
    const pk = await send("sendgrid", "--capture", "accepted");
    expect(pk.code).toBe(2);
    expect(said(pk)).toContain("signed with the sender's private key");
    const code = await send("meetings");
    expect(code.code).toBe(2);
    expect(said(code)).toContain("is a code source");
    expect((await send("nope")).code).toBe(1);
    const missing = await send("kaneo", "--capture", "nothing-like-this");
    expect(missing.code).toBe(1);
    expect(said(missing)).toContain("its captures: accepted, rejected");
    expect((await send("kaneo", "--data", "{}", "--file", "x")).code).toBe(2);
  });
  test("no intake listening: exit 1 and where it tried", async () => {
    const r = await cli(["--home", home, "send", "kaneo", "--url", "http://127.0.0.1:9/hooks/kaneo"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("cannot reach the intake at http://127.0.0.1:9/hooks/kaneo");
  });
});
