// hookspool pull: the developer's mode of pull. One command runs a local hookspool whose only
// source leases a public hookspool's pull destination and whose only destination is the
// developer's endpoint (--to URL, --script CMD or --hermes ROUTE), and prints each delivery as
// it goes. The home is a throwaway directory, removed at the stop, unless --home keeps it, and
// then whatever arrived while the laptop slept is still there at the next start. The config it
// writes carries a first line that says so; a home with another config.toml is refused.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import type { CommandDef } from "citty";
import { PULL_NAME } from "../config/destinations.ts";
import { HookspoolError } from "../errors.ts";
import type { Service } from "../service.ts";
import type { OperatorStore } from "../store/api.ts";
import type { Stores } from "../store/open.ts";
import { CONSUMER_NAME } from "../store/pull.ts";
import { type Cli, GLOBAL_ARGS, makeCli } from "./context.ts";
import { runHome } from "./services.ts";
import { lineOf } from "./watch.ts";

/** The first line of the config.toml this command writes (and may rewrite at the next start). */
export const PULL_MARK = "# written by hookspool pull: rewritten at each start; edit the command, not this file";

/** The local source's and destination's names in the home it writes. */
const SOURCE = "pulled";

const usage = (message: string, hint?: string) => new HookspoolError("E_USAGE", message, { hint });

const toml = (s: string) => JSON.stringify(s);

interface PullArgs {
  from: string;
  destination: string;
  tokenFile: string;
  to?: string;
  script?: string;
  hermes?: string;
  consumer?: string;
}

