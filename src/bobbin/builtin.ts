// The shape of a bobbin compiled into the binary (src/bobbin/builtins.gen.ts lists them).
import { readFileSync } from "node:fs";

/**
 * A document or capture of a built-in bobbin, read when asked for: the binary embeds it as a file
 * (a path inside the executable), so a running service holds none of their text.
 */
export function readEmbedded(path: string): string {
  return readFileSync(path, "utf8");
}

export interface BuiltinBobbin {
  /** `<vendor>/<product>` under bobbins/. */
  dir: string;
  /**
   * Every file as text, by path relative to the bobbin's directory: bobbin.toml, documents,
   * captures, code. Documents and captures are getters that read the embedded file.
   */
  files: Readonly<Record<string, string>>;
  /** Its code, by module name ("source" is source.ts). */
  modules: Readonly<Record<string, unknown>>;
}
