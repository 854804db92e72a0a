// hookspool send <source>: the "does my setup work" command. It builds a request as the source's
// sender would (the scheme's headers, a fresh timestamp and delivery id), signs it with the
// source's own configured secret, posts it to the running intake, and prints the answer; with
// --follow, the batch's way to its destination.
// send-request.ts builds the request, send-handshake.ts the handshake, send-sample.ts the body
// sent when none is given.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { CommandDef } from "citty";
import { destinationSettings } from "../config/destinations.ts";
import { userKey } from "../config/provenance.ts";
import { newestRef, resolveSecret } from "../config/secrets.ts";
import type { Config } from "../config/types.ts";
import { windowFor } from "../config/windows.ts";
import { HookspoolError } from "../errors.ts";
import type { FollowStep } from "../store/follow.ts";
import { parseDuration } from "../time.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore, positiveInt } from "./context.ts";
import { visible } from "./format.ts";
import { handshakeOf } from "./send-handshake.ts";
import { acceptedCapture, build, captureOf, intakeUrl, templateOf } from "./send-request.ts";
import { noSample, type Sample, SAMPLE_EVENT_TYPE, sampleFor, whyNotQueued } from "./send-sample.ts";

export function sendCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "send",
      description:
        "post a request to the running intake as the source's sender would, signed with its configured secret " +
        "(a template source), and print the answer",
    },
    args: {
      ...GLOBAL_ARGS,
      source: { type: "positional", description: "the source or bobbin instance", required: true },
      data: { type: "string", description: "the body, as text (JSON for a JSON source)", valueHint: "JSON" },
      file: { type: "string", description: "the body, from a file, byte for byte", valueHint: "F" },
      capture: {
        type: "string",
        description:
          "a capture of the instance's bobbin by name (accepted, rejected, ...): its body and headers; " +
          "re-signed unless it expects 401",
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
          "send this many, each with a fresh delivery id and timestamp " +
          "(a source that dedups on the body sees one event)",
        default: "1",
        valueHint: "N",
      },
      follow: {
        type: "boolean",
        description:
          "after a queued answer, print the batch's states until it is delivered, dead or dropped " +
          "(exit 1 unless delivered)",
      },
      timeout: {
        type: "string",
        description:
          "with --follow: stop following after this long (default: the source's longest wait, " +
          "its destination's timeout, and a margin)",
        valueHint: "D",
      },
      handshake: {
        type: "boolean",
        description:
          "send the source's handshake instead (a signed challenge, a GET verify token, a PING, " +
          "a HEAD) and check the answer the sender needs",
      },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const { config } = loaded;
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
        secret = resolveSecret(newestRef(ref), cli.io.env);
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
        const h = handshakeOf(t, tokenRef ? resolveSecret(newestRef(tokenRef), cli.io.env) : null);
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
            `cannot reach the intake at ${target.unix ?? target.url} ` +
              `(${(e as { code?: string }).code ?? (e as Error).name})`,
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
              `cannot reach the intake at ${target.unix ?? target.url} ` +
                `(${(e as { code?: string }).code ?? (e as Error).name})`,
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
      line:
        `batch ${last.batch} is dead${last.detail ? ` (${last.detail})` : ""}: ` +
        `hookspool show ${last.batch} --attempts says why`,
    };
  if (last?.state === "dropped") return { failed: true, word: "dropped", line: `batch ${last.batch} was dropped` };
  const where = last ? `batch ${last.batch} is still ${last.state}` : "no batch for the request was seen";
  return {
    failed: true,
    word: "timeout",
    line:
      `stopped following after ${Math.round(followS)} s: ${where} ` +
      "(--timeout waits longer; is the dispatcher running?)",
  };
}
