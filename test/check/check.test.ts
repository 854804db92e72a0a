// hookspool check's rules: each class of misconfiguration it refuses or warns about is found,
// at the key to fix, and a clean config has no problem.
import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { checkConfig, checkConfigFile } from "../../src/check/check.ts";
import { loadConfig } from "../../src/config/load.ts";
import { renderStarterConfig } from "../../src/config/starter.ts";
import type { ConfigProblem } from "../../src/config/types.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { tempDir } from "../helpers/tmp.ts";

const SENTINEL = "s3ntinel-9f2c1e";

interface Home {
  dir: string;
  db: string;
  /** Write a file under the home with a mode; returns its absolute path. */
  file(name: string, text: string, mode?: number): string;
}

function newHome(opts: { db?: boolean } = {}): Home {
  const dir = tempDir();
  const file = (name: string, text: string, mode = 0o600) => {
    const path = join(dir, name);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, text, { mode });
    chmodSync(path, mode);
    return path;
  };
  const db = join(dir, "spool.db");
  if (opts.db !== false) {
    const spool = openSpool(db, { create: true });
    migrate(spool);
    spool.close();
  }
  return { dir, db, file };
}

/** A source and a script destination that pass every rule. */
function base(h: Home): string {
  const secret = h.file("secrets/github", `${SENTINEL}\n`);
  return (
    `
[sources.github]
template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", prefix = "sha256=", key = ` +
    `"repo", attrs = { class = "class" } }
secrets.secret = { file = "${secret}" }
action = "script:log"

[destinations."script:log"]
argv = ["/bin/true"]
`
  );
}

async function check(
  h: Home,
  text: string,
  opts: { env?: Record<string, string>; uid?: number } = {},
): Promise<ConfigProblem[]> {
  h.file("config.toml", text);
  const env = { PATH: process.env.PATH, HOME: h.dir, ...opts.env };
  const report = await checkConfigFile({ home: h.dir, env, cwd: h.dir, uid: opts.uid ?? process.getuid?.() ?? 0 });
  expect(JSON.stringify(report.problems)).not.toContain(SENTINEL);
  return report.problems;
}

const errors = (ps: ConfigProblem[]) => ps.filter((p) => p.level === "error");
const at = (ps: ConfigProblem[], key: string) => ps.filter((p) => p.key === key);

function expectProblem(
  ps: ConfigProblem[],
  level: "error" | "warning",
  key: string,
  message?: string | RegExp,
): ConfigProblem {
  const found = at(ps, key).filter(
    (p) =>
      p.level === level &&
      (message === undefined || (typeof message === "string" ? p.message.includes(message) : message.test(p.message))),
  );
  if (found.length === 0)
    throw new Error(`no ${level} at ${key} matching ${message}; got ${JSON.stringify(ps, null, 1)}`);
  return found[0];
}

describe("a clean config", () => {
  test("has no problem at all", async () => {
    const h = newHome();
    expect(await check(h, base(h))).toEqual([]);
  });

  test("the starter config of hookspool init passes with no error", async () => {
    const h = newHome();
    const secretFile = h.file("secrets/demo", "0123456789abcdef\n");
    const scriptFile = h.file("scripts/append-batch.sh", "#!/bin/sh\ncat >/dev/null\n", 0o700);
    const ps = await check(h, renderStarterConfig({ home: h.dir, secretFile, scriptFile }));
    expect(errors(ps)).toEqual([]);
  });

  test("checkConfig runs over a loaded config, with the running user injected", async () => {
    const h = newHome();
    const mod = h.file(
      "plugins/src.ts",
      'export default { authHeaders: [], verify: () => true, key: () => "k" };\n',
      0o644,
    );
    chownSync(mod, 4242, 0);
    h.file("config.toml", `${base(h)}\n[sources.custom]\nmodule = "${mod}"\naction = "script:log"\n`);
    const loaded = loadConfig({ home: h.dir, env: { HOME: h.dir }, cwd: h.dir });
    const input = { config: loaded.config, paths: loaded.paths, raw: {} };
    expect(errors(await checkConfig(input, { env: { HOME: h.dir }, cwd: h.dir, uid: 4242 }))).toEqual([]);
    expectProblem(
      await checkConfig(input, { env: { HOME: h.dir }, cwd: h.dir, uid: 1000 }),
      "error",
      "sources.custom.module",
      "owned by uid 4242",
    );
  });
});

