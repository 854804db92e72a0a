// hookspool sweep: against a stub GitHub API on loopback, every page is read, a GUID that landed
// later or that the spool already holds is left alone, the others are redelivered once, a rate
// limit stops the run with exit 1, and the token goes only into the Authorization header.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { PG_BIN, type PgServer, startPostgres } from "../helpers/pg.ts";

const TOKEN = "kit-test-sweep-token-5e1f";
// The CLI runs on the real clock: the deliveries are dated from it.
const NOW = Math.floor(Date.now() / 1000);
const at = (ago: number) => new Date((NOW - ago) * 1000).toISOString();
const delivery = (id: number, guid: string, status: number, ago: number) => ({
  id,
  guid,
  delivered_at: at(ago),
  status_code: status,
  status: status === 200 ? "OK" : "failed",
  event: "push",
  redelivery: false,
});

// Newest first, over two pages; the second ends with a delivery older than --since.
const PAGE1 = [
  delivery(12, "guid-a", 200, 100),
  delivery(13, "guid-b", 503, 200),
  delivery(11, "guid-a", 502, 300),
  delivery(14, "guid-c", 0, 400),
];
const PAGE2 = [delivery(15, "guid-e", 502, 500), delivery(9, "guid-old", 502, 3 * 86400)];

let server: ReturnType<typeof Bun.serve>;
const posts: string[] = [];
const auth = new Set<string>();
let limitPosts = false;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      auth.add(req.headers.get("authorization") ?? "");
      if (req.method === "GET" && url.pathname === "/repos/octo-org/hello/hooks/42/deliveries") {
        if (url.searchParams.get("cursor") === "p2") return Response.json(PAGE2);
        return Response.json(PAGE1, {
          headers: {
            Link:
              `<http://127.0.0.1:${server.port}/repos/octo-org/hello/hooks/42/deliveries?per_page=` +
              `100&cursor=p2>; rel="next"`,
          },
        });
      }
      const m = /^\/repos\/octo-org\/hello\/hooks\/42\/deliveries\/(\d+)\/attempts$/.exec(url.pathname);
      if (req.method === "POST" && m) {
        if (limitPosts)
          return new Response('{"message":"API rate limit exceeded"}', {
            status: 403,
            headers: { "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(NOW + 600) },
          });
        posts.push(m[1]);
        return new Response("{}", { status: 202 });
      }
      return new Response("not found", { status: 404 });
    },
  });
});
afterAll(() => server.stop(true));

async function home(): Promise<string> {
  const h = join(tempDir(), "home");
  expect((await cli(["--home", h, "init"])).code).toBe(0);
  writeFileSync(join(h, "github-secret"), "kit-test-secret-github", { mode: 0o600 });
  writeFileSync(join(h, "sweep-token"), TOKEN, { mode: 0o600 });
  appendFileSync(
    join(h, "config.toml"),
    `\n[bobbins.github]\nbobbin = "github.repo"\nsecrets.secret = { file ` +
      `= "${join(h, "github-secret")}" }\nsecrets.sweep_token = { file = "${join(h, "sweep-token")}" }\n` +
      `outputs = { "*" = "script:demo-log" }\n`,
  );
  // guid-c reached the spool (its answer was lost on the way back to GitHub).
  const enq = await cli(
    ["--home", h, "enqueue", "--source", "github", "--key", "octo-org/hello:push", "--dedup-id", "guid-c"],
    { stdin: '{"ref":"refs/heads/main"}' },
  );
  expect(enq.code).toBe(0);
  return h;
}

const sweep = (h: string, ...more: string[]) =>
  cli([
    "--home",
    h,
    "sweep",
    "github",
    "--repo",
    "octo-org/hello",
    "--hook",
    "42",
    "--api-url",
    `http://127.0.0.1:${server.port}`,
    ...more,
  ]);

