// What `hookspool bobbin check` looks at: one bobbin's files, found by name (a built-in, or one
// under spool.bobbin_path) or by its directory, and where it stands: shipped with hookspool or
// private, inside a source checkout or not.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { BUILTIN_PREFIX, type Bobbin } from "../../bobbin/registry.ts";

/** The file kinds a bobbin carries (what the built-in registry embeds). */
export const BOBBIN_FILE_KINDS = [".toml", ".md", ".http", ".json", ".ts"];

export interface CheckSubject {
  /** How the user named it (a name or a directory). */
  label: string;
  /** `<vendor>/<product>` as its directory names it. */
  relDir: string;
  /** Where it lives: builtin:<vendor>/<product>, or its absolute directory. */
  dir: string;
  /** Shipped with hookspool (compiled in, or under a checkout's bobbins/). */
  shipped: boolean;
  /** The spool.bobbin_path entry that holds a private bobbin's directory. */
  root?: string;
  /** Its text files by path relative to its directory. */
  files: Map<string, string>;
  /** Every file under its directory, text or not (a compiled-in bobbin: its embedded files). */
  allFiles: string[];
  /** The entries of its vendor directory (a directory subject only). */
  vendorEntries?: { name: string; isDirectory: boolean }[];
  /** The source checkout it belongs to, when there is one. */
  checkout?: string;
}

function walk(dir: string, root = dir): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p, root));
    else out.push(relative(root, p));
  }
  return out.sort();
}

/** A hookspool source checkout: it has the bobbins/ folder and the script that embeds them. */
function isCheckout(dir: string): boolean {
  return existsSync(join(dir, "scripts", "gen-bobbins.ts")) && existsSync(join(dir, "bobbins"));
}

/** A bobbin directory `<root>/<vendor>/<product>`. */
export function subjectFromDir(path: string): CheckSubject {
  const dir = resolve(path);
  if (!statSync(dir).isDirectory()) throw new Error(`${path} is not a directory`);
  const product = basename(dir);
  const vendorDir = dirname(dir);
  const root = dirname(vendorDir);
  const allFiles = walk(dir);
  const files = new Map<string, string>();
  for (const f of allFiles)
    if (BOBBIN_FILE_KINDS.some((k) => f.endsWith(k))) files.set(f, readFileSync(join(dir, f), "utf8"));
  const checkout = basename(root) === "bobbins" && isCheckout(dirname(root)) ? dirname(root) : undefined;
  return {
    label: path,
    relDir: `${basename(vendorDir)}/${product}`,
    dir,
    shipped: checkout !== undefined,
    root,
    files,
    allFiles,
    vendorEntries: readdirSync(vendorDir, { withFileTypes: true }).map((e) => ({
      name: e.name,
      isDirectory: e.isDirectory(),
    })),
    checkout,
  };
}

/** A bobbin the registry found (a built-in, or a spool.bobbin_path one). */
export function subjectFromBobbin(b: Bobbin, cwd: string): CheckSubject {
  if (!b.dir.startsWith(BUILTIN_PREFIX)) return { ...subjectFromDir(b.dir), label: b.name };
  const files = b.files();
  const relDir = b.dir.slice(BUILTIN_PREFIX.length);
  return {
    label: b.name,
    relDir,
    dir: b.dir,
    shipped: true,
    files,
    allFiles: [...files.keys()].sort(),
    checkout: isCheckout(cwd) ? cwd : undefined,
  };
}
