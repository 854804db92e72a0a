// `bun test --preload` for a bobbin's own tests outside the repository: makes the plugin API
// importable as "hookspool/plugin" and "hookspool/providers", as the intake does before it loads
// a bobbin's code.
import { registerPluginApi } from "./plugin-api.ts";

registerPluginApi();