describe("loading", () => {
  test("an unknown key is an error in check (a warning at run time)", async () => {
    const h = newHome();
    const text = `${base(h)}\n[intake]\nlisten_adress = "127.0.0.1:1"\n`;
    expectProblem(await check(h, text), "error", "intake.listen_adress", "unknown key");
    expect(loadConfig({ home: h.dir, cwd: h.dir }).problems).toEqual([
      expect.objectContaining({ level: "warning", key: "intake.listen_adress" }),
    ]);
  });

  test("every load error is reported, not only the first, with warnings beside them", async () => {
    const h = newHome();
    const text = `${base(h)}\n[dispatch]\nparallel = "four"\nbogus = 1\n[retention]\ndelivered_days = "a week"\n`;
    const ps = await check(h, text);
    expectProblem(ps, "error", "dispatch.parallel", "expected an integer");
    expectProblem(ps, "error", "retention.delivered_days", "expected a number");
    expectProblem(ps, "error", "dispatch.bogus", "unknown key");
  });

  test("invalid TOML is an error", async () => {
    const h = newHome();
    expect(errors(await check(h, "[intake\n"))[0].message).toContain("invalid TOML");
  });
});

describe("plugins", () => {
  test("a module that cannot be imported, or is no plugin, is an error; the others still load", async () => {
    const h = newHome();
    const broken = h.file("plugins/broken.ts", 'throw new Error("boom");\n', 0o644);
    const notPlugin = h.file("plugins/nothing.ts", "export const x = 1;\n", 0o644);
    const ps = await check(
      h,
      `${base(h)}\n[sources.a]\nmodule = "${broken}"\naction = "script:log"\n[sources.b]\nmodule ` +
        `= "${notPlugin}"\naction = "script:log"\n`,
    );
    expectProblem(ps, "error", "sources.a.module", "cannot load");
    expectProblem(ps, "error", "sources.b.module", "does not export a source plugin");
  });

  test("a secret the plugin needs and config does not supply is an error", async () => {
    const h = newHome();
    const mod = h.file(
      "plugins/needs.ts",
      'export default { secrets: ["token"], authHeaders: [], verify: () => true, key: () => "k" };\n',
      0o644,
    );
    expectProblem(
      await check(h, `${base(h)}\n[sources.n]\nmodule = "${mod}"\naction = "script:log"\n`),
      "error",
      "sources.n.secrets.token",
      "required",
    );
  });

  test("keep_headers naming the plugin's auth header is refused", async () => {
    const h = newHome();
    const ps = await check(
      h,
      base(h).replace('action = "script:log"', 'action = "script:log"\nkeep_headers = ["x-hub-signature-256"]'),
    );
    expectProblem(ps, "error", "sources.github.keep_headers", "auth header");
  });
});

describe("secrets", () => {
  test("a missing, empty or unset secret is an error naming the reference", async () => {
    const h = newHome();
    const empty = h.file("secrets/empty", "");
    const envFile = h.file("secrets/app.env", `OTHER=${SENTINEL}\n`);
    const text = `${base(h)}
[sources.a]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "${join(h.dir, "secrets/none")}" }
action = "script:log"
[sources.b]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "${empty}" }
action = "script:log"
[sources.c]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { env = "HOOKSPOOL_TEST_UNSET" }
action = "script:log"
[sources.d]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { env_file = "${envFile}", key = "TOKEN" }
action = "script:log"
`;
    const ps = await check(h, text);
    expectProblem(ps, "error", "sources.a.secrets.secret", "cannot be read");
    expectProblem(ps, "error", "sources.b.secrets.secret", "is empty");
    expectProblem(ps, "error", "sources.c.secrets.secret", "is not set");
    expectProblem(ps, "error", "sources.d.secrets.secret", "is not set in the file");
  });

  test(
    "a secret a source learns from its handshake: no file yet is a warning that says how to arm " +
      "it, never an error",
    async () => {
      const h = newHome();
      const text =
        `${base(h)}
[sources.asana]
template = { scheme = "hmac-sha256-hex", header = "X-Hook-Signature", learn = "header:X-Hook-Secret", ` +
        `key = "resource.gid", split = "events", dedup = "none" }
secrets.secret = { file = "${join(h.dir, "asana.secret")}" }
action = "script:log"
[sources.env]
template = { scheme = "hmac-sha256-hex", header = "X-Hook-Signature", learn = "header:X-Hook-Secret", ` +
        `key = "resource.gid", split = "events", dedup = "none" }
secrets.secret = { env = "HOOKSPOOL_TEST_UNSET" }
action = "script:log"
`;
      const ps = await check(h, text);
      const p = expectProblem(ps, "warning", "sources.asana.secrets.secret", "no secret learned yet");
      expect(p.hint).toContain("hookspool source arm asana");
      expect(ps.filter((x) => x.key === "sources.asana.secrets.secret" && x.level === "error")).toEqual([]);
      // A learned secret is kept in a file: an env reference cannot be written.
      expectProblem(
        ps,
        "error",
        "sources.env.secrets.secret",
        "learns its secret from a handshake and keeps it in a file",
      );
    },
  );

  test("a secret file readable by group/other is a warning", async () => {
    const h = newHome();
    const text = base(h);
    chmodSync(join(h.dir, "secrets/github"), 0o644);
    const p = expectProblem(
      await check(h, text),
      "warning",
      "sources.github.secrets.secret",
      "readable by group/other",
    );
    expect(p.hint).toContain("chmod 600");
  });

  test("an env_file readable by group is a warning; 0600 is not", async () => {
    const h = newHome();
    const envFile = h.file("secrets/app.env", `TOKEN=${SENTINEL}\n`, 0o640);
    const text =
      `${base(h)}\n[sources.d]\ntemplate = { scheme = "static-token", header = "X-Token", ` +
      `key = "k" }\nsecrets.secret = { env_file = "${envFile}", key = "TOKEN" }\naction = ` +
      `"script:log"\n`;
    expectProblem(await check(h, text), "warning", "sources.d.secrets.secret", "readable by group/other");
    chmodSync(envFile, 0o600);
    expect(await check(h, text)).toEqual([]);
  });

  test("an env reference resolves, with a note that it does not rotate", async () => {
    const h = newHome();
    const text =
      `${base(h)}\n[sources.e]\ntemplate = { scheme = "static-token", header = "X-Token", ` +
      `key = "k" }\nsecrets.secret = { env = "HOOKSPOOL_TEST_TOKEN" }\naction = "script:log"\n`;
    const ps = await check(h, text, { env: { HOOKSPOOL_TEST_TOKEN: SENTINEL } });
    expect(errors(ps)).toEqual([]);
    expectProblem(ps, "warning", "sources.e.secrets.secret", "env references do not rotate without a restart");
  });

  test("a destination's secret file is checked for its mode too", async () => {
    const h = newHome();
    const secret = h.file("secrets/audit", `${SENTINEL}\n`, 0o604);
    const text =
      `${base(h)}\n[destinations.audit]\ntype = "http"\nurl = ` +
      `"https://example.invalid/hook"\nsecret = { file = "${secret}" }\n`;
    expectProblem(await check(h, text), "warning", "destinations.audit.secret", "readable by group/other");
  });
});

