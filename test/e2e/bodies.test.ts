// Large bodies through a real `hookspool run` on 127.0.0.1, on SQLite and on PostgreSQL: a 20 MB
// signed body is kept in a file under <home>/bodies/ and named by its event row before the 202,
// then delivered inline to an http destination whose max_body_bytes fits it, by reference
// (body_url, signed and expiring, fetched from the intake) to one whose cap does not, as a file
// path to a script beyond its cap, and refused (dead, reason config) by an http destination with large = "refuse"
// and by a Hermes destination (the gateway takes bodies inline only), which `hookspool check` warns of.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { SQL } from "bun";
import { createHash, createHmac } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { HermesGateway } from "../helpers/hermes-gateway.ts";
import { PG_BIN, serverForSuite } from "../helpers/pg.ts";
import { runHookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(120_000);

const SECRET = "bodies-inbound-secret";
const MB20 = 20 * 1024 * 1024;

/** A JSON body of about `bytes`, unique per name. */
function bigBody(name: string, bytes: number): string {
  const head = JSON.stringify({ topic: name, type: "big", pad: "" });
  return `${head.slice(0, -2)}${"y".repeat(bytes - head.length)}"}`;
}

type Doc = { events: Record<string, unknown>[] };

const NAMES = ["inline", "byref", "refused", "script", "tohermes"];

function config(home: string, port: number, scriptOut: string, backend: string, gateway: HermesGateway): string {
  const url = (p: string) => `http://127.0.0.1:${port}/${p}`;
  const source = (name: string, action: string) =>
    `[sources.${name}]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "type" }
secrets.secret = { file = "${join(home, "in-secret")}" }
max_body_bytes = 26214400
action = "${action}"
`;
  return `${backend}
[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
heartbeat_s = 1
backoff_base_s = 0.1
backoff_cap_s = 0.4

[hermes]
base_url = "${gateway.url}"
subscriptions_path = "${gateway.subscriptionsPath}"

${source("inline", "inline")}
${source("byref", "byref")}
${source("refused", "refused")}
${source("script", "script:keep")}
${source("tohermes", "hermes:big")}
[destinations.inline]
type = "http"
url = "${url("inline")}"
allow_insecure = true
unsigned = true
max_body_bytes = 31457280
timeout_s = 30

[destinations.byref]
type = "http"
url = "${url("byref")}"
allow_insecure = true
unsigned = true

[destinations.refused]
type = "http"
url = "${url("refused")}"
allow_insecure = true
unsigned = true
large = "refuse"

[destinations."script:keep"]
argv = ["/bin/sh", "-c", "/bin/cat > \\"$0\\"", "${scriptOut}"]
# Beyond its cap a script gets the body's file path.
max_body_bytes = 1048576
`;
}

interface Rows {
  events(): Promise<{ source: string; body_file: string | null; size: number }[]>;
  batches(): Promise<{ destination: string; state: string; dead_reason: string | null; last_error: string | null }[]>;
  close(): Promise<void>;
}

async function scenario(backend: string, env: Record<string, string>, rows: (home: string) => Promise<Rows>) {
  const receiver = new Receiver<Doc>({ answer: () => 200 });
  // Its max_body_bytes is the default, 1 MiB, as is the destination's.
  const gateway = new HermesGateway({ routes: { big: { secret: "hermes-big-route-secret" } } });
  const home = tempDir("hookspool-bodies-");
  const scriptOut = join(home, "script-doc.json");
  writeFileSync(join(home, "in-secret"), SECRET, { mode: 0o600 });
  writeFileSync(join(home, "config.toml"), config(home, receiver.port, scriptOut, backend, gateway));
  if (backend) {
    const m = await runHookspool(home, ["migrate"], { env });
    expect(m.code, m.err).toBe(0);
  }
  // check says beforehand what delivery will do with a large body on the Hermes route.
  const checked = await runHookspool(home, ["--json", "check"], { env });
  const warned = (
    JSON.parse(checked.out).problems as { level: string; key: string; message: string; hint?: string }[]
  ).filter((p) => p.key === "sources.tohermes.max_body_bytes");
  expect(warned).toEqual([
    {
      level: "warning",
      key: "sources.tohermes.max_body_bytes",
      message:
        "route tohermes -> hermes:big: source tohermes accepts bodies up to 26214400 bytes; one kept in a file " +
        "that does not fit the destination's max_body_bytes (1048576) is dead (reason config): Hermes takes " +
        "bodies inline only",
      hint: expect.any(String),
    },
  ]);
  const run = await startHookspool(home, ["run"], { env });
  let db: Rows | null = null;
  try {
    const port = await run.port();
    db = await rows(home);
    const bodies = new Map<string, string>();
    for (const name of NAMES) {
      const body = bigBody(name, MB20);
      bodies.set(name, body);
      const res = await fetch(`http://127.0.0.1:${port}/hooks/${name}`, {
        method: "POST",
        body,
        headers: { "X-Sig": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}` },
      });
      expect([name, res.status]).toEqual([name, 202]);
    }
    const sha = (name: string) =>
      createHash("sha256")
        .update(bodies.get(name) as string)
        .digest("hex");
    // Committed before the 202: each row names its file, which is whole on disk.
    const events = await (db as Rows).events();
    expect(events.map((e) => [e.source, e.body_file])).toEqual(NAMES.map((n) => [n, sha(n)]));
    for (const e of events) {
      expect(e.size).toBeGreaterThan(MB20);
      expect(readFileSync(join(home, "bodies", e.body_file as string)).length).toBe(MB20);
    }
    await waitFor(
      "every batch finished",
      async () =>
        (await (db as Rows).batches()).every((b) => b.state === "delivered" || b.state === "dead") &&
        existsSync(scriptOut),
      60_000,
    );
    const byDest = new Map((await (db as Rows).batches()).map((b) => [b.destination, b]));
    expect(byDest.get("inline")?.state).toBe("delivered");
    expect(byDest.get("byref")?.state).toBe("delivered");
    expect(byDest.get("script:keep")?.state).toBe("delivered");
    const refused = byDest.get("refused");
    expect([refused?.state, refused?.dead_reason]).toEqual(["dead", "config"]);
    expect(refused?.last_error).toContain('large = "refuse"');
    // Hermes: dead before any request, the reason saying why and what to change; the gateway saw nothing.
    const hermes = byDest.get("hermes:big");
    expect([hermes?.state, hermes?.dead_reason]).toEqual(["dead", "config"]);
    const [size, rest] = (hermes?.last_error ?? "").split(" bytes with the bodies inline > ");
    expect(Number(size), `the dead reason: ${hermes?.last_error}`).toBeGreaterThan(MB20);
    expect(rest).toBe(
      "max_body_bytes 1048576; Hermes takes bodies inline only (raise both max_body_bytes, or route elsewhere)",
    );
    expect(gateway.hits).toEqual([]);

    // Inline: the whole body, byte for byte, as the document's event.
    const inline = receiver.got.find((d) => d.path === "/inline");
    expect(inline).toBeDefined();
    expect(JSON.stringify(inline?.doc.events[0])).toBe(bodies.get("inline") as string);

    // By reference: a signed link on the intake that serves the body; a forged one is refused.
    const byref = receiver.got.find((d) => d.path === "/byref");
    const ref = byref?.doc.events[0] as { body_url: string; body_bytes: number; body_sha256: string };
    expect([ref.body_bytes, ref.body_sha256]).toEqual([MB20, sha("byref")]);
    expect(ref.body_url.startsWith(`http://127.0.0.1:${port}/bodies/${sha("byref")}?`)).toBe(true);
    const fetched = await fetch(ref.body_url);
    expect(fetched.status).toBe(200);
    expect(
      createHash("sha256")
        .update(new Uint8Array(await fetched.arrayBuffer()))
        .digest("hex"),
    ).toBe(sha("byref"));
    const forged = ref.body_url.replace(/sig=([0-9a-f])/, (_m, c) => `sig=${c === "0" ? "1" : "0"}`);
    expect((await fetch(forged)).status).toBe(403);
    const expired = ref.body_url.replace(/expires=\d+/, "expires=1");
    expect((await fetch(expired)).status).toBe(403);

    // A script: the path of the file, which holds the body.
    const doc = JSON.parse(readFileSync(scriptOut, "utf8")) as { events: { body_file: string; body_bytes: number }[] };
    expect(doc.events[0].body_bytes).toBe(MB20);
    expect(readFileSync(doc.events[0].body_file, "utf8")).toBe(bodies.get("script") as string);
    // No body, secret or query string in the logs.
    expect(run.stderr()).not.toContain("sig=");
    expect(run.stderr()).not.toContain("yyyyyyyy");
  } finally {
    run.kill();
    await run.exited;
    await db?.close();
    receiver.stop();
    gateway.stop();
  }
}

describe("a 20 MB body through hookspool run", () => {
  test("on SQLite: committed with its file before the 202; inline, by reference, to a script, refused", async () => {
    await scenario("", {}, async (home) => {
      const spool = openSpool(join(home, "spool.db"));
      return {
        events: async () =>
          spool.db.query("SELECT source, body_file, size FROM events ORDER BY id").all() as {
            source: string;
            body_file: string | null;
            size: number;
          }[],
        batches: async () =>
          spool.db.query("SELECT destination, state, dead_reason, last_error FROM batches ORDER BY id").all() as {
            destination: string;
            state: string;
            dead_reason: string | null;
            last_error: string | null;
          }[],
        close: async () => spool.close(),
      };
    });
  });
});

describe.skipIf(!PG_BIN)("a 20 MB body through hookspool run on PostgreSQL", () => {
  const server = serverForSuite();
  test("committed with its file before the 202; inline, by reference, to a script, refused", async () => {
    await server().createDatabase("bodies");
    const url = `postgres://${server().user}:${SECRET_SENTINEL}@localhost/bodies?host=${server().socketDir}`;
    await scenario(
      '[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n',
      { HOOKSPOOL_PG_URL: url },
      async () => {
        const sql = new SQL(url, { max: 1 });
        return {
          events: async () =>
            ((await sql`SELECT source, body_file, size FROM events ORDER BY id`) as Record<string, unknown>[]).map(
              (r) => ({ source: String(r.source), body_file: r.body_file as string | null, size: Number(r.size) }),
            ),
          batches: async () =>
            (await sql`SELECT destination, state, dead_reason, last_error FROM batches ORDER BY id`) as {
              destination: string;
              state: string;
              dead_reason: string | null;
              last_error: string | null;
            }[],
          close: async () => sql.close(),
        };
      },
    );
  });
});
