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
import { TEMPLATE_KEYS, type TemplateSettings } from "../../src/plugin/template.ts";
import { cli } from "../helpers/cli.ts";
import { type Hookspool, startHookspool } from "../helpers/proc.ts";
import { tempDir } from "../helpers/tmp.ts";

const all = [...findBobbins({ bobbinPath: [], presets: Object.keys(DEFAULT_SPANS) }).bobbins.values()];
const fixed = (b: Bobbin) =>
  typeof b.manifest.source?.template === "object" ? (b.manifest.source.template as unknown as TemplateSettings) : null;
// Template bobbins send can sign (a settings-template one signs by its kit's settings), without a processor.
const signable = all.filter((b) => {
  if (b.manifest.processor || b.manifest.poll || !b.manifest.source?.template) return false;
  const t = fixed(b);
  const kit = parseKit(b.files().get("captures/kit.toml") ?? "");
  return canSign(t ?? ({ scheme: String(kit.instance.settings?.scheme) } as TemplateSettings));
});

/**
 * Templates whose selectors read headers, a form, split arrays, keyof, several key parts; one that ignores the sample's
 * type.
 */
const SAMPLED: Record<string, { template: Record<string, unknown>; secrets?: unknown; action: string; span: string }> =
  {
    demo: {
      template: {
        scheme: "hmac-sha256-hex",
        header: "X-Demo-Signature",
        prefix: "sha256=",
        key: "topic",
        event_type: "type",
      },
      action: "script:sink",
      span: "immediate",
    },
    headers: {
      template: {
        scheme: "static-token",
        header: "X-Token",
        key: ["header:X-Repo", "data.id"],
        event_type: "header:X-Event",
        dedup: "header:X-Delivery",
        attrs: { who: "sender.login" },
      },
      action: "script:sink",
      span: "immediate",
    },
    form: {
      template: { scheme: "static-token", header: "X-Token", body: "form", key: "team_id", event_type: "kind" },
      action: "script:sink",
      span: "immediate",
    },
    formjson: {
      template: {
        scheme: "static-token",
        header: "X-Token",
        body: "form",
        form_json: "payload",
        key: "team.id",
        event_type: "type",
      },
      action: "script:sink",
      span: "immediate",
    },
    split: {
      template: {
        scheme: "static-token",
        header: "X-Token",
        split: "events",
        key: "id|const:none",
        dedup: "id",
        event_type: "keyof:message|edited",
      },
      action: "script:sink",
      span: "immediate",
    },
    picky: {
      template: {
        scheme: "static-token",
        header: "X-Token",
        key: "id",
        event_type: "type",
        ignore: ["hookspool.test"],
      },
      action: "script:sink",
      span: "immediate",
    },
  };

