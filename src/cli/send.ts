// hookspool send <source>: the "does my setup work" command. It builds a request as the source's
// sender would (the scheme's headers, a fresh timestamp and delivery id), signs it with the
// source's own configured secret, posts it to the running intake, and prints the answer; with
// --follow, the batch's way to its destination.
import { parseDuration } from "../time.ts";
import { windowFor } from "../config/windows.ts";
import { destinationSettings } from "../config/destinations.ts";
import type { FollowStep } from "../store/follow.ts";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { CommandDef } from "citty";
import { type Capture, capturesOf } from "../bobbin/captures.ts";
import { findBobbins } from "../bobbin/registry.ts";
import { parseListen } from "../config/listen.ts";
import { resolveSecret } from "../config/secrets.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { canSign, signTemplate } from "../plugin/sign.ts";
import type { TemplateSettings } from "../plugin/template.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore, positiveInt } from "./context.ts";
import { noSample, type Sample, SAMPLE_EVENT_TYPE, sampleFor, whyNotQueued } from "./send-sample.ts";
import { userKey } from "../config/provenance.ts";
import { visible } from "./format.ts";

interface Built {
  url: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** The template the source runs, or a one-line refusal for what send cannot sign. */
function templateOf(config: Config, source: string): TemplateSettings {
  const src = config.sources[source];
  if (!src)
    throw new HookspoolError("E_NOT_FOUND", `no source "${source}" in the config`, {
      hint: "hookspool check lists the sources and bobbin instances",
    });
  if (src.kind === "poll")
    throw new HookspoolError("E_USAGE", `source ${source} is a poll source: it takes no requests`);
  if (!src.template)
    throw new HookspoolError("E_USAGE", `source ${source} is a code source: send signs template sources only`, {
      hint: "use the provider's test delivery, or hookspool source test with a capture",
    });
  const t = src.template as unknown as TemplateSettings;
  if (!canSign(t))
    throw new HookspoolError(
      "E_USAGE",
      `source ${source} (${t.scheme}) is signed with the sender's private key: send cannot sign as it`,
      { hint: "use the provider's own test delivery" },
    );
  return t;
}

/** A bobbin instance's capture by name (`accepted` is captures/accepted.http). */
function captureOf(config: Config, source: string, name: string): Capture {
  const instance = config.bobbins[source];
  if (!instance?.bobbin)
    throw new HookspoolError("E_USAGE", `--capture needs a bobbin instance; ${source} is a plain source`);
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    instance.bobbin,
  );
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no bobbin "${instance.bobbin}"`);
  const all = capturesOf(b.files());
  const c = all.find((x) => x.file === `captures/${name}.http` || x.file === name);
  if (!c)
    throw new HookspoolError("E_NOT_FOUND", `${instance.bobbin} has no capture ${name}`, {
      hint: `its captures: ${all.map((x) => x.file.replace(/^captures\/|\.http$/g, "")).join(", ")}`,
    });
  return c;
}

/** A bobbin instance's captures/accepted.http, when it has one. */
function acceptedCapture(config: Config, source: string): Capture | undefined {
  const instance = config.bobbins[source];
  if (!instance?.bobbin) return undefined;
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    instance.bobbin,
  );
  return b ? capturesOf(b.files()).find((x) => x.file === "captures/accepted.http") : undefined;
}

/** Where the running intake takes the source's requests. */
function intakeUrl(config: Config, source: string, given: string | undefined): { url: string; unix?: string } {
  if (given) return { url: given };
  const listen = parseListen(config.intake.listen, true);
  const path = `/hooks/${encodeURIComponent(source)}`;
  if ("unix" in listen) return { url: `http://localhost${path}`, unix: listen.unix };
  const host = listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname;
  return { url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${listen.port}${path}` };
}

/** The request: the capture's or the given body, the sender's headers, signed now with the source's secret. */
function build(
  t: TemplateSettings,
  secret: string,
  o: {
    body: Uint8Array;
    captured?: Capture;
    headers?: [string, string][];
    eventType?: string;
    now: number;
    id: string;
  },
): Built {
  const signing = new Set(
    [
      t.header,
      t.timestamp_header,
      t.id_header,
      "webhook-id",
      "webhook-timestamp",
      "webhook-signature",
      "svix-id",
      "svix-timestamp",
      "svix-signature",
    ]
      .filter((h): h is string => !!h)
      .map((h) => h.toLowerCase()),
  );
  const headers: [string, string][] = o.captured
    ? o.captured.request.headers.filter(
        ([k]) => !signing.has(k.toLowerCase()) && !["host", "content-length"].includes(k.toLowerCase()),
      )
    : [
        ["Content-Type", t.body === "form" ? "application/x-www-form-urlencoded" : "application/json"],
        ...(o.headers ?? []),
      ];
  const set = (name: string, value: string) => {
    const at = headers.findIndex(([k]) => k.toLowerCase() === name.toLowerCase());
    if (at >= 0) headers[at] = [name, value];
    else headers.push([name, value]);
  };
  // A header the template reads the event type or the dedup id from, as the sender sets it.
  if (o.eventType !== undefined && t.event_type?.startsWith("header:"))
    set(t.event_type.slice(7).split("|")[0], o.eventType);
  if (t.dedup?.startsWith("header:")) set(t.dedup.slice(7).split("|")[0], o.id);
  const body = t.timestamp_field ? restamped(o.body, t.timestamp_field, o.now) : o.body;
  const signed = signTemplate(t, secret, body, o.now, o.id);
  for (const [k, v] of signed.headers) set(k, v);
  const query = signed.query ? `?${signed.query}` : "";
  return { url: query, headers, body };
}

/**
 * A body whose timestamp field is set to now, in the unit it was written in (milliseconds above
 * 1e12): a sender that signs its timestamp in the body (Linear) sends a fresh one each time.
 */
function restamped(body: Uint8Array, path: string, now: number): Uint8Array {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return body;
  }
  const keys = path.split(".");
  let at = doc as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) {
    if (at === null || typeof at !== "object") return body;
    at = at[k] as Record<string, unknown>;
  }
  if (at === null || typeof at !== "object") return body;
  const last = keys[keys.length - 1];
  at[last] = Number(at[last]) > 1e12 ? Math.round(now * 1000) : now;
  return new TextEncoder().encode(JSON.stringify(doc));
}

/** A body with `value` at the dotted `path` (numbers as numbers: Discord's type=1 is a number). */
function bodyWith(fields: [string, string][]): Uint8Array {
  const doc: Record<string, unknown> = {};
  for (const [path, value] of fields) {
    const keys = path.split(".");
    let at = doc;
    for (const k of keys.slice(0, -1)) at = (at[k] ??= {}) as Record<string, unknown>;
    at[keys[keys.length - 1]] = /^-?\d+$/.test(value) ? Number(value) : value;
  }
  return new TextEncoder().encode(JSON.stringify(doc));
}

/** The source's handshake as its sender makes it, and what the answer must be. */
function handshakeOf(
  t: TemplateSettings,
  verifyToken: string | null,
): {
  method: string;
  query: string;
  body: Uint8Array | null;
  expect: (status: number, text: string) => boolean;
  what: string;
} {
  const challenge = `send-${randomUUID()}`;
  if (t.get_verify) {
    if (verifyToken === null) throw new HookspoolError("E_CONFIG", "get_verify needs the secret verify_token");
    const q = new URLSearchParams({
      "hub.mode": "subscribe",
      "hub.verify_token": verifyToken,
      "hub.challenge": challenge,
    });
    return {
      method: "GET",
      query: `?${q}`,
      body: null,
      expect: (s, x) => s === 200 && x === challenge,
      what: "the GET verify-token handshake",
    };
  }
  const when = (cond: string) => {
    const eq = cond.indexOf("=");
    return [cond.slice(0, eq).replace(/^field:/, ""), cond.slice(eq + 1)] as [string, string];
  };
  if (t.echo_when && t.echo_field) {
    return {
      method: "POST",
      query: "",
      body: bodyWith([when(t.echo_when), [t.echo_field.replace(/^field:/, ""), challenge]]),
      expect: (s, x) => s === 200 && x === challenge,
      what: `the signed challenge (${t.echo_when})`,
    };
  }
  if (t.reply_when && t.reply !== undefined) {
    const reply = t.reply;
    return {
      method: "POST",
      query: "",
      body: bodyWith([when(t.reply_when)]),
      expect: (s, x) => s === 200 && x === reply,
      what: `the constant reply (${t.reply_when})`,
    };
  }
  if (t.head_handshake)
    return { method: "HEAD", query: "", body: null, expect: (s) => s === 200, what: "the HEAD check" };
  throw new HookspoolError("E_USAGE", "this source answers no handshake");
}

export function sendCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "send",
      description:
        "post a request to the running intake as the source's sender would, signed with its configured secret (a template source), and print the answer",
    },
    args: {
      ...GLOBAL_ARGS,
      source: { type: "positional", description: "the source or bobbin instance", required: true },
      data: { type: "string", description: "the body, as text (JSON for a JSON source)", valueHint: "JSON" },
      file: { type: "string", description: "the body, from a file, byte for byte", valueHint: "F" },
      capture: {
        type: "string",
        description:
          "a capture of the instance's bobbin by name (accepted, rejected, ...): its body and headers; re-signed unless it expects 401",
        valueHint: "NAME",
      },
      "event-type": {
        type: "string",
        description:
          "the event type: set where the template reads it (a header, or the sample body when no body is given)",
        valueHint: "T",
      },
      url: {
        type: "string",
        description: "post here instead of the intake's intake.listen (the public URL through the proxy, say)",
        valueHint: "U",
      },
      count: {
        type: "string",
        description:
          "send this many, each with a fresh delivery id and timestamp (a source that dedups on the body sees one event)",
        default: "1",
        valueHint: "N",
      },
      follow: {
        type: "boolean",
        description:
          "after a queued answer, print the batch's states until it is delivered, dead or dropped (exit 1 unless delivered)",
      },
      timeout: {
        type: "string",
        description:
          "with --follow: stop following after this long (default: the source's longest wait, its destination's timeout, and a margin)",
        valueHint: "D",
      },
      handshake: {
        type: "boolean",
        description:
          "send the source's handshake instead (a signed challenge, a GET verify token, a PING, a HEAD) and check the answer the sender needs",
      },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const { config, paths } = loaded;
      const source = String(args.source);
      if (!config.sources[source])
        throw notInConfig(
          loaded,
          new HookspoolError("E_NOT_FOUND", `no source "${source}" in the config`, {
            hint: "hookspool check lists the sources and bobbin instances",
          }),
        );
      const t = templateOf(config, source);
      const given = [args.data !== undefined, args.file !== undefined, args.capture !== undefined].filter(
        Boolean,
      ).length;
      if (given > 1) throw new HookspoolError("E_USAGE", "give one of --data, --file or --capture");
      const count = positiveInt(args.count, "--count");
      const ref = config.sources[source]?.secrets?.secret;
      if (!ref)
        throw new HookspoolError("E_CONFIG", `source ${source} has no secret to sign with`, {
          key: userKey(config, `sources.${source}.secrets.secret`),
        });
      let secret: string;
      try {
        secret = resolveSecret(ref, cli.io.env);
      } catch (e) {
        throw new HookspoolError(
          "E_CONFIG",
          `cannot read source ${source}'s secret (${(e as { code?: string }).code ?? (e as Error).name})`,
          { key: userKey(config, `sources.${source}.secrets.secret`) },
        );
      }
      const eventType = args["event-type"] as string | undefined;
      let captured = args.capture !== undefined ? captureOf(config, source, String(args.capture)) : undefined;
      // The body of each request (a sample's dedup id is fresh in each), and the headers it needs.
      let bodyOf: (id: string) => Sample;
      if (captured) {
        const body = captured.request.body;
        bodyOf = () => ({ body, headers: [] });
      } else if (args.file !== undefined) {
        let body: Uint8Array;
        try {
          body = readFileSync(resolve(cli.io.cwd, String(args.file)));
        } catch (e) {
          throw new HookspoolError(
            "E_INPUT",
            `cannot read ${String(args.file)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).name}`,
          );
        }
        bodyOf = () => ({ body, headers: [] });
      } else if (args.data !== undefined) {
        const body = new TextEncoder().encode(String(args.data));
        bodyOf = () => ({ body, headers: [] });
      } else if (!args.handshake) {
        // No body given: the instance's accepted capture, else a sample from the source's own
        // selectors; whichever the source would queue, tried offline first.
        const now = Math.floor(cli.clock.now());
        const tried: string[] = [];
        const accepted = acceptedCapture(config, source);
        if (accepted) {
          const why = await whyNotQueued(
            loaded,
            cli.io.env,
            source,
            build(t, secret, { body: accepted.request.body, captured: accepted, eventType, now, id: "send_probe" }),
            now,
          );
          if (why === null) captured = accepted;
          else tried.push(`its bobbin's accepted capture: ${why}`);
        }
        if (captured) {
          const body = captured.request.body;
          bodyOf = () => ({ body, headers: [] });
        } else {
          bodyOf = (id) => sampleFor(t, { eventType: eventType ?? SAMPLE_EVENT_TYPE, id });
          const probe = bodyOf("send_probe");
          const why = await whyNotQueued(
            loaded,
            cli.io.env,
            source,
            build(t, secret, { ...probe, eventType, now, id: "send_probe" }),
            now,
          );
          // An event type the operator asked for may be one the source ignores: that is theirs to try.
          if (why !== null && !(eventType !== undefined && why.startsWith("the source ignores")))
            throw noSample(source, [...tried, why].join("; "), t);
        }
      } else bodyOf = () => ({ body: new Uint8Array(), headers: [] });
      const target = intakeUrl(config, source, args.url as string | undefined);
      if (args.handshake) {
        const tokenRef = config.sources[source]?.secrets?.verify_token;
        const h = handshakeOf(t, tokenRef ? resolveSecret(tokenRef, cli.io.env) : null);
        const signed = h.body
          ? build(t, secret, { body: h.body, now: Math.floor(cli.clock.now()), id: `send_${randomUUID()}` })
          : { url: "", headers: [] as [string, string][], body: null };
        let status: number;
        let text: string;
        try {
          const res = await fetch(`${target.url}${h.query || signed.url}`, {
            method: h.method,
            headers: signed.headers,
            body: signed.body,
            ...(target.unix ? { unix: target.unix } : {}),
          } as RequestInit);
          status = res.status;
          text = await res.text();
        } catch (e) {
          throw new HookspoolError(
            "E_NOTHING",
            `cannot reach the intake at ${target.unix ?? target.url} (${(e as { code?: string }).code ?? (e as Error).name})`,
          );
        }
        const ok = h.expect(status, text);
        if (cli.globals.json) cli.io.out(JSON.stringify({ handshake: h.what, status, ok }));
        else
          cli.io.out(
            visible(`${h.what}: ${status}, ${ok ? "answered as the sender needs" : "NOT the answer the sender needs"}`),
          );
        return ok ? 0 : 1;
      }
      // A capture made to be refused is sent as it was captured: its wrong signature is the point.
      const asCaptured = captured !== undefined && captured.expect.status === 401;
      if (args.timeout !== undefined && !args.follow)
        throw new HookspoolError("E_USAGE", "--timeout goes with --follow");
      // Follow long enough for the batch to end: its window's longest wait, one delivery, a margin.
      const followS =
        args.timeout !== undefined ? parseDuration(String(args.timeout), "--timeout") : followSeconds(config, source);
      const store = args.follow ? await openOperatorStore(cli, loaded) : null;
      let unfinished = 0;
      let failed = 0;
      try {
        for (let i = 0; i < count; i++) {
          const before = store ? await store.newestEventId() : 0;
          const id = `send_${randomUUID()}`;
          const sample = bodyOf(id);
          const req =
            asCaptured && captured
              ? {
                  url: captured.request.url.includes("?")
                    ? captured.request.url.slice(captured.request.url.indexOf("?"))
                    : "",
                  headers: captured.request.headers.filter(
                    ([k]) => !["host", "content-length"].includes(k.toLowerCase()),
                  ),
                  body: sample.body,
                }
              : build(t, secret, { ...sample, captured, eventType, now: Math.floor(cli.clock.now()), id });
          let status: number;
          let text: string;
          let word: string | null;
          try {
            const res = await fetch(`${target.url}${req.url}`, {
              method: "POST",
              headers: req.headers,
              body: req.body,
              ...(target.unix ? { unix: target.unix } : {}),
            } as RequestInit);
            status = res.status;
            text = await res.text();
            word = res.headers.get("x-hookspool-status");
          } catch (e) {
            throw new HookspoolError(
              "E_NOTHING",
              `cannot reach the intake at ${target.unix ?? target.url} (${(e as { code?: string }).code ?? (e as Error).name})`,
              { hint: "is hookspool intake (or run) running? --url posts elsewhere" },
            );
          }
          if (status < 200 || status >= 300) failed++;
          const shown = text.length > 200 ? `${text.slice(0, 200)}...` : text;
          if (cli.globals.json) cli.io.out(JSON.stringify({ n: i + 1, status, body: text.slice(0, 2000), word }));
          else cli.io.out(visible(`${i + 1}/${count}: ${status} ${shown}${word ? ` (${word})` : ""}`));
          if (store && status >= 200 && status < 300) {
            let last: FollowStep | null = null;
            for await (const step of store.followEvent({ source, after: before, timeoutMs: followS * 1000 })) {
              last = step;
              if (cli.globals.json) cli.io.out(JSON.stringify(step));
              else cli.io.out(visible(`  batch ${step.batch} ${step.state}${step.detail ? `: ${step.detail}` : ""}`));
            }
            const end = followEnd(last, followS);
            if (end.failed) unfinished++;
            if (cli.globals.json)
              cli.io.out(
                JSON.stringify({ followed: end.word, ...(last ? { batch: last.batch, state: last.state } : {}) }),
              );
            else if (end.failed) cli.io.err(visible(`hookspool: ${end.line}`));
          }
        }
      } finally {
        await store?.close();
      }
      return failed || unfinished ? 1 : 0;
    },
  };
}