describe("routes and destinations", () => {
  test("a source action or route destination that does not resolve is an error", async () => {
    const h = newHome();
    const text = `${base(h).replace('action = "script:log"', 'action = "script:nowhere"')}
[[routes]]
name = "q"
source = "github"
match = { class = "x" }
destination = "quarantine"
`;
    const ps = await check(h, text);
    expectProblem(ps, "error", "sources.github.action", 'destination "script:nowhere"');
    expectProblem(ps, "error", "routes[0].destination", "quarantine is reserved");
    // validate.ts warns about both at load time; check reports each once, as an error.
    expect(at(ps, "sources.github.action")).toHaveLength(1);
  });

  test("a plugin source with no action and no catch-all route is an error", async () => {
    const h = newHome();
    const ps = await check(h, base(h).replace('action = "script:log"\n', ""));
    expectProblem(ps, "error", "sources.github.action", "nowhere to go");
    const caught =
      `${base(h).replace('action = "script:log"\n', "")}\n[[routes]]\nname = "all"\n` +
      `source = "github"\ndestination = "script:log"\n`;
    expect(errors(await check(h, caught))).toEqual([]);
  });

  test("each destination's own check() problems are errors at its key", async () => {
    const h = newHome();
    const text = `${base(h)}
[destinations."script:broken"]
argv = ["${join(h.dir, "no-such-script")}"]
[destinations.audit]
type = "http"
url = "https://example.invalid/hook"
secret = { file = "${join(h.dir, "secrets/missing")}" }
headers = { "Content-Type" = "text/plain" }
`;
    const ps = await check(h, text);
    expectProblem(ps, "error", 'destinations."script:broken"', "is not an executable file");
    expectProblem(ps, "error", "destinations.audit", "cannot be read");
    expectProblem(ps, "error", "destinations.audit", "headers.Content-Type");
  });
});

describe("every delivery is signed", () => {
  test("an http destination without a secret is an error unless it says unsigned = true", async () => {
    const h = newHome();
    const dest = (extra: string) =>
      `${base(h)}\n[destinations.audit]\ntype = "http"\nurl = "https://example.invalid/hook"\n${extra}`;
    expectProblem(
      await check(h, dest("")),
      "error",
      "destinations.audit",
      "no secret: every delivery carries webhook-signature",
    );
    expect(at(await check(h, dest("unsigned = true\n")), "destinations.audit")).toEqual([]);
    expectProblem(
      await check(h, dest(`unsigned = true\nsecret = { file = "${h.file("secrets/audit", "s3cret\n", 0o600)}" }\n`)),
      "error",
      "destinations.audit",
      "unsigned = true with a secret",
    );
  });
});

