// What the processor runtime is told, all through its environment: the instance and its
// bobbin, the settings, the output routes and the secret references config expansion put on
// the script destination, and the batch the dispatcher is delivering. Nothing else of the
// dispatcher's reaches it.
import type { SecretRef } from "../config/types.ts";
import { Permanent } from "../plugin/types.ts";

export interface ProcessorEnv {
  instance: string;
  bobbin: string;
  /** builtin:<vendor>/<product>, or the private bobbin's absolute directory. */
  dir: string;
  settings: Record<string, unknown>;
  /** Output event type (or "*") -> destination. */
  routes: Record<string, string>;
  secretRefs: Record<string, SecretRef>;
  batchId: number;
  deliveryId: string;
  /** Set for a bobbin with state: where its journal, state and lock live. */
  stateDir: string | null;
  /** How long a journal is kept (the retention of delivered batches). */
  journalKeepS: number;
}

const DEFAULT_KEEP_S = 7 * 86_400;

function json<T>(env: Record<string, string | undefined>, name: string, fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  try {
    const v = JSON.parse(raw) as unknown;
    if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
    return v as T;
  } catch {
    throw new Permanent(`${name} is not a JSON object`);
  }
}

/** Read the runtime's environment; a missing or malformed variable is Permanent (config, not luck). */
export function readProcessorEnv(instance: string, env: Record<string, string | undefined>): ProcessorEnv {
  const need = (name: string) => {
    const v = env[name];
    if (v === undefined || v === "")
      throw new Permanent(`${name} is not set: run a processor through its bobbin instance`);
    return v;
  };
  if (need("HOOKSPOOL_BOBBIN_INSTANCE") !== instance)
    throw new Permanent("HOOKSPOOL_BOBBIN_INSTANCE is another instance");
  const batchId = Number(need("HOOKSPOOL_BATCH_ID"));
  if (!Number.isSafeInteger(batchId) || batchId <= 0) throw new Permanent("HOOKSPOOL_BATCH_ID is not a batch id");
  const keep = Number(env.HOOKSPOOL_JOURNAL_KEEP_S ?? DEFAULT_KEEP_S);
  return {
    instance,
    bobbin: need("HOOKSPOOL_BOBBIN"),
    dir: need("HOOKSPOOL_BOBBIN_DIR"),
    settings: json(env, "HOOKSPOOL_SETTINGS", {}),
    routes: json(env, "HOOKSPOOL_DELTA_ROUTES", {}),
    secretRefs: json(env, "HOOKSPOOL_SECRET_REFS", {}),
    batchId,
    deliveryId: env.HOOKSPOOL_DELIVERY_ID ?? "",
    stateDir: env.HOOKSPOOL_STATE_DIR || null,
    journalKeepS: Number.isFinite(keep) && keep > 0 ? keep : DEFAULT_KEEP_S,
  };
}
