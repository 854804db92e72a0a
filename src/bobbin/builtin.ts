// The shape of a bobbin compiled into the binary (src/bobbin/builtins.gen.ts lists them).

export interface BuiltinBobbin {
  /** `<vendor>/<product>` under bobbins/. */
  dir: string;
  /** Every file as text, by path relative to the bobbin's directory: bobbin.toml, documents, captures, code. */
  files: Readonly<Record<string, string>>;
  /** Its code, by module name ("source" is source.ts). */
  modules: Readonly<Record<string, unknown>>;
}