describe("tee routes", () => {
  const route = (name: string, fields: string) => `[[routes]]\nname = "${name}"\nsource = "github"\n${fields}\n`;
  const scripts = (...names: string[]) =>
    names.map((n) => `[destinations."script:${n}"]\nargv = ["/bin/true"]\n`).join("");

  test("a tee route without a destination is refused", async () => {
    const h = newHome();
    expectProblem(
      await check(h, base(h) + route("t", "tee = true")),
      "error",
      "routes[0].destination",
      "a tee route needs a destination",
    );
  });

  test("a tee to the source's action is refused", async () => {
    const h = newHome();
    expectProblem(
      await check(h, base(h) + route("t", 'tee = true\ndestination = "script:log"')),
      "error",
      "routes[0].destination",
      "source github's action",
    );
  });

  test("a tee to a non-tee route's destination on the same source is refused", async () => {
    const h = newHome();
    const text =
      base(h) +
      scripts("ci") +
      route("ci", 'match = { class = "ci" }\ndestination = "script:ci"') +
      route("t", 'tee = true\nmatch = { class = "pr" }\ndestination = "script:ci"');
    expectProblem(await check(h, text), "error", "routes[1].destination", "non-tee route's destination");
  });

  test("two tees to one destination are refused when their matches overlap, allowed when exclusive", async () => {
    const h = newHome();
    const overlap =
      base(h) +
      scripts("audit") +
      route("t1", 'tee = true\nmatch = { class = "ci" }\ndestination = "script:audit"') +
      route("t2", 'tee = true\nmatch = { repo = "a/b" }\ndestination = "script:audit"');
    expectProblem(await check(h, overlap), "error", "routes[1].destination", "tee route t1");
    const exclusive =
      base(h) +
      scripts("audit") +
      route("t1", 'tee = true\nmatch = { class = "ci" }\ndestination = "script:audit"') +
      route("t2", 'tee = true\nmatch = { class = "pr" }\ndestination = "script:audit"');
    expect(errors(await check(h, exclusive))).toEqual([]);
  });

  test("more than 8 tee routes on a source are refused", async () => {
    const h = newHome();
    const names = Array.from({ length: 9 }, (_, i) => `t${i}`);
    const eight =
      base(h) +
      scripts(...names.slice(0, 8)) +
      names
        .slice(0, 8)
        .map((n) => route(n, `tee = true\ndestination = "script:${n}"`))
        .join("");
    expect(errors(await check(h, eight))).toEqual([]);
    const nine =
      base(h) + scripts(...names) + names.map((n) => route(n, `tee = true\ndestination = "script:${n}"`)).join("");
    expectProblem(await check(h, nine), "error", "routes[8]", "more than 8 tee routes");
  });
});

describe("windows", () => {
  const http = (cap: number, extra = "") =>
    `[destinations.web]\ntype = "http"\nurl = "https://example.invalid/hook"\nunsigned = true\n` +
    `max_body_bytes = ${cap}\n${extra}`;

  test("quiet_s > max_s is a warning, reported once", async () => {
    const h = newHome();
    const ps = await check(
      h,
      base(h).replace('action = "script:log"', 'action = "script:log"\nquiet_s = 60\nmax_s = 30'),
    );
    expect(errors(ps)).toEqual([]);
    expect(ps).toEqual([
      expect.objectContaining({
        level: "warning",
        key: "sources.github",
        message: "quiet_s (60) > max_s (30): the quiet window can never fire",
      }),
    ]);
  });

  test("max_bytes over 3/4 of the destination's max_body_bytes is an error at the key that sets it", async () => {
    const h = newHome();
    const inherited = base(h).replace('action = "script:log"', 'action = "web"\nmax_body_bytes = 1000') + http(100000);
    expectProblem(await check(h, inherited), "error", "coalesce.max_bytes", "over 3/4");
    const own =
      base(h).replace('action = "script:log"', 'action = "web"\nmax_body_bytes = 1000') +
      `[[routes]]\nname = "big"\nsource = "github"\nmax_bytes = 80000\n${http(100000)}`;
    const p = expectProblem(await check(h, own), "error", "routes[0].max_bytes", "over 3/4");
    expect(p.hint).toContain("75000");
  });

  test("a source whose bodies can exceed the route's max_bytes is an error", async () => {
    const h = newHome();
    const defaults = base(h).replace('action = "script:log"', 'action = "web"\nmax_bytes = 60000') + http(100000);
    expectProblem(
      await check(h, defaults),
      "error",
      "intake.max_body_bytes",
      "more than the route's max_bytes (60000)",
    );
    const own =
      base(h).replace('action = "script:log"', 'action = "web"\nmax_bytes = 60000\nmax_body_bytes = 70000') +
      http(100000);
    expectProblem(await check(h, own), "error", "sources.github.max_body_bytes", "one event could overflow");
    const fits =
      base(h).replace('action = "script:log"', 'action = "web"\nmax_bytes = 60000\nmax_body_bytes = 60000') +
      http(100000);
    expect(errors(await check(h, fits))).toEqual([]);
  });

  test("one event's body with its event_meta at its largest must fit the destination: kept headers count", async () => {
    const h = newHome();
    const keep = Array.from({ length: 40 }, (_, i) => `"X-Kept-${i}"`).join(", ");
    const many =
      base(h).replace(
        'action = "script:log"',
        `action = "web"\nmax_bytes = 60000\nmax_body_bytes = 60000\nkeep_headers = [${keep}]`,
      ) + http(100000);
    const p = expectProblem(
      await check(h, many),
      "error",
      "sources.github.max_body_bytes",
      /one event of source github can make a document of \d+ bytes/,
    );
    expect(p.message).toContain("more than the destination's max_body_bytes (100000)");
    expect(p.hint).toContain("keep fewer headers");
    const few =
      base(h).replace(
        'action = "script:log"',
        'action = "web"\nmax_bytes = 60000\nmax_body_bytes = 60000\nkeep_headers = ["X-Kept-1", "X-Kept-2"]',
      ) + http(100000);
    expect(errors(await check(h, few))).toEqual([]);
  });

  test("an unwrap destination bounds each event, and warns about a window", async () => {
    const h = newHome();
    const text =
      base(h).replace('action = "script:log"', 'action = "web"\nmax_body_bytes = 200000\nquiet_s = 5\nmax_s = 30') +
      http(100000, "unwrap = true\n");
    const ps = await check(h, text);
    expectProblem(ps, "error", "sources.github.max_body_bytes", "it unwraps");
    expectProblem(ps, "warning", "sources.github", "unwraps (one request per event)");
    expect(at(ps, "coalesce.max_bytes")).toEqual([]);
  });

  test("a dedup window longer than retention.delivered_days is a warning", async () => {
    const h = newHome();
    const ps = await check(
      h,
      base(h).replace('action = "script:log"', 'action = "script:log"\ndedup_window_s = 864000') +
        "\n[retention]\ndelivered_days = 7\n",
    );
    expect(errors(ps)).toEqual([]);
    expectProblem(ps, "warning", "sources.github.dedup_window_s", "longer than retention.delivered_days");
    expect(at(ps, "sources.github.dedup_window_s")).toHaveLength(1);
  });
});

