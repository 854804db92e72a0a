// The soak's homes: three sources with different windows and bounds, one receiver destination,
// and a dispatcher tuned to retry and recover leases within seconds. Every home gets the same
// config (on PostgreSQL every process has one of its own, and they must agree); a reload
// rewrites them all with a new first line, which each process's watcher picks up.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export const SECRET = "soak-inbound-secret";
/** Every soak source's template line: the signature the load sends, the fields it keys on. */
const TEMPLATE =
  'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", dedup = "id", ' +
  'event_type = "type" }';
export const SOURCES = {
  a: { quiet: 0.3, max: 1, maxEvents: 10, maxBytes: 786432 },
  b: { quiet: 0, max: 0, maxEvents: 5, maxBytes: 786432 },
  c: { quiet: 0.5, max: 2, maxEvents: 500, maxBytes: 2000 },
} as const;
export type Src = keyof typeof SOURCES;
/** The largest event the load sends, as a batch's bytes count it: a batch may pass max_bytes by less. */
export const MAX_EVENT_BYTES = 700;

export type Backend = "sqlite" | "postgres";

/** The environment variable each PostgreSQL process reads its database URL from. */
export const PG_URL_ENV = "HOOKSPOOL_PG_URL";

/** A home: its secret file, and the config every process of the run reads. */
export function writeHome(home: string, receiverPort: number, backend: Backend, reloads: number): void {
  writeFileSync(join(home, "secret"), SECRET, { mode: 0o600 });
  writeConfig(home, receiverPort, backend, reloads);
}

export function writeConfig(home: string, receiverPort: number, backend: Backend, reloads: number): void {
  const sources = Object.entries(SOURCES)
    .map(
      ([name, w]) => `[sources.${name}]
${TEMPLATE}
secrets.secret = { file = "${join(home, "secret")}" }
quiet_s = ${w.quiet}
max_s = ${w.max}
max_events = ${w.maxEvents}
max_bytes = ${w.maxBytes}
max_body_bytes = ${Math.min(w.maxBytes, 786432)}
action = "receiver"
`,
    )
    .join("\n");
  const spool = backend === "postgres" ? `[spool]\nbackend = "postgres"\nurl = { env = "${PG_URL_ENV}" }\n\n` : "";
  writeFileSync(
    join(home, "config.toml"),
    `# reload ${reloads}
${spool}[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
heartbeat_s = 1
parallel = 4
lease_grace_s = 6
backoff_base_s = 0.2
backoff_cap_s = 1
breaker = { trip_after = 3, cooldown_initial_s = 0.5, cooldown_max_s = 2 }

${sources}
[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${receiverPort}/hook"
allow_insecure = true
unsigned = true
timeout_s = 1.5
max_inflight = 3
`,
  );
}
