// A throwaway intake for the conformance kit: a temp home holding the given config and secret
// files, a migrated spool, the real intake on 127.0.0.1 (ephemeral port) on a clock the kit
// moves, and every log line it writes kept for inspection. `hookspool bobbin check` and the test
// suite both run sources through it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../../clock.ts";
import { loadConfig } from "../../config/load.ts";
import type { LoadedConfig } from "../../config/types.ts";
import { Intake } from "../../intake/server.ts";
import { createLogger, setLogSink } from "../../log.ts";
import { useNetwork } from "../../net/http.ts";
import { type HttpStub, stubFetch } from "../../net/stubs.ts";
import { type KitSpool, openKitSpool } from "../../store/kit.ts";

/** A request as a sender would make it; `url` is the path and query. */
export interface KitRequest {
  method: string;
  url: string;
  headers: [string, string][];
  body: Uint8Array;
}

export interface KitIntakeOptions {
  /** TOML after the kit's [intake]; {{home}} is the temp home, {{secret:<name>}} a secret file's path. */
  config: string;
  /** Secret files to write (name -> value), mode 0600. */
  secrets: Record<string, string>;
  /** The clock's first reading. */
  now: number;
  /** What a source's own HTTP gets (a key fetch); a request none answers is refused. */
  http?: readonly HttpStub[];
}

export interface KitIntake {
  readonly url: string;
  readonly home: string;
  readonly clock: FakeClock;
  readonly loaded: LoadedConfig;
  /** The kit's own connection to the intake's spool (the intake writes through it). */
  readonly spool: KitSpool;
  /** Every log line written while it ran. */
  readonly lines: string[];
  send(req: KitRequest, opts?: { chunked?: boolean }): Promise<{ status: number; text: string; headers: Headers }>;
  stop(): Promise<void>;
}

const secretPath = (home: string, name: string) => join(home, `secret-${name.replace(/[^\w-]/g, "_")}`);

/** Start an intake on a temp home; a config that does not load throws its ConfigError. */
export async function startKitIntake(o: KitIntakeOptions): Promise<KitIntake> {
  const home = mkdtempSync(join(tmpdir(), "hookspool-kit-"));
  const lines: string[] = [];
  const restoreSink = setLogSink((line) => lines.push(line));
  // A source under test never reaches the network: only the kit's stubs answer it.
  const restoreNetwork = useNetwork(stubFetch(o.http ?? []));
  let spool: KitSpool | null = null;
  let intake: Intake | null = null;
  const cleanup = () => {
    spool?.close();
    restoreSink();
    restoreNetwork();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    for (const [name, value] of Object.entries(o.secrets))
      writeFileSync(secretPath(home, name), value, { mode: 0o600 });
    const text = o.config
      .replaceAll("{{home}}", home)
      .replace(/\{\{secret:([^}]+)\}\}/g, (_, n: string) => secretPath(home, n));
    writeFileSync(join(home, "config.toml"), `[intake]\nlisten = "127.0.0.1:0"\n\n${text}`, { mode: 0o600 });
    const clock = new FakeClock(o.now);
    spool = openKitSpool(join(home, "spool.db"), clock);
    // Only what a service would get: no caller variable reaches the source.
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
    const loadOptions = { home, env, cwd: home };
    const loaded = loadConfig(loadOptions);
    intake = new Intake({
      loaded,
      loadOptions,
      clock,
      log: createLogger("intake", { clock }),
      env,
      stores: spool.stores,
    });
    await intake.start();
    const url = intake.url;
    const running = intake;
    const open = spool;
    return {
      url,
      home,
      clock,
      loaded,
      spool: open,
      lines,
      async send(req, opts = {}) {
        const body = opts.chunked
          ? new ReadableStream({
              start(c) {
                c.enqueue(req.body);
                c.close();
              },
            })
          : req.body;
        const res = await fetch(`${url}${req.url}`, {
          method: req.method,
          headers: req.headers,
          body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
          redirect: "manual",
        });
        return { status: res.status, text: await res.text(), headers: res.headers };
      },
      async stop() {
        await running.stop();
        cleanup();
      },
    };
  } catch (e) {
    await intake?.stop();
    cleanup();
    throw e;
  }
}