describe("Hermes", () => {
  function hermesHome(routes: Record<string, unknown>): Home {
    const h = newHome();
    h.file("hermes/subs.json", JSON.stringify(routes));
    return h;
  }
  const hermes = (h: Home, destinations = "") =>
    base(h).replace('action = "script:log"', 'action = "hermes:github"\nmax_body_bytes = 65536\nspan = "immediate"') +
    `\n[hermes]\nsubscriptions_path = "~/hermes/subs.json"\n${destinations}`;

  test("a fed route that the gateway's file lacks is an error (the path's ~ is HOME)", async () => {
    const h = hermesHome({ other: { secret: SENTINEL } });
    // No [destinations."hermes:github"] was written: the problem is said where the name was.
    const missing = expectProblem(
      await check(h, hermes(h)),
      "error",
      "sources.github.action",
      'route "github" is not in',
    );
    expect(missing.hint).toContain("hermes webhook subscribe github");
    const own = await check(h, hermes(h, '[destinations."hermes:github"]\ntimeout_s = 30\n'));
    expectProblem(own, "error", 'destinations."hermes:github"', 'route "github" is not in');
    const ok = hermesHome({ github: { secret: SENTINEL } });
    expect(await check(ok, hermes(ok))).toEqual([]);
  });

  test("events or coalesce on a fed route is an error", async () => {
    const h = hermesHome({ github: { secret: SENTINEL, events: ["push"], coalesce: { window_s: 30 } } });
    const ps = await check(h, hermes(h));
    expectProblem(ps, "error", "sources.github.action", "sets events in");
    expectProblem(ps, "error", "sources.github.action", "sets coalesce in");
  });

  test("an unwrap destination may use events and coalesce; a window on it is a warning", async () => {
    const h = hermesHome({ github: { secret: SENTINEL, events: ["push"], coalesce: true } });
    const unwrap = '[destinations."hermes:github"]\nunwrap = true\n';
    expect(await check(h, hermes(h, unwrap))).toEqual([]);
    const windowed = hermes(h, unwrap).replace('span = "immediate"', 'span = "burst"');
    const ps = await check(h, windowed);
    expect(errors(ps)).toEqual([]);
    expectProblem(ps, "warning", "sources.github", "unwraps");
  });

  test("a source whose bodies may be kept in a file too large for the route's Hermes is a warning", async () => {
    const h = hermesHome({ github: { secret: SENTINEL } });
    // 25 MiB accepted, the gateway's 1 MiB default: such a body would be dead (reason config).
    const large = hermes(h).replace("max_body_bytes = 65536", "max_body_bytes = 26214400");
    const ps = await check(h, large);
    expect(errors(ps)).toEqual([]);
    const w = expectProblem(
      ps,
      "warning",
      "sources.github.max_body_bytes",
      "route github -> hermes:github: source github accepts bodies up to 26214400 bytes; one kept in a file " +
        "that does not fit the destination's max_body_bytes (1048576) is dead (reason config): " +
        "Hermes takes bodies inline only",
    );
    expect(w.hint).toBe(
      "lower sources.github.max_body_bytes to <= 1048576, or route large bodies to an http destination that " +
        "takes body_url",
    );
    // The destination's max_body_bytes raised to fit (as the gateway's must be): no warning.
    const fits = `${large}\n[destinations."hermes:github"]\nmax_body_bytes = 26214400\n`;
    expect(at(await check(h, fits), "sources.github.max_body_bytes")).toEqual([]);
    // A cap no larger than what a row keeps inline never makes a file: no warning either.
    expect(at(await check(h, hermes(h)), "sources.github.max_body_bytes")).toEqual([]);
  });

  test("an unreadable subscriptions file is an error only when a hermes destination is used", async () => {
    const h = hermesHome({ github: { secret: SENTINEL } });
    chmodSync(join(h.dir, "hermes/subs.json"), 0o000);
    if (process.getuid?.() !== 0)
      expectProblem(await check(h, hermes(h)), "error", "hermes.subscriptions_path", "cannot be read (EACCES)");
    expect(await check(h, `${base(h)}\n[hermes]\nsubscriptions_path = "~/hermes/subs.json"\n`)).toEqual([]);
  });

  test("no subscriptions file yet (Hermes not set up) is a warning that says how to make each route", async () => {
    const h = newHome();
    const ps = await check(h, hermes(h));
    expect(errors(ps)).toEqual([]);
    const w = expectProblem(ps, "warning", "hermes.subscriptions_path", "no file at");
    expect(w.hint).toContain("hermes webhook subscribe github");
    expect(await check(h, `${base(h)}\n[hermes]\nsubscriptions_path = "~/hermes/subs.json"\n`)).toEqual([]);
  });
});

