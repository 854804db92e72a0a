// hookspool source test <name> --request FILE: a captured request through the intake's plugin
// steps, offline, with nothing written.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { ARM_PARAM, armPath, newArmToken } from "../intake/learn.ts";
import { dirname, resolve } from "node:path";
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import { evaluate, pluginErrorClass, quarantineReason } from "../intake/evaluate.ts";
import { evaluationReply, type Reply, TOO_LARGE } from "../intake/replies.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import { parseHttpCapture } from "../bobbin/captures.ts";
import { loadSources } from "../config/sources.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig } from "./context.ts";
import { kitOf, unverifiedWords, withKitSecrets } from "./source-kit.ts";
import { visible } from "./format.ts";

/** A reply as the report shows it: the status, the headers it sets, a JSON body parsed. */
function answerOf(r: Reply): { status: number; headers?: Record<string, string>; body?: unknown } {
  const out: { status: number; headers?: Record<string, string>; body?: unknown } = { status: r.status };
  const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => k.toLowerCase() !== "content-type"));
  if (Object.keys(headers).length) out.headers = headers;
  const text = typeof r.body === "string" ? r.body : new TextDecoder().decode(r.body);
  if (text !== "") {
    try {
      out.body = JSON.parse(text);
    } catch {
      out.body = text;
    }
  }
  return out;
}

function testCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "test",
      description: "run a captured .http request through verify/challenge/ignore/key/dedup/attrs/routes offline",
    },
    args: {
      ...GLOBAL_ARGS,
      name: { type: "positional", description: "source name", required: true },
      request: {
        type: "string",
        description: "the capture: start line, headers, blank line, body",
        required: true,
        valueHint: "file",
      },
      now: {
        type: "string",
        description: "evaluate timestamps at this Unix time (default: now; with --secret-from-kit, the kit's time)",
      },
      "secret-from-kit": {
        type: "boolean",
        description:
          "verify with the test secrets of the instance's bobbin kit (captures/kit.toml), " +
          "which the bobbin's captures are signed with",
      },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const name = String(args.name);
      if (!loaded.config.sources[name])
        throw notInConfig(loaded, new HookspoolError("E_NOT_FOUND", `no source "${name}" in the config`));
      const fromKit = args["secret-from-kit"] ? withKitSecrets(loaded.config, cli.io.env, name) : null;
      const config = fromKit?.config ?? loaded.config;
      const sources = await loadSources(config, {
        configDir: dirname(loaded.paths.config ?? loaded.paths.home),
        env: fromKit?.env ?? cli.io.env,
        file: loaded.paths.config ?? "config.toml",
      });
      const src = sources.get(name);
      if (!src)
        throw new HookspoolError(
          "E_NOTHING",
          `source ${name} takes no requests (no module or template, or a poll source)`,
        );
      let capture: ReturnType<typeof parseHttpCapture>;
      try {
        capture = parseHttpCapture(readFileSync(resolve(cli.io.cwd, String(args.request)), "utf8"));
      } catch (e) {
        throw new HookspoolError("E_INPUT", `cannot read the capture: ${(e as Error).message}`, {
          file: String(args.request),
        });
      }
      const now = args.now !== undefined ? Number(args.now) : (fromKit?.now ?? cli.clock.now());
      if (!Number.isFinite(now)) throw new HookspoolError("E_USAGE", "--now must be a Unix time in seconds");
      const report: Record<string, unknown> = { source: name, bytes: capture.body.length };
      let code = 0;
      if (capture.body.length > src.maxBodyBytes) {
        report.answer = answerOf(TOO_LARGE());
        code = 1;
      } else {
        const req = hookRequest({ ...capture, peer: "127.0.0.1", now });
        const ev = await evaluate(config, src, req);
        report.outcome = ev.kind;
        report.answer = answerOf(evaluationReply(ev));
        switch (ev.kind) {
          case "answered":
            report.handshake = ev.authenticated ? "after verify" : "unauthenticated";
            break;
          case "learn":
            report.handshake = "offers the secret (kept only while the source is armed and keeps none yet)";
            break;
          case "method":
            code = 1;
            break;
          case "unverified":
            report.reason = ev.reason;
            report.why = unverifiedWords(ev.reason);
            // A bobbin's own captures are signed with its kit's made-up secret, not the operator's.
            if (!fromKit && kitOf(loaded.config, name))
              report.hint =
                "a capture the bobbin carries is signed with its kit's test secret " +
                "(captures/kit.toml): --secret-from-kit verifies with that";
            code = 1;
            break;
          case "verify_error":
            report.error = ev.error;
            code = 1;
            break;
          case "ignored":
            report.reason = ev.reason;
            break;
          case "quarantine":
            report.error = pluginErrorClass(ev.error);
            // The reason the quarantine batch and its issue show: key_missing, not_json, ...
            report.reason = quarantineReason(ev.error);
            code = 1;
            break;
          case "classified": {
            const e = ev.events[0];
            Object.assign(report, {
              key: e.key,
              dedup_id: e.dedupId,
              event_type: e.eventType,
              attrs: ev.attrs,
              kept_headers: Object.keys(e.headers),
            });
            report.copies = e.copies.map((c) => ({
              route: c.route,
              destination: c.destination,
              tee: c.tee,
              window: c.window,
            }));
            // A split request: what each further element becomes.
            if (ev.events.length > 1)
              report.more_events = ev.events
                .slice(1)
                .map((m) => ({ key: m.key, dedup_id: m.dedupId, event_type: m.eventType }));
          }
        }
      }
      if (cli.globals.json) {
        cli.io.out(JSON.stringify(report));
      } else {
        const lines = Object.entries(report).map(
          ([k, v]) => [k, typeof v === "string" ? v : (JSON.stringify(v) ?? "-")] as const,
        );
        const w = Math.max(...lines.map(([k]) => k.length));
        // The key, type and attrs come from the captured request: escaped, never run by the terminal.
        cli.io.out(lines.map(([k, v]) => `${k.padEnd(w)}  ${visible(v)}`).join("\n"));
      }
      return code;
    },
  };
}

