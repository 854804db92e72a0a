// The version printed by `hookspool --version` and sent in User-Agent.
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;