describe("header names", () => {
  test("event_header or dedup_header naming a header hookspool sets is refused", async () => {
    const h = newHome();
    const text = `${base(h).replace('action = "script:log"', 'action = "script:log"\nevent_header = "Webhook-Id"')}
[destinations.web]
type = "http"
url = "https://example.invalid/hook"
unsigned = true
unwrap = true
event_header = "X-GitHub-Event"
dedup_header = "X-Hookspool-Batch"
`;
    const ps = await check(h, text);
    expectProblem(ps, "error", "sources.github.event_header", "Webhook-Id is a header hookspool sets");
    expectProblem(ps, "error", "destinations.web.dedup_header", "X-Hookspool-Batch is a header hookspool sets");
    expect(at(ps, "destinations.web.event_header")).toEqual([]);
    // Reported once, at its own key, not again among the destination's check() messages.
    expect(at(ps, "destinations.web")).toEqual([]);
  });

  test("a plugin's eventHeader naming one is refused too", async () => {
    const h = newHome();
    const mod = h.file(
      "plugins/ua.ts",
      'export default { authHeaders: [], eventHeader: "User-Agent", verify: () => true, key: () => "k" };\n',
      0o644,
    );
    expectProblem(
      await check(h, `${base(h)}\n[sources.ua]\nmodule = "${mod}"\naction = "script:log"\n`),
      "error",
      "sources.ua.event_header",
      "the plugin's eventHeader User-Agent",
    );
  });
});

describe("stale rules", () => {
  test("a stale rule on a template source without a version is an error at its key; with one it passes", async () => {
    const h = newHome();
    const text = `${base(h).replace('action = "script:log"', 'action = "script:log"\nstale = "mark"')}
[[routes]]
name = "ci"
source = "github"
match = { class = "ci" }
stale = "skip"
`;
    const ps = await check(h, text);
    expectProblem(ps, "error", "sources.github.stale", 'stale = "mark" needs a version, and source github reads none');
    expectProblem(ps, "error", "routes[0].stale", 'stale = "skip" needs a version');
    const versioned = text.replace('key = "repo"', 'key = "repo", version = "field:updated_at"');
    expect(await check(h, versioned)).toEqual([]);
  });

  test("a code source's plugin says whether it reads a version", async () => {
    const h = newHome();
    const plain = h.file(
      "plugins/plain.ts",
      'export default { authHeaders: [], verify: () => true, key: () => "k" };\n',
      0o644,
    );
    const timed = h.file(
      "plugins/timed.ts",
      'export default { authHeaders: [], verify: () => true, key: () => "k", version: (p) => p.at };\n',
      0o644,
    );
    const text = (mod: string) => `${base(h)}\n[sources.c]\nmodule = "${mod}"\naction = "script:log"\nstale = "skip"\n`;
    expectProblem(await check(h, text(plain)), "error", "sources.c.stale", "source c reads none");
    expect(await check(h, text(timed))).toEqual([]);
  });
});

