// Bodies kept in files: a request body above [spool] inline_max_bytes is streamed to a temporary
// file under <home>/bodies/ while it is hashed, fsync'd, renamed to its SHA-256 and the directory
// fsync'd, all before the event row that names it commits. A crash between the file and the
// commit leaves a file nothing names: sweepBodies removes it once it is older than the grace, so
// a reference never dangles and an orphan never stays. The same sweep frees the files of events
// that retention deleted. body_url links are signed with a key kept in the directory.
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { type FileHandle, open, readdir, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { hmac, hmacHex } from "./plugin/verify.ts";

/** The directory under the home. */
export const BODIES_DIR = "bodies";

/**
 * A file younger than this is left alone by the sweep even when no row names it: an intake may
 * have kept it and not committed yet (it waits at most busy_timeout_s for the database).
 */
export const BODY_GRACE_S = 600;

/** A body kept in a file: its SHA-256 (the file's name) and its length. */
export interface BodyFile {
  sha256: string;
  bytes: number;
}

const SHA = /^[0-9a-f]{64}$/;

export function bodiesDir(home: string): string {
  return join(home, BODIES_DIR);
}

export function isBodyName(name: string): boolean {
  return SHA.test(name);
}

export function bodyPath(dir: string, sha256: string): string {
  if (!isBodyName(sha256)) throw new Error("not a body file name");
  return join(dir, sha256);
}

/**
 * What the event row's payload holds in place of a body kept in a file: valid JSON, small, and
 * naming the content, so the batch's content_hash still changes with the body.
 */
export function bodyReference(b: BodyFile): string {
  return JSON.stringify({ hookspool_body: { sha256: b.sha256, bytes: b.bytes } });
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A body being written: chunks in, hashed as they go, nothing held beyond the chunk. */
export class BodySink {
  private readonly hasher = new Bun.CryptoHasher("sha256");
  private total = 0;
  private closed = false;
  private kept: string | null = null;

  private constructor(
    private readonly dir: string,
    private readonly part: string,
    private readonly fh: FileHandle,
  ) {}

  /** A fresh temporary file in `dir` (created, mode 0700, on first use). */
  static async open(dir: string, unique: string): Promise<BodySink> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const part = join(dir, `.part-${unique}`);
    return new BodySink(dir, part, await open(part, "wx", 0o600));
  }

  get bytes(): number {
    return this.total;
  }

  /** Where the body is now: its temporary name, or its hash once kept. */
  get path(): string {
    return this.kept ?? this.part;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.hasher.update(chunk);
    this.total += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      const { bytesWritten } = await this.fh.write(chunk, at, chunk.length - at);
      at += bytesWritten;
    }
  }

  /** fsync the file and close it; the body is now whole on disk under its temporary name. */
  async finish(): Promise<BodyFile> {
    await this.fh.sync();
    await this.fh.close();
    this.closed = true;
    return { sha256: this.hasher.digest("hex"), bytes: this.total };
  }

  /** Its bytes, read back in one piece (a raw copy the source keeps beside a rewritten payload). */
  read(): Promise<Uint8Array> {
    return Bun.file(this.path).bytes();
  }

  /**
   * Rename the file to its hash and fsync the directory: after this the name survives a power
   * loss. A file of the same content already there is replaced by the same bytes.
   */
  async keep(b: BodyFile): Promise<void> {
    const to = bodyPath(this.dir, b.sha256);
    await rename(this.part, to);
    this.kept = to;
    fsyncDir(this.dir);
  }

  /** Drop the temporary file (the request was refused, or it was kept elsewhere). */
  async discard(): Promise<void> {
    if (!this.closed) await this.fh.close().catch(() => {});
    this.closed = true;
    await unlink(this.part).catch(() => {});
  }
}

/** What a sweep removed. */
export interface SweepCount {
  files: number;
  bytes: number;
}

/**
 * Remove every file in `dir` no row names that is older than `graceS`: temporary files of
 * requests that never finished, bodies kept before a crash and never committed, and bodies whose
 * events retention deleted. `named` answers which of the given hashes an event row names.
 */
export async function sweepBodies(
  dir: string,
  named: (hashes: string[]) => Promise<Set<string>>,
  nowS: number,
  graceS = BODY_GRACE_S,
): Promise<SweepCount> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return { files: 0, bytes: 0 };
  }
  const old: { name: string; size: number }[] = [];
  for (const name of names) {
    if (!isBodyName(name) && !name.startsWith(".part-")) continue;
    const st = await stat(join(dir, name)).catch(() => null);
    if (!st?.isFile() || nowS - st.mtimeMs / 1000 < graceS) continue;
    old.push({ name, size: st.size });
  }
  const count: SweepCount = { files: 0, bytes: 0 };
  for (let i = 0; i < old.length; i += 500) {
    const chunk = old.slice(i, i + 500);
    const kept = await named(chunk.filter((f) => isBodyName(f.name)).map((f) => f.name));
    for (const f of chunk) {
      if (kept.has(f.name)) continue;
      await unlink(join(dir, f.name)).then(
        () => {
          count.files++;
          count.bytes += f.size;
        },
        () => {},
      );
    }
  }
  if (count.files > 0) fsyncDir(dir);
  return count;
}

/** The key body_url links are signed with: 32 random bytes in <dir>/.url-key, made on first use. */
export function bodyUrlKey(dir: string): string {
  const file = join(dir, ".url-key");
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const key = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
    try {
      writeFileSync(file, `${key}\n`, { mode: 0o600, flag: "wx" });
      return key;
    } catch {
      // Another process made it first: theirs is the key.
      return readFileSync(file, "utf8").trim();
    }
  }
}

const signed = (sha256: string, expires: number) => `${sha256}.${expires}`;

/** The path and query of a body's link, valid until `expires` (seconds since the epoch). */
export function bodyUrlPath(key: string, sha256: string, expires: number): string {
  const sig = hmac(key, signed(sha256, expires), { encoding: "hex" });
  return `/bodies/${sha256}?expires=${expires}&sig=${sig}`;
}

/** Whether a link's signature is the key's (compared in constant time) and it has not expired. */
export function bodyUrlValid(key: string, sha256: string, expires: number, sig: string, nowS: number): boolean {
  if (!isBodyName(sha256) || !Number.isSafeInteger(expires) || expires < nowS) return false;
  return hmacHex(sig, key, signed(sha256, expires));
}