describe("hookspool sweep (github.repo)", () => {
  test(
    "redelivers each GUID that never landed and is not spooled, once; reads every page; stops at " + "--since",
    async () => {
      const h = await home();
      posts.length = 0;
      const r = await sweep(h);
      expect(r.err).toBe("");
      expect(r.code).toBe(0);
      expect(posts.sort()).toEqual(["13", "15"]);
      expect(r.out).toContain("redelivered guid-b (push, delivery 13)");
      expect(r.out).toContain("redelivered guid-e (push, delivery 15)");
      expect(r.out).toMatch(
        /octo-org\/hello hook 42: 4 deliveries since .*, 1 landed, 1 spooled already, 2 redelivered\n$/,
      );
      expect(r.out).not.toContain(TOKEN);
      expect([...auth]).toContain(`Bearer ${TOKEN}`);
    },
  );

  test("--dry-run asks GitHub for nothing; --json says the same as numbers", async () => {
    const h = await home();
    posts.length = 0;
    const r = await sweep(h, "--dry-run", "--json");
    expect(posts).toEqual([]);
    const report = JSON.parse(r.out) as {
      dry_run: boolean;
      guids: number;
      landed: number;
      spooled: string[];
      redelivered: { guid: string }[];
    };
    expect(report).toMatchObject({ dry_run: true, guids: 4, landed: 1, spooled: ["guid-c"] });
    expect(report.redelivered.map((x) => x.guid)).toEqual(["guid-b", "guid-e"]);
  });

  test("a rate limit stops the run: exit 1, and it says when to try again", async () => {
    const h = await home();
    limitPosts = true;
    try {
      const r = await sweep(h);
      expect(r.code).toBe(1);
      expect(r.err).toContain("hookspool: stopped early: GitHub's rate limit: it resets at");
    } finally {
      limitPosts = false;
    }
  });

  test("a bobbin without a sweep, a missing token, bad arguments: one line each", async () => {
    const h = await home();
    const run = (...argv: string[]) => cli(["--home", h, "sweep", ...argv]);
    expect((await run("nope", "--repo", "a/b", "--hook", "1")).err).toMatch(
      /^hookspool: no \[bobbins\.nope\] in the config/,
    );
    expect((await run("github", "--repo", "a", "--hook", "1")).err).toMatch(
      /^hookspool: --repo <owner>\/<repo> is required/,
    );
    expect((await run("github", "--repo", "a/b")).err).toMatch(/^hookspool: --hook <webhook id> is required/);
    expect((await run("github", "--repo", "a/b", "--hook", "1", "--api-url", "http://github.example.com")).err).toMatch(
      /expected an https URL/,
    );
    appendFileSync(
      join(h, "config.toml"),
      `\n[bobbins.kaneo]\nbobbin = "kaneo.projects"\nsecrets.secret = { file ` +
        `= "${join(h, "github-secret")}" }\noutputs = { "*" = "script:demo-log" }\n`,
    );
    expect((await run("kaneo", "--repo", "a/b", "--hook", "1")).err).toMatch(
      /^hookspool: kaneo\.projects declares no sweep/,
    );
  });
});

describe.skipIf(!PG_BIN)("hookspool sweep on PostgreSQL", () => {
  let pg: PgServer;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await pg?.stop();
  });

  test("what the database holds is left alone; the rest is redelivered once", async () => {
    await pg.createDatabase("sweep");
    const env = {
      HOOKSPOOL_BACKEND: "postgres",
      HOOKSPOOL_PG_URL: `postgres://${pg.user}@localhost/sweep?host=${pg.socketDir}`,
    };
    const h = join(tempDir(), "home");
    expect((await cli(["--home", h, "init"])).code).toBe(0);
    writeFileSync(join(h, "github-secret"), "kit-test-secret-github", { mode: 0o600 });
    writeFileSync(join(h, "sweep-token"), TOKEN, { mode: 0o600 });
    const file = join(h, "config.toml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(/^\[spool\]$/m, '[spool]\nurl = { env = "HOOKSPOOL_PG_URL" }'),
    );
    appendFileSync(
      file,
      `\n[bobbins.github]\nbobbin = "github.repo"\nsecrets.secret = { file ` +
        `= "${join(h, "github-secret")}" }\nsecrets.sweep_token = { file = "${join(h, "sweep-token")}" ` +
        `}\noutputs = { "*" = "script:demo-log" }\n`,
    );
    expect((await cli(["--home", h, "migrate"], { env })).code).toBe(0);
    const enq = await cli(
      ["--home", h, "enqueue", "--source", "github", "--key", "octo-org/hello:push", "--dedup-id", "guid-c"],
      { env, stdin: '{"ref":"refs/heads/main"}' },
    );
    expect(enq.code, enq.err).toBe(0);
    posts.length = 0;
    limitPosts = false;
    const r = await cli(
      [
        "--home",
        h,
        "sweep",
        "github",
        "--repo",
        "octo-org/hello",
        "--hook",
        "42",
        "--api-url",
        `http://127.0.0.1:${server.port}`,
      ],
      { env },
    );
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    expect(posts.sort()).toEqual(["13", "15"]);
    expect(r.out).toMatch(
      /octo-org\/hello hook 42: 4 deliveries since .*, 1 landed, 1 spooled already, 2 redelivered\n$/,
    );
  });
});