const DURATION = /^(\d+(?:\.\d+)?)([smh])$/;
const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600 };

function armCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "arm",
      description:
        "let a source that learns its secret from a handshake (Asana, Notion) keep the next one, for a while",
    },
    args: {
      ...GLOBAL_ARGS,
      name: { type: "positional", description: "source name", required: true },
      for: {
        type: "string",
        description: "how long the handshake may come (default 10m; s, m or h)",
        default: "10m",
        valueHint: "DURATION",
      },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const name = String(args.name);
      const src = loaded.config.sources[name];
      if (!src) throw notInConfig(loaded, new HookspoolError("E_NOT_FOUND", `no source "${name}" in the config`));
      const learns = typeof src.template?.learn === "string";
      if (!learns)
        throw new HookspoolError("E_USAGE", `source ${name} does not learn its secret from a handshake`, {
          hint: "only a source whose template sets learn (asana.tasks, notion.pages) is armed",
        });
      const ref = src.secrets?.secret;
      if (!ref || !("file" in ref))
        throw new HookspoolError(
          "E_CONFIG",
          `source ${name} keeps a learned secret in a file: set secrets.secret = { file = "..." }`,
          { key: `sources.${name}.secrets.secret` },
        );
      const m = DURATION.exec(String(args.for));
      if (!m) throw new HookspoolError("E_USAGE", `--for ${args.for}: expected a duration such as 90s, 10m or 1h`);
      const seconds = Number(m[1]) * UNIT_S[m[2]];
      if (seconds <= 0 || seconds > 86_400)
        throw new HookspoolError("E_USAGE", "--for must be more than 0 and at most 24h");
      const until = cli.clock.now() + seconds;
      const replacing = existsSync(ref.file) && readFileSync(ref.file, "utf8").trim() !== "";
      if (replacing)
        throw new HookspoolError("E_NOTHING", `source ${name} already keeps a learned secret in ${ref.file}`, {
          hint:
            "remove that file first to accept a new handshake " +
            "(events signed with the old secret then fail until it comes)",
        });
      const token = newArmToken();
      rmSync(armPath(ref.file), { force: true });
      writeFileSync(armPath(ref.file), `${JSON.stringify({ until, token })}\n`, { mode: 0o600, flag: "wx" });
      const suffix = `?${ARM_PARAM}=${token}`;
      if (cli.globals.json)
        cli.io.out(JSON.stringify({ source: name, armed_until: until, secret_file: ref.file, url_suffix: suffix }));
      else {
        cli.io.out(
          `armed: ${name} keeps the first handshake until ` +
            `${new Date(until * 1000).toISOString().replace(/\.\d{3}Z$/, "Z")}, in ${visible(ref.file)}`,
        );
        cli.io.out(
          `give the provider the hook URL with this added (only a handshake that carries it is kept): ${suffix}`,
        );
        cli.io.out(`for example https://hooks.example.com/${encodeURIComponent(name)}${suffix}`);
      }
      return 0;
    },
  };
}

export function sourceCommands(cli: Cli): CommandDef {
  return {
    meta: {
      name: "source",
      description: "develop a source plugin against captured requests, or arm one for its handshake",
    },
    args: { ...GLOBAL_ARGS },
    subCommands: { test: testCommand(cli), arm: armCommand(cli) },
  };
}