/**
 * How long --follow waits by default: the source's window at its longest, its destination's timeout, two ticks and a
 * margin.
 */
function followSeconds(config: Config, source: string): number {
  const src = config.sources[source];
  const w = windowFor(config, source, null);
  const destination = src?.action ? destinationSettings(config, src.action) : null;
  return Math.max(w.quiet_s, w.max_s) + (destination?.timeout_s ?? 30) + 2 * config.dispatch.poll_s + 15;
}

/** How following ended: delivered (fine), dead or dropped, or still on its way when the time ran out. */
function followEnd(last: FollowStep | null, followS: number): { failed: boolean; word: string; line: string } {
  if (last?.state === "delivered") return { failed: false, word: "delivered", line: "" };
  if (last?.state === "dead")
    return {
      failed: true,
      word: "dead",
      line: `batch ${last.batch} is dead${last.detail ? ` (${last.detail})` : ""}: hookspool show ${last.batch} --attempts says why`,
    };
  if (last?.state === "dropped") return { failed: true, word: "dropped", line: `batch ${last.batch} was dropped` };
  const where = last ? `batch ${last.batch} is still ${last.state}` : "no batch for the request was seen";
  return {
    failed: true,
    word: "timeout",
    line: `stopped following after ${Math.round(followS)} s: ${where} (--timeout waits longer; is the dispatcher running?)`,
  };
}
