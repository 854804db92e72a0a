// The --help page: our own layout (not citty's), the same for every command and group.
import { describe, expect, test } from "bun:test";
import type { CommandDef } from "citty";
import { makeCli } from "../../src/cli/context.ts";
import { rootCommand } from "../../src/cli/root.ts";
import { cli } from "../helpers/cli.ts";

const io = { out() {}, err() {}, readStdin: async () => new Uint8Array(), env: {}, cwd: "/", isTTY: false };
const root = rootCommand(makeCli(io, { json: false }));

/** Every command path: `list`, `issues ack`, `source test`, ... */
function commandPaths(): string[][] {
  const out: string[][] = [];
  for (const [name, cmd] of Object.entries(root.subCommands as Record<string, CommandDef>)) {
    out.push([name]);
    for (const sub of Object.keys((cmd.subCommands ?? {}) as Record<string, CommandDef>)) out.push([name, sub]);
  }
  return out;
}

const help = async (argv: string[], tty = false) => {
  const r = await cli([...argv, "--help"], { tty });
  expect({ argv, code: r.code, err: r.err }).toEqual({ argv, code: 0, err: "" });
  return r.out;
};

/** The lines of one section ("Options:") up to the next blank line. */
function section(page: string, title: string): string[] {
  const lines = page.split("\n");
  const at = lines.indexOf(`${title}:`);
  if (at < 0) return [];
  const end = lines.indexOf("", at);
  return lines.slice(at + 1, end < 0 ? undefined : end);
}

describe("every help page", () => {
  test.each(commandPaths().map((p) => [p.join(" "), p]))(
    "%s: name - description, usage, left-aligned columns, no trailing spaces",
    async (name, path) => {
      const page = await help(path as string[]);
      const lines = page.trimEnd().split("\n");
      expect(lines[0]).toMatch(new RegExp(`^hookspool ${name} - \\S`));
      // no version suffix and none of citty's layout
      expect(lines[0]).not.toMatch(/v\d+\.\d+|\(hookspool/);
      expect(page).not.toContain("USAGE");
      expect(lines[2]).toStartWith(`Usage: hookspool ${name}`);
      for (const line of lines) expect({ line, trailing: /\s$/.test(line) }).toEqual({ line, trailing: false });
      expect(page).not.toMatch(/\(Default|\(default: \)/);
      expect(page).not.toMatch(/spec \d/);
      // one flag column width on the page, flags starting at the left margin
      const rows = ["Arguments", "Options", "Global options", "Commands"].flatMap((t) => section(page, t));
      expect(rows.length).toBeGreaterThan(0);
      const starts = new Set(rows.map((r) => /^ {2}\S+(?: \S+)? +(?=\S)/.exec(r)?.[0].length ?? -1));
      expect({ name, starts: [...starts] }).toEqual({ name, starts: [Math.max(...starts)] });
      for (const r of rows) expect(r).toMatch(/^ {2}\S/);
      expect(section(page, "Global options").map((r) => r.trim().split(" ")[0])).toEqual([
        "--home",
        "--config",
        "--json",
      ]);
      for (const flag of ["--home", "--config", "--json"])
        expect(section(page, "Options").join("\n")).not.toContain(flag);
    },
  );
});

describe("what the pages say", () => {
  test("replay shows that it takes batch ids, or --dead, or --delivered", async () => {
    const page = await help(["replay"]);
    expect(page.split("\n")[2]).toBe(
      "Usage: hookspool replay <batch>... | --dead [--destination D] [--source S] [--since T] " +
        "[--reason R] [--where COND]... [--plan] | --delivered [<batch>...] [--destination D] [--source S] " +
        "[--since T] [--where COND]...",
    );
    expect(section(page, "Arguments")).toEqual([
      expect.stringMatching(/^ {2}<batch>\.\.\. +the dead batches to replay/),
    ]);
    expect(section(page, "Options").map((r) => r.trim().split(" ")[0])).toEqual([
      "--dead",
      "--delivered",
      "--destination",
      "--source",
      "--since",
      "--reason",
      "--where",
      "--plan",
    ]);
  });

  test("exclude and drop give their usage lines", async () => {
    expect((await help(["exclude"])).split("\n")[2]).toBe("Usage: hookspool exclude <batch> <event>... --yes");
    expect((await help(["drop"])).split("\n")[2]).toBe("Usage: hookspool drop <batch>... --yes");
  });

  test("a default is shown only when there is one", async () => {
    expect(section(await help(["list"]), "Options")).toContainEqual(
      expect.stringMatching(/^ {2}--limit <n> +at most this many \(default: 50\)$/),
    );
    // enqueue's --event-type defaults to "": no "(default: )"
    const enqueue = section(await help(["enqueue"]), "Options");
    expect(enqueue).toContainEqual(expect.stringMatching(/^ {2}--event-type <event-type> +event type$/));
    expect(enqueue).toContainEqual(expect.stringMatching(/^ {2}--source <source> +a configured source \(required\)$/));
  });

  test("the help texts state rules instead of citing a spec", async () => {
    const status = await help(["status"]);
    expect(status.split("\n")[0]).toBe(
      "hookspool status - health of the spool, dispatcher, destinations and sources; exit 1 while any " +
        "problem is reported",
    );
    expect((await help(["prune"])).split("\n")[0]).toContain("past their [retention] ages (dead batches are kept)");
    expect(await help([])).not.toMatch(/spec \d/);
  });

  test("a group lists its commands; bare, it prints the same page and exits 2", async () => {
    const page = await help(["source"]);
    expect(page).toStartWith(
      "hookspool source - develop a source plugin against captured requests, or arm one for its " +
        "handshake\n\nUsage: hookspool source <command> [options]\n",
    );
    expect(section(page, "Commands")).toEqual([
      expect.stringMatching(/^ {2}test +run a captured \.http request/),
      expect.stringMatching(/^ {2}arm +let a source that learns its secret/),
    ]);
    const bare = await cli(["source"]);
    expect(bare).toEqual({ code: 2, out: page, err: "" });
    const issues = await help(["issues"]);
    expect(section(issues, "Commands").map((r) => r.trim().split(" ")[0])).toEqual([
      "list",
      "ack",
      "resolve",
      "ignore",
    ]);
  });

  test("the root page lists every command, and version", async () => {
    const page = await help([]);
    expect(page).toStartWith(
      "hookspool - a durable, coalescing intake for inbound webhooks\n\nUsage: hookspool <command> [options]\n",
    );
    const names = section(page, "Commands").map((r) => r.trim().split(" ")[0]);
    expect(names).toEqual(Object.keys(root.subCommands as object));
    expect(names).toContain("version");
  });

  test("colour only on a terminal, and the words are the same", async () => {
    const plain = await help(["list"]);
    expect(plain).not.toContain("\u001b");
    const tty = await help(["list"], true);
    expect(tty).toContain("\u001b[1m");
    expect(tty.replace(/\u001b\[\d+m/g, "")).toBe(plain);
  });
});
