// source test's view of a bobbin's test kit: the captures a bobbin carries are signed with the
// made-up secrets of its captures/kit.toml (and made at its `now`), not with any real secret. A
// capture that fails verification against the configured secret is usually only that.
import { parseKit, type Kit } from "../bobbin/captures.ts";
import { findBobbins } from "../bobbin/registry.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";

/** The kit of the bobbin a source's instance runs, or null for a plain source (or a bobbin without one). */
export function kitOf(config: Config, source: string): Kit | null {
  const bobbin = config.bobbins[source]?.bobbin;
  if (!bobbin) return null;
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    bobbin,
  );
  const text = b?.files().get("captures/kit.toml");
  return text === undefined ? null : parseKit(text);
}

/**
 * The config and environment under which `source` verifies with its kit's test secrets: each
 * secret of the kit, as a reference to a variable of this process only.
 */
export function withKitSecrets(
  config: Config,
  env: Env,
  source: string,
): { config: Config; env: Env; now: number | undefined } {
  const kit = kitOf(config, source);
  if (!kit) {
    throw new HookspoolError(
      "E_USAGE",
      "--secret-from-kit needs a bobbin instance whose bobbin has captures/kit.toml; " +
        `${source} ${config.bobbins[source] ? "has no kit" : "is a plain source"}`,
    );
  }
  const secrets: Record<string, { env: string }> = {};
  const kitEnv: Env = { ...env };
  Object.keys(kit.secrets).forEach((name, i) => {
    const v = `HOOKSPOOL_KIT_SECRET_${i}`;
    secrets[name] = { env: v };
    kitEnv[v] = kit.secrets[name];
  });
  const src = config.sources[source];
  return {
    config: {
      ...config,
      sources: { ...config.sources, [source]: { ...src, secrets: { ...src.secrets, ...secrets } } },
    },
    env: kitEnv,
    now: kit.now,
  };
}

/** What a verification failure means, in a few words. */
export function unverifiedWords(reason: string): string {
  switch (reason) {
    case "mismatch":
      return "the signature does not match the source's secret";
    case "missing_signature":
      return "the request carries no signature";
    case "malformed":
      return "the signature header is not in the scheme's form";
    case "stale":
    case "future":
      return (
        `the signed timestamp is ${reason === "stale" ? "too old" : "in the future"} ` +
        "for the source's tolerance (--now checks at another time)"
      );
    default:
      return "the source's verify refused it";
  }
}
