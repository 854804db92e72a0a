// The plugin API under its name for code loaded by path: a private bobbin's source (under
// spool.bobbin_path) imports "hookspool/plugin", which resolves to src/plugin/index.ts in the
// running binary, compiled or not. In the repository, tsconfig's paths give the same name to
// the type checker and the bundler, so a built-in may write it too.
import { plugin } from "bun";
import * as api from "./index.ts";

export const PLUGIN_API_SPECIFIER = "hookspool/plugin";

let registered = false;

/** Make "hookspool/plugin" importable by modules loaded from now on (idempotent). */
export function registerPluginApi(): void {
  if (registered) return;
  registered = true;
  plugin({
    name: "hookspool-plugin-api",
    setup(build) {
      build.module(PLUGIN_API_SPECIFIER, () => ({ exports: { ...api }, loader: "object" }));
    },
  });
}