describe("the intake", () => {
  test("a non-loopback listen is an error, a warning with allow_non_loopback", async () => {
    const h = newHome();
    expectProblem(
      await check(h, `${base(h)}\n[intake]\nlisten = "0.0.0.0:8650"\n`),
      "error",
      "intake.listen",
      "not a loopback address",
    );
    const allowed = await check(h, `${base(h)}\n[intake]\nlisten = "0.0.0.0:8650"\nallow_non_loopback = true\n`);
    expect(errors(allowed)).toEqual([]);
    expectProblem(allowed, "warning", "intake.listen", "the reverse proxy should own the network");
    expect(await check(h, `${base(h)}\n[intake]\nlisten = "unix:/run/hookspool/intake.sock"\n`)).toEqual([]);
  });

  test("intake.threads set to anything is noted as ignored", async () => {
    const h = newHome();
    const ps = await check(h, `${base(h)}\n[intake]\nthreads = 16\n`);
    expect(ps).toEqual([expect.objectContaining({ level: "warning", key: "intake.threads" })]);
    expect(ps[0].message).toContain("one event loop");
  });
});

describe("code loaded by path", () => {
  const plugin = 'export default { authHeaders: [], verify: () => true, key: () => "k" };\n';

  test("a relative module is resolved against the config's directory and checked there", async () => {
    const h = newHome();
    h.file("plugins/rel.ts", plugin, 0o644);
    expect(await check(h, `${base(h)}\n[sources.rel]\nmodule = "plugins/rel.ts"\naction = "script:log"\n`)).toEqual([]);
    chmodSync(join(h.dir, "plugins/rel.ts"), 0o664);
    expectProblem(
      await check(h, `${base(h)}\n[sources.rel]\nmodule = "plugins/rel.ts"\naction = "script:log"\n`),
      "error",
      "sources.rel.module",
      "writable by group/other",
    );
  });

  test("a module that is a directory, or owned by someone else, is an error and is not imported", async () => {
    const h = newHome();
    mkdirSync(join(h.dir, "plugins/dir.ts"), { recursive: true });
    const marker = join(h.dir, "imported");
    const foreign = h.file(
      "plugins/foreign.ts",
      `import { writeFileSync } from "node:fs"; writeFileSync(${JSON.stringify(marker)}, "x");\n${plugin}`,
      0o644,
    );
    chownSync(foreign, 4242, 4242);
    const ps = await check(
      h,
      `${base(h)}\n[sources.d]\nmodule = "plugins/dir.ts"\naction = "script:log"\n[sources.f]\nmodule ` +
        `= "${foreign}"\naction = "script:log"\n`,
      { uid: 1000 },
    );
    expectProblem(ps, "error", "sources.d.module", "not a regular file");
    expectProblem(ps, "error", "sources.f.module", "owned by uid 4242");
    expect(() => statSync(marker)).toThrow();
  });

  test("spool.bobbin_path entries are absolute, private directories", async () => {
    const h = newHome();
    mkdirSync(join(h.dir, "bobbins/good"), { recursive: true, mode: 0o755 });
    mkdirSync(join(h.dir, "bobbins/open"), { recursive: true });
    chmodSync(join(h.dir, "bobbins/open"), 0o777);
    const aFile = h.file("bobbins/file", "x");
    const paths = [join(h.dir, "bobbins/good"), "bobbins/good", join(h.dir, "bobbins/open"), aFile, "~/bobbins/good"];
    const ps = await check(h, `[spool]\nbobbin_path = ${JSON.stringify(paths)}\n${base(h)}`);
    expect(at(ps, "spool.bobbin_path[0]")).toEqual([]);
    expectProblem(ps, "error", "spool.bobbin_path[1]", "not an absolute path");
    expectProblem(ps, "error", "spool.bobbin_path[2]", "writable by group/other");
    expectProblem(ps, "error", "spool.bobbin_path[3]", "not a directory");
    expect(at(ps, "spool.bobbin_path[4]")).toEqual([]);
  });
});

describe("the database", () => {
  test("a missing spool is a warning", async () => {
    const h = newHome({ db: false });
    expect(await check(h, base(h))).toEqual([
      expect.objectContaining({
        level: "warning",
        key: "spool.db",
        message: expect.stringContaining("hookspool migrate creates it"),
      }),
    ]);
  });

  test("a corrupt spool is an error", async () => {
    const h = newHome();
    // Fill it with a few pages of rows first, so the middle of the file is b-tree pages.
    const spool = openSpool(h.db);
    spool.db.run("CREATE TABLE filler (x TEXT)");
    for (let i = 0; i < 200; i++) spool.db.run("INSERT INTO filler VALUES (?)", ["y".repeat(500)]);
    spool.db.run("PRAGMA wal_checkpoint(TRUNCATE)");
    spool.close();
    const size = statSync(h.db).size;
    const fd = openSync(h.db, "r+");
    writeSync(fd, Buffer.alloc(8192, 0xa5), 0, 8192, Math.floor(size / 2 / 4096) * 4096);
    closeSync(fd);
    const p = expectProblem(await check(h, base(h)), "error", "spool.db", "database corrupt");
    expect(p.hint).toContain("backup");
  });

  test("an older schema is a warning (the dispatcher migrates at startup); a newer one is an error", async () => {
    const h = newHome();
    const setVersion = (v: number) => {
      const spool = openSpool(h.db);
      spool.db.run(`PRAGMA user_version = ${v}`);
      spool.close();
    };
    setVersion(1);
    expect(expectProblem(await check(h, base(h)), "warning", "spool.db", "older").hint).toContain("hookspool migrate");
    setVersion(99);
    expect(expectProblem(await check(h, base(h)), "error", "spool.db", "newer").hint).toContain("downgrade");
  });
});

