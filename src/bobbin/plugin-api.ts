// Core under its names for code loaded by path: a private bobbin imports "hookspool/plugin"
// (src/plugin/index.ts: verification, the processor API) and "hookspool/providers"
// (src/providers/index.ts: feeds, mail rules, Google), which resolve to this binary's own
// modules, compiled or not. In the repository, tsconfig's paths give the same names to the type
// checker and the bundler, so a built-in may write them too.
import { plugin } from "bun";
import * as api from "../plugin/index.ts";
import * as providers from "../providers/index.ts";

export const PLUGIN_API_SPECIFIER = "hookspool/plugin";
export const PROVIDERS_SPECIFIER = "hookspool/providers";

let registered = false;

/** Make "hookspool/plugin" and "hookspool/providers" importable by modules loaded from now on (idempotent). */
export function registerPluginApi(): void {
  if (registered) return;
  registered = true;
  plugin({
    name: "hookspool-plugin-api",
    setup(build) {
      build.module(PLUGIN_API_SPECIFIER, () => ({ exports: { ...api }, loader: "object" }));
      build.module(PROVIDERS_SPECIFIER, () => ({ exports: { ...providers }, loader: "object" }));
    },
  });
}
