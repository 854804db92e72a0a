// Finding bobbins: the built-ins compiled into the binary, then each spool.bobbin_path directory
// (<dir>/<vendor>/<product>/bobbin.toml). Manifests are read again on every config load, so an
// edited bobbin.toml takes effect at the next reload.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import type { BuiltinBobbin } from "./builtin.ts";
import { BUILTINS } from "./builtins.gen.ts";
import { parse as parseToml } from "smol-toml";
import { type Manifest, type ManifestProblem, parseManifest } from "./manifest.ts";

/** The prefix of a built-in's HOOKSPOOL_BOBBIN_DIR and of its module references. */
export const BUILTIN_PREFIX = "builtin:";

export interface Bobbin {
  name: string;
  manifest: Manifest;
  /** "built-in", or the spool.bobbin_path directory it was found in. */
  origin: string;
  /** Where it lives: builtin:<vendor>/<product>, or its absolute directory. */
  dir: string;
  /** Its text files (manifest, documents, captures), by path relative to its directory. */
  files(): Map<string, string>;
  /** The reference a source's `module` takes for one of its code files ("source"). */
  moduleRef(module: string): string;
}

export interface BobbinProblem {
  /** The bobbin.toml it is in (builtin:<dir>/bobbin.toml for a built-in). */
  file: string;
  key: string;
  message: string;
  hint?: string;
}

export interface FindOptions {
  /** spool.bobbin_path: absolute directories, searched after the built-ins. */
  bobbinPath: readonly string[];
  /** The span presets of the config (a manifest's span must be one). */
  presets: readonly string[];
  /** The compiled-in bobbins (tests give their own). */
  builtins?: readonly BuiltinBobbin[];
}

const TEXT = [".toml", ".md", ".http", ".json"];

function walkText(dir: string, root = dir): [string, string][] {
  const out: [string, string][] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walkText(p, root));
    else if (TEXT.some((x) => e.name.endsWith(x))) out.push([relative(root, p), readFileSync(p, "utf8")]);
  }
  return out.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `a-b` and `a_b` name the same directory, so two names that differ only so collide. */
const folded = (name: string) => name.replaceAll("_", "-");

/** Every bobbin this build and config can see, and the problems of those that cannot load. */
export function findBobbins(o: FindOptions): { bobbins: Map<string, Bobbin>; problems: BobbinProblem[] } {
  const bobbins = new Map<string, Bobbin>();
  const problems: BobbinProblem[] = [];
  const seen = new Map<string, string>();
  const add = (b: Bobbin, file: string) => {
    const other = seen.get(folded(b.name));
    if (other !== undefined) {
      problems.push({
        file,
        key: "name",
        message:
          other === b.name
            ? `${b.name} is already the name of a bobbin (${bobbins.get(b.name)?.origin})`
            : `${b.name} differs from ${other} only by - and _`,
        hint: b.origin === "built-in" ? undefined : "a private bobbin may not take a built-in's name; give it its own",
      });
      return;
    }
    seen.set(folded(b.name), b.name);
    bobbins.set(b.name, b);
  };
  const report = (file: string, ps: ManifestProblem[]) => {
    for (const p of ps) problems.push({ file, ...p });
  };

  for (const bi of o.builtins ?? BUILTINS) {
    const file = `${BUILTIN_PREFIX}${bi.dir}/bobbin.toml`;
    const text = bi.files["bobbin.toml"];
    if (text === undefined) {
      problems.push({ file, key: "", message: "a built-in bobbin without bobbin.toml" });
      continue;
    }
    const { manifest, problems: ps } = parseManifest(text, { dir: bi.dir, builtin: true, presets: o.presets });
    report(file, ps);
    if (!manifest) continue;
    add(
      {
        name: manifest.name,
        manifest,
        origin: "built-in",
        dir: `${BUILTIN_PREFIX}${bi.dir}`,
        files: () => new Map(Object.entries(bi.files)),
        moduleRef: (m) => `${BUILTIN_PREFIX}${bi.dir}/${m}`,
      },
      file,
    );
  }

  for (const root of o.bobbinPath) {
    // check reports an entry that is missing, not a directory, or not private.
    if (!isDirectory(root)) continue;
    for (const vendor of readdirSync(root).sort()) {
      const vdir = join(root, vendor);
      if (!isDirectory(vdir)) continue;
      for (const product of readdirSync(vdir).sort()) {
        const dir = join(vdir, product);
        const file = join(dir, "bobbin.toml");
        if (!isDirectory(dir) || !existsSync(file)) continue;
        let text: string;
        try {
          text = readFileSync(file, "utf8");
        } catch (e) {
          problems.push({ file, key: "", message: `cannot read it (${(e as NodeJS.ErrnoException).code ?? "error"})` });
          continue;
        }
        const { manifest, problems: ps } = parseManifest(text, {
          dir: `${vendor}/${product}`,
          builtin: false,
          presets: o.presets,
        });
        report(file, ps);
        if (!manifest) continue;
        add(
          {
            name: manifest.name,
            manifest,
            origin: root,
            dir,
            files: () => new Map(walkText(dir)),
            moduleRef: (m) => join(dir, `${m}.ts`),
          },
          file,
        );
      }
    }
  }
  return { bobbins, problems };
}

/** The code module a built-in reference names (builtin:<vendor>/<product>/<module>), or undefined. */
export function builtinModule(ref: string, builtins: readonly BuiltinBobbin[] = BUILTINS): unknown {
  if (!ref.startsWith(BUILTIN_PREFIX)) return undefined;
  const rest = ref.slice(BUILTIN_PREFIX.length);
  const at = rest.lastIndexOf("/");
  const bi = builtins.find((b) => b.dir === rest.slice(0, at));
  return bi?.modules[rest.slice(at + 1)];
}

/** The processor and poll tables of the bobbin at `dir` (builtin:<vendor>/<product> or a directory), read loosely. */
export function readBobbinManifest(
  dir: string,
  builtins: readonly BuiltinBobbin[] = BUILTINS,
): { processor?: { module?: string }; poll?: { module?: string } } | null {
  let text: string | undefined;
  if (dir.startsWith(BUILTIN_PREFIX))
    text = builtins.find((b) => `${BUILTIN_PREFIX}${b.dir}` === dir)?.files["bobbin.toml"];
  else {
    try {
      text = readFileSync(join(dir, "bobbin.toml"), "utf8");
    } catch {
      return null;
    }
  }
  if (text === undefined) return null;
  try {
    return parseToml(text) as { processor?: { module?: string }; poll?: { module?: string } };
  } catch {
    return null;
  }
}