test("no secret value appears in any problem", async () => {
  const h = newHome();
  const loose = h.file("secrets/loose", `${SENTINEL}\n`, 0o666);
  const envFile = h.file("secrets/app.env", `TOKEN=${SENTINEL}\n`, 0o644);
  h.file("hermes/subs.json", JSON.stringify({ github: { secret: `whsec_${SENTINEL}!`, events: [SENTINEL.length] } }));
  const text = `${base(h).replace('action = "script:log"', 'action = "hermes:github"')}
[hermes]
subscriptions_path = "~/hermes/subs.json"
[sources.a]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "${loose}" }
action = "web"
[sources.b]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { env_file = "${envFile}", key = "TOKEN" }
action = "web"
[sources.c]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { env = "TOKEN" }
action = "web"
[sources.d]
template = { scheme = "static-token", header = "X-Token", key = "k" }
secrets.secret = { file = "${h.dir}/secrets/missing" }
action = "web"
[destinations.web]
type = "http"
url = "https://example.invalid/hook"
secret = { file = "${loose}" }
secret_previous = [{ env = "TOKEN" }]
`;
  // check() itself asserts the sentinel is absent; make sure there was plenty to report.
  const ps = await check(h, text, { env: { TOKEN: `whsec_${SENTINEL}` } });
  expect(errors(ps).length).toBeGreaterThan(2);
  expect(readFileSync(loose, "utf8")).toContain(SENTINEL);
});

test("a bobbin processor's state directory, once it exists, is 0700 and the service user's", async () => {
  const h = newHome();
  const root = join(h.dir, "bobbins");
  writeBobbin(root, "acme/mail", manifestText("acme.mail", '[processor]\nmodule = "processor"\nstate = true\n'));
  const state = join(h.dir, "mail-state");
  const text =
    `${base(h)}\n[spool]\nbobbin_path = ["${root}"]\n[bobbins.mail]\nbobbin = "acme.mail"\n` +
    `secrets.secret = { file = "${h.file("secrets/mail", "s")}" }\noutputs = { "*" = "hermes:mail" }\n` +
    `state_dir = "${state}"\n`;
  // Not there yet: the first batch creates it, private.
  expect(at(await check(h, text), "bobbins.mail.state_dir")).toEqual([]);
  mkdirSync(state, { mode: 0o755 });
  chmodSync(state, 0o755);
  expectProblem(await check(h, text), "error", "bobbins.mail.state_dir", "is open to group/other (mode 0755)");
  chmodSync(state, 0o700);
  expect(at(await check(h, text), "bobbins.mail.state_dir")).toEqual([]);
  const uid = (process.getuid?.() ?? 0) + 1;
  expectProblem(
    await check(h, text, { uid }),
    "error",
    "bobbins.mail.state_dir",
    `not the user hookspool runs as (uid ${uid})`,
  );
});

test(
  "a bobbin processor must be there to run: its module a file the owner/mode rule lets the runtime " + "load",
  async () => {
    const h = newHome();
    const root = join(h.dir, "bobbins");
    const dir = writeBobbin(root, "acme/mail", manifestText("acme.mail", '[processor]\nmodule = "processor"\n'));
    const text =
      `${base(h)}\n[spool]\nbobbin_path = ["${root}"]\n[bobbins.mail]\nbobbin = "acme.mail"\n` +
      `secrets.secret = { file = "${h.file("secrets/mail", "s")}" }\noutputs = { "*" = "hermes:mail" }\n`;
    expectProblem(
      await check(h, text),
      "error",
      "bobbins.mail",
      `its processor: no file at ${join(dir, "processor.ts")}`,
    );
    writeFileSync(join(dir, "processor.ts"), "export default { process: () => [] };\n", { mode: 0o644 });
    chmodSync(join(dir, "processor.ts"), 0o644);
    expect(at(await check(h, text), "bobbins.mail")).toEqual([]);
    chmodSync(join(dir, "processor.ts"), 0o666);
    expectProblem(await check(h, text), "error", "bobbins.mail", "writable by group/other");
  },
);

test("an instance of an unknown bobbin is one error for check, with where to look", async () => {
  const h = newHome();
  const ps = await check(h, `${base(h)}\n[bobbins.mailbox]\nbobbin = "nobody.mailbox"\n`);
  const p = expectProblem(ps, "error", "bobbins.mailbox.bobbin", 'no bobbin "nobody.mailbox"');
  expect(p.hint).toContain("hookspool bobbin list");
  expect(at(ps, "bobbins.mailbox.bobbin")).toHaveLength(1);
});
