// The bare baselines hookspool's intake is compared with: Bun.serve + bun:sqlite on the pragmas
// hookspool uses (WAL, synchronous=FULL), no verification, no routing, answering 202 only
// after the COMMIT that holds the request.
//
//   bun baseline.ts commit <db>   A: one BEGIN IMMEDIATE; INSERT; COMMIT per request
//   bun baseline.ts group <db>    B: group commit: requests that arrive while a commit runs
//                                 wait and go into the next transaction together; each
//                                 answer is sent after the COMMIT of its transaction
//
// It logs `listening listen=127.0.0.1:<port>` on stderr, as hookspool's intake does.
import { Database } from "bun:sqlite";

const [mode, path] = process.argv.slice(2);
if ((mode !== "commit" && mode !== "group") || !path) {
  console.error("usage: bun baseline.ts commit|group <db>");
  process.exit(2);
}

const db = new Database(path, { create: true, strict: true });
db.run("PRAGMA busy_timeout = 10000");
db.run("PRAGMA journal_mode = WAL");
db.run("PRAGMA synchronous = FULL");
db.run(
  "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, " +
    "delivery TEXT, payload TEXT NOT NULL, received_at REAL NOT NULL)",
);
const insert = db.query("INSERT INTO events (delivery, payload, received_at) VALUES (?, ?, ?)");
const one = db.transaction((delivery: string | null, payload: string) => {
  insert.run(delivery, payload, Date.now() / 1000);
});

interface Waiting {
  delivery: string | null;
  payload: string;
  done: (ok: boolean) => void;
}
let queue: Waiting[] = [];
let scheduled = false;
const many = db.transaction((items: Waiting[]) => {
  const at = Date.now() / 1000;
  for (const w of items) insert.run(w.delivery, w.payload, at);
});

/** Commit everything queued in one transaction, then answer each; what arrives meanwhile waits for the next. */
function flush(): void {
  scheduled = false;
  const items = queue;
  queue = [];
  let ok = true;
  try {
    many.immediate(items);
  } catch {
    ok = false;
  }
  for (const w of items) w.done(ok);
}

const accepted = () =>
  new Response('{"status":"queued"}', { status: 202, headers: { "Content-Type": "application/json" } });
const failed = () => new Response(null, { status: 503 });

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 60,
  async fetch(req) {
    const payload = await req.text();
    const delivery = req.headers.get("x-github-delivery");
    if (mode === "commit") {
      try {
        one.immediate(delivery, payload);
        return accepted();
      } catch {
        return failed();
      }
    }
    const ok = await new Promise<boolean>((done) => {
      queue.push({ delivery, payload, done });
      // After the I/O of this turn of the loop: every request already read joins this commit.
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
    return ok ? accepted() : failed();
  },
});
console.error(`baseline ${mode}: listening listen=127.0.0.1:${server.port}`);

process.on("SIGTERM", () => {
  server.stop(true);
  db.close();
  process.exit(0);
});
