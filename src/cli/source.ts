// hookspool source test <name> --request FILE: a captured request through the intake's plugin
// steps, offline, with nothing written.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import { evaluate } from "../intake/pipeline.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import { parseHttpCapture } from "../intake/captures.ts";
import { loadSources } from "../config/sources.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";
import { visible } from "./format.ts";

function testCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "test", description: "run a captured .http request through verify/challenge/ignore/key/dedup/attrs/routes offline" },
    args: {
      ...GLOBAL_ARGS,
      name: { type: "positional", description: "source name", required: true },
      request: { type: "string", description: "the capture: start line, headers, blank line, body", required: true, valueHint: "file" },
      now: { type: "string", description: "evaluate timestamps at this Unix time (default: now)" },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const name = String(args.name);
      if (!loaded.config.sources[name]) throw new HookspoolError("E_NOT_FOUND", `no source "${name}" in the config`);
      const sources = await loadSources(loaded.config, { configDir: dirname(loaded.paths.config ?? loaded.paths.home), env: cli.io.env, file: loaded.paths.config ?? "config.toml" });
      const src = sources.get(name);
      if (!src) throw new HookspoolError("E_NOTHING", `source ${name} takes no requests (no module or template, or a poll source)`);
      let capture: ReturnType<typeof parseHttpCapture>;
      try {
        capture = parseHttpCapture(readFileSync(resolve(cli.io.cwd, String(args.request)), "utf8"));
      } catch (e) {
        throw new HookspoolError("E_INPUT", `cannot read the capture: ${(e as Error).message}`, { file: String(args.request) });
      }
      const now = args.now !== undefined ? Number(args.now) : cli.clock.now();
      if (!Number.isFinite(now)) throw new HookspoolError("E_USAGE", "--now must be a Unix time in seconds");
      const report: Record<string, unknown> = { source: name, bytes: capture.body.length };
      let code = 0;
      if (capture.body.length > src.maxBodyBytes) {
        report.answer = { status: 413 };
        code = 1;
      } else {
        const req = hookRequest({ ...capture, peer: "127.0.0.1", now });
        const ev = await evaluate(loaded.config, src, req);
        report.outcome = ev.kind;
        switch (ev.kind) {
          case "answered":
            report.answer = { status: ev.response.status, handshake: ev.authenticated ? "after verify" : "unauthenticated" };
            break;
          case "method":
            report.answer = { status: 405 };
            code = 1;
            break;
          case "unverified":
            report.answer = { status: 401 };
            code = 1;
            break;
          case "verify_error":
            report.answer = { status: 503 };
            report.error = ev.error;
            code = 1;
            break;
          case "ignored":
            report.answer = { status: 200, body: { status: "ignored" } };
            report.reason = ev.reason;
            break;
          case "quarantine":
            report.answer = { status: 202, body: { status: "quarantined" } };
            report.error = ev.error instanceof Error ? ev.error.name : typeof ev.error;
            code = 1;
            break;
          case "classified": {
            const e = ev.event;
            Object.assign(report, { key: e.key, dedup_id: e.dedupId, event_type: e.eventType, attrs: ev.attrs, kept_headers: Object.keys(e.headers) });
            report.copies = e.copies.map((c) => ({ route: c.route, destination: c.destination, tee: c.tee, window: c.window }));
            report.answer = { status: 202, body: { status: "queued" } };
          }
        }
      }
      if (cli.globals.json) {
        cli.io.out(JSON.stringify(report));
      } else {
        const lines = Object.entries(report).map(([k, v]) => [k, typeof v === "string" ? v : (JSON.stringify(v) ?? "-")] as const);
        const w = Math.max(...lines.map(([k]) => k.length));
        // The key, type and attrs come from the captured request: escaped, never run by the terminal.
        cli.io.out(lines.map(([k, v]) => `${k.padEnd(w)}  ${visible(v)}`).join("\n"));
      }
      return code;
    },
  };
}

export function sourceCommands(cli: Cli): CommandDef {
  return {
    meta: { name: "source", description: "develop a source plugin against captured requests" },
    args: { ...GLOBAL_ARGS },
    subCommands: { test: testCommand(cli) },
  };
}
