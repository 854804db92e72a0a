// The hookspool homes the benchmarks start: a config.toml, its secret files and a migrated spool.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DEST_SECRET, SENDER_SECRET } from "./payload.ts";
import { hookspoolVerb, tempHome } from "./procs.ts";

/** The TOML line of a bench source's template: the signature the load generators send, the fields it keys on. */
export const BENCH_TEMPLATE =
  'template = { scheme = "hmac-sha256-hex", header = "X-Bench-Signature", prefix = "sha256=", ' +
  'key = "key", dedup = "id", event_type = "type" }';

/** A backlog bench's source: BENCH_TEMPLATE, the home's sender secret, `windows` (TOML lines), to the receiver. */
export const backlogSource = (name: string, windows: string) => `[sources.${name}]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
${windows}
action = "receiver"
`;

/** About 1 KB: an id, a key, a type, the sender's clock and some text (the fields BENCH_TEMPLATE reads). */
export const BACKLOG_BODY = JSON.stringify({
  id: "{{SEQ}}",
  key: "k{{KEY}}",
  type: "ticket.updated",
  sent_at: 0,
  text: "lorem ipsum ".repeat(80),
}).replace('"sent_at":0', '"sent_at":{{TS}}');

export interface HomeOptions {
  /** The receiver the http destination delivers to. */
  receiverPort: number;
  /** `host:port` for intake.listen; 127.0.0.1:0 (an ephemeral port) by default. */
  listen?: string;
  /** Extra TOML appended as it is (sources, a [dispatch] table). */
  extra?: string;
  /** The receiver destination's max_inflight (its type's default, 4, when unset). */
  receiverInflight?: number;
  /** Leave out the [bobbins.github] instance. */
  noGithub?: boolean;
  /** TOML lines added to the [bobbins.github] instance (a window override). */
  githubExtra?: string;
  /** Variables for `migrate` (HOOKSPOOL_PG_URL when `extra` sets spool.backend = "postgres"). */
  env?: Record<string, string>;
}

/**
 * A home with a `[bobbins.github]` instance of github.repo whose every event goes to the http destination `receiver`.
 */
export async function makeHome(prefix: string, o: HomeOptions): Promise<string> {
  const home = tempHome(prefix);
  mkdirSync(join(home, "secrets"), { mode: 0o700 });
  writeFileSync(join(home, "secrets", "github"), SENDER_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "secrets", "receiver"), DEST_SECRET, { mode: 0o600 });
  const github = o.noGithub
    ? ""
    : `[bobbins.github]
bobbin = "github.repo"
secrets.secret = { file = "secrets/github" }
outputs = { "*" = "receiver" }
${o.githubExtra ?? ""}
`;
  writeFileSync(
    join(home, "config.toml"),
    `# written by scripts/bench
[intake]
listen = "${o.listen ?? "127.0.0.1:0"}"

${github}
[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${o.receiverPort}/hook"
allow_insecure = true
secret = { file = "secrets/receiver" }
${o.receiverInflight ? `max_inflight = ${o.receiverInflight}\n` : ""}
${o.extra ?? ""}
`,
    { mode: 0o600 },
  );
  await hookspoolVerb(home, ["migrate"], o.env);
  return home;
}