let home: string;
const plain: Record<string, unknown> = {};
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
    bobbins[kit.instance.name] = {
      bobbin: b.name,
      secrets,
      settings: kit.instance.settings ?? {},
      outputs: { "*": "script:sink" },
      span: "immediate",
    };
    // The same template as a plain source: no capture to fall back on, so send samples it.
    const t = fixed(b);
    const needsSettings = Object.keys(kit.instance.settings ?? {}).some((k) =>
      (TEMPLATE_KEYS as readonly string[]).includes(k),
    );
    if (t && signable.includes(b) && !needsSettings)
      plain[`plain-${kit.instance.name}`] = { template: t, secrets, action: "script:sink", span: "immediate" };
  }
  writeFileSync(join(home, "follow-secret"), "follow-token", { mode: 0o600 });
  for (const s of Object.values(SAMPLED)) s.secrets = { secret: { file: join(home, "follow-secret") } };
  const tokened = { scheme: "static-token", header: "X-Token", key: "id" };
  // slow waits 30 s before its batch seals; doomed's destination refuses every batch for good.
  const sources = {
    slow: {
      template: tokened,
      secrets: { secret: { file: join(home, "follow-secret") } },
      quiet_s: 30,
      max_s: 60,
      action: "script:sink",
    },
    doomed: { template: tokened, secrets: { secret: { file: join(home, "follow-secret") } }, action: "script:refuse" },
  };
  const config = {
    intake: { listen: "127.0.0.1:0" },
    dispatch: { poll_s: 0.1 },
    bobbins,
    sources: { ...sources, ...plain, ...SAMPLED },
    destinations: {
      "script:sink": { argv: ["/bin/sh", "-c", "cat > /dev/null"] },
      "script:refuse": { argv: ["/bin/sh", "-c", "cat > /dev/null; exit 65"] },
    },
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

const send = (instance: string, ...argv: string[]) =>
  cli(["--home", home, "--json", "send", instance, "--url", `http://127.0.0.1:${port}/hooks/${instance}`, ...argv]);
/** What a refused send says, in either form (--json puts the error on stdout). */
const said = (r: { out: string; err: string }) => `${r.out}${r.err}`;
const lines = (out: string) =>
  out
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
/** The intake's word for an answer line: its X-Hookspool-Status, else its JSON status. */
const wordOf = (line: Record<string, unknown> | undefined) => {
  if (!line) return undefined;
  if (typeof line.word === "string") return line.word;
  try {
    return (JSON.parse(String(line.body)) as { status?: string }).status;
  } catch {
    return String(line.body);
  }
};

describe("send, for every built-in template bobbin", () => {
  test("there are many to send", () => expect(signable.length).toBeGreaterThanOrEqual(25));
  for (const b of signable) {
    test(`${b.name}: the accepted capture, signed now with the instance's secret, is queued and ` +
      `delivered; the rejected one is 401`, async () => {
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

describe("send with no body: a request the source itself queues, or a refusal", () => {
  test("a bobbin instance sends its accepted capture, re-signed", async () => {
    for (const b of signable) {
      const instance = parseKit(b.files().get("captures/kit.toml") ?? "").instance.name;
      const r = await send(instance);
      // The capture was sent above already: a source that dedups on it says duplicate, as it should.
      expect({ instance, code: r.code, word: wordOf(lines(r.out)[0]) }).toEqual({
        instance,
        code: 0,
        word: expect.stringMatching(/^(queued|duplicate)$/),
      });
    }
  }, 60_000);

  test("each built-in template as a plain source: the sample its selectors read is queued and delivered", async () => {
    const names = Object.keys(plain);
    expect(names.length).toBeGreaterThanOrEqual(20);
    for (const name of names) {
      const r = await send(name, "--follow");
      expect({
        name,
        code: r.code,
        err: r.err,
        first: wordOf(lines(r.out)[0]),
        last: lines(r.out).at(-1)?.followed,
      }).toEqual({ name, code: 0, err: "", first: "queued", last: "delivered" });
    }
  }, 120_000);

  test("headers, forms, a form's JSON field, split arrays, keyof, several key parts", async () => {
    for (const name of ["demo", "headers", "form", "formjson", "split"]) {
      const r = await send(name, "--follow");
      expect({
        name,
        code: r.code,
        err: r.err,
        first: wordOf(lines(r.out)[0]),
        last: lines(r.out).at(-1)?.followed,
      }).toEqual({ name, code: 0, err: "", first: "queued", last: "delivered" });
    }
  }, 60_000);

  test("--count sends each sample with a dedup id of its own: none is a duplicate", async () => {
    const r = await send("headers", "--count", "3");
    expect(r.code).toBe(0);
    expect(lines(r.out).map(wordOf)).toEqual(["queued", "queued", "queued"]);
  }, 20_000);

  test("a sample the source would not queue is never sent: one line, exit 2, what to give instead", async () => {
    const r = await cli(["--home", home, "send", "picky", "--url", `http://127.0.0.1:${port}/hooks/picky`]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("a sample for source picky would not be queued: the source ignores it (hookspool.test)");
    expect(r.err).toContain("--data");
    // An event type the operator names is sent, even one the source ignores: that is the test.
    const asked = await send("picky", "--event-type", "order.paid");
    expect({ code: asked.code, word: wordOf(lines(asked.out)[0]) }).toEqual({ code: 0, word: "queued" });
  }, 20_000);
});

describe("send --follow until the batch ends", () => {
  test("a batch that dies: exit 1, and it says so", async () => {
    const r = await send("doomed", "--data", '{"id":"d1"}', "--follow");
    expect(r.code).toBe(1);
    expect(lines(r.out).at(-1)).toMatchObject({ followed: "dead", state: "dead" });
    const text = await cli([
      "--home",
      home,
      "send",
      "doomed",
      "--url",
      `http://127.0.0.1:${port}/hooks/doomed`,
      "--data",
      '{"id":"d2"}',
      "--follow",
    ]);
    expect(text.code).toBe(1);
    expect(text.err).toMatch(/^hookspool: batch \d+ is dead \(rejected\): hookspool show \d+ --attempts says why$/m);
  }, 20_000);

  test("a batch still on its way when --timeout runs out: exit 1, naming its state", async () => {
    const r = await cli([
      "--home",
      home,
      "send",
      "slow",
      "--url",
      `http://127.0.0.1:${port}/hooks/slow`,
      "--data",
      '{"id":"s1"}',
      "--follow",
      "--timeout",
      "1s",
    ]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/stopped following after 1 s: batch \d+ is still open/);
    expect((await cli(["--home", home, "send", "slow", "--timeout", "1s"])).code).toBe(2);
  }, 20_000);
});

describe("send --handshake", () => {
  const handshaking = signable.filter((b) => {
    const t = fixed(b);
    return (
      t !== null &&
      (t.echo_when !== undefined || t.get_verify === true || t.reply_when !== undefined || t.head_handshake === true)
    );
  });
  test("the handshakes among them: Slack's challenge, Meta's GET verify token, Trello's HEAD", () => {
    expect(handshaking.map((b) => b.name)).toEqual(
      expect.arrayContaining(["slack.events", "meta.whatsapp", "atlassian.trello"]),
    );
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
  test(
    "a public-key scheme, a code source, a poll or unknown source, a missing capture: one line, " + "exit 2 or 1",
    async () => {
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
    },
  );
  test("no intake listening: exit 1 and where it tried", async () => {
    const r = await cli(["--home", home, "send", "kaneo", "--url", "http://127.0.0.1:9/hooks/kaneo"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("cannot reach the intake at http://127.0.0.1:9/hooks/kaneo");
  });
});