/** The local destination's name and its table (empty for hermes:, whose [hermes] defaults apply). */
function destinationOf(a: PullArgs): { name: string; table: string } {
  if (a.to !== undefined) {
    let url: URL;
    try {
      url = new URL(a.to);
    } catch {
      throw usage("--to is not a URL", "e.g. --to http://127.0.0.1:3000/webhook");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw usage("--to must be an http(s) URL");
    const insecure = url.protocol === "http:" ? "allow_insecure = true\n" : "";
    return {
      name: "local",
      table: `[destinations.local]\ntype = "http"\nurl = ${toml(a.to)}\nunsigned = true\n${insecure}`,
    };
  }
  if (a.script !== undefined) {
    const argv = /\s/.test(a.script.trim()) ? ["/bin/sh", "-c", a.script] : [a.script];
    return {
      name: "script:local",
      table: `[destinations."script:local"]\nargv = [${argv.map(toml).join(", ")}]\n`,
    };
  }
  return { name: `hermes:${a.hermes}`, table: "" };
}

/** The config.toml of the local home. */
export function pullConfig(a: PullArgs): string {
  const dest = destinationOf(a);
  const insecure = a.from.startsWith("http://") ? "allow_insecure = true\n" : "";
  return `${PULL_MARK}
[intake]
listen = "127.0.0.1:0"

[sources.${SOURCE}]
action = ${toml(dest.name)}
span = "immediate"

[sources.${SOURCE}.pull]
url = ${toml(a.from)}
destination = ${toml(a.destination)}
token = { file = ${toml(a.tokenFile)} }
${insecure}${a.consumer ? `consumer = ${toml(a.consumer)}\n` : ""}
${dest.table}`;
}

function checked(args: Record<string, unknown>, cwd: string): PullArgs {
  const str = (k: string) => (typeof args[k] === "string" && args[k] !== "" ? (args[k] as string) : undefined);
  const from = str("from");
  const destination = str("destination");
  const tokenFile = str("token-file");
  if (!from) throw usage("--from is required: the public hookspool's base URL");
  if (!/^https?:\/\/[^/?#]+/.test(from)) throw usage("--from must be an http(s) URL, e.g. https://hooks.example.org");
  if (!destination || !PULL_NAME.test(destination))
    throw usage("--destination is required: the pull destination's name upstream, without pull:");
  if (!tokenFile) throw usage("--token-file is required: a file holding that destination's token");
  const targets = ["to", "script", "hermes"].filter((k) => str(k) !== undefined);
  if (targets.length !== 1) throw usage("give exactly one of --to URL, --script CMD or --hermes ROUTE");
  const consumer = str("consumer");
  if (consumer !== undefined && !CONSUMER_NAME.test(consumer)) throw usage("--consumer is 1-64 letters, digits, _ . -");
  return {
    from,
    destination,
    tokenFile: isAbsolute(tokenFile) ? tokenFile : resolve(cwd, tokenFile),
    to: str("to"),
    script: str("script"),
    hermes: str("hermes"),
    consumer,
  };
}

/** The home to run in: --home (made if missing; refused if it has a config of its own) or a throwaway one. */
function homeFor(cli: Cli, config: string): { home: string; throwaway: boolean } {
  const given = cli.globals.home;
  const home = given ? resolve(cli.io.cwd, given) : mkdtempSync(join(tmpdir(), "hookspool-pull-"));
  if (given) {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const file = join(home, "config.toml");
    if (existsSync(file) && !readFileSync(file, "utf8").startsWith(PULL_MARK))
      throw usage(`${file} was not written by hookspool pull: not touching it`, "give --home a directory of its own");
  }
  writeFileSync(join(home, "config.toml"), config, { mode: 0o600 });
  return { home, throwaway: !given };
}

/** Each delivery's outcome as it commits, a line each (watch's lines; --json: the journal rows). */
class DeliveryPrinter implements Service {
  readonly name = "delivery printer";
  private timer: ReturnType<typeof setInterval> | null = null;
  private cursor: string | null = null;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly cli: Cli,
    private readonly store: OperatorStore,
  ) {}

  async start(): Promise<void> {
    this.cursor = await this.store.journalCursor(undefined);
    this.timer = setInterval(() => {
      this.reading ??= this.read().finally(() => {
        this.reading = null;
      });
    }, 250);
  }

  private async read(): Promise<void> {
    if (this.cursor === null) return;
    const page = await this.store.journalAfter(this.cursor, {}, 500).catch(() => null);
    if (!page) return;
    this.cursor = page.cursor;
    for (const r of page.rows) {
      if (r.kind !== "delivered" && r.kind !== "retry" && r.kind !== "dead" && r.kind !== "awaiting") continue;
      this.cli.io.out(this.cli.globals.json ? JSON.stringify(r) : lineOf(r, this.cli.io.isTTY, r.cursor));
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.reading;
    await this.read();
  }
}

export function pullCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "pull",
      description:
        "developer mode: lease a public hookspool's pull destination and deliver each batch here " +
        "(a throwaway home unless --home keeps the spool across restarts)",
    },
    args: {
      ...GLOBAL_ARGS,
      from: { type: "string", description: "the public hookspool's base URL", valueHint: "URL" },
      destination: { type: "string", description: "its pull destination's name, without pull:", valueHint: "NAME" },
      "token-file": { type: "string", description: "a file holding that destination's token", valueHint: "F" },
      to: { type: "string", description: "deliver to this http(s) endpoint (unsigned)", valueHint: "URL" },
      script: {
        type: "string",
        description: "deliver to this command (the batch document on stdin)",
        valueHint: "CMD",
      },
      hermes: { type: "string", description: "deliver to this Hermes gateway route", valueHint: "ROUTE" },
      consumer: { type: "string", description: "the name to lease as (default: this host's name)", valueHint: "NAME" },
    },
    async run({ args }) {
      const a = checked(args as Record<string, unknown>, cli.io.cwd);
      const { home, throwaway } = homeFor(cli, pullConfig(a));
      cli.io.err(`hookspool pull: ${throwaway ? "a throwaway home" : "home"} ${home}`);
      const local = makeCli(cli.io, { ...cli.globals, home, config: undefined }, cli.clock);
      try {
        return await runHome(local, (stores: Stores) => [new DeliveryPrinter(cli, stores.operator())]);
      } finally {
        if (throwaway) rmSync(home, { recursive: true, force: true });
      }
    },
  };
}
