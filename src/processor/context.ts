// The Context a processor gets: its settings, the secrets granted to it, HTTP and OAuth through
// src/net, staged state, the deployment's hooks, a log line writer, the clock, and the two ways
// out (failPermanent, and any throw). Nothing here writes state: saveState only stages, and the
// runtime applies what was staged once the batch's result is journaled.
import { readFileSync } from "node:fs";
import type { Clock } from "../clock.ts";
import { resolveSecret } from "../config/secrets.ts";
import { createHttp } from "../net/http.ts";
import { createOAuth, type StoredToken } from "../net/oauth.ts";
import { createPacer } from "../net/pace.ts";
import type { Context, OAuthClient } from "../plugin/processor.ts";
import { Permanent, Retryable } from "../plugin/types.ts";
import type { ProcessorEnv } from "./env.ts";
import { atomicWrite, isStateName, readState, runtimePath } from "./files.ts";

/** A permanent reason as kept: one line, at most 300 characters, no control characters. */
export function cleanReason(reason: string): string {
  return reason.replace(/[\u0000-\u001f\u007f]/g, " ").slice(0, 300);
}

export interface ContextParts {
  env: ProcessorEnv;
  clock: Clock;
  log: (line: string) => void;
  hooks: Record<string, unknown> | null;
  /** The variables secret references of the { env } kind read (none: expansion refuses them). */
  processEnv: Record<string, string | undefined>;
  /** The network (the kit's stubs in `bobbin check`). */
  fetch?: typeof fetch;
}

export interface BuiltContext {
  ctx: Context;
  /** What saveState staged, by name. */
  staged: Map<string, unknown>;
}

export function buildContext(p: ContextParts): BuiltContext {
  const { env, clock } = p;
  const staged = new Map<string, unknown>();
  const http = createHttp({ clock, log: p.log, fetch: p.fetch });
  const secret = async (name: string): Promise<string> => {
    const ref = Object.hasOwn(env.secretRefs, name) ? env.secretRefs[name] : undefined;
    if (!ref) throw new Permanent(`secret ${name} is not granted to the processor`);
    try {
      return resolveSecret(ref, p.processEnv);
    } catch {
      // The reference's own message names a path; the class is all a retry needs.
      throw new Retryable(`secret ${name} cannot be read`);
    }
  };
  const oauths = new Map<string, OAuthClient>();
  const oauth = (name: string): OAuthClient => {
    let o = oauths.get(name);
    if (!o) {
      const file = env.stateDir ? runtimePath(env.stateDir, `oauth-${name}`) : null;
      let memory: StoredToken | null = null;
      o = createOAuth({
        http,
        clock,
        credential: () => secret(name),
        store: {
          load: () => {
            if (!file) return memory;
            try {
              return JSON.parse(readFileSync(file, "utf8")) as StoredToken;
            } catch {
              return null;
            }
          },
          save: (t) => {
            memory = t;
            if (file) atomicWrite(file, JSON.stringify(t));
          },
        },
      });
      oauths.set(name, o);
    }
    return o;
  };
  const ctx: Context = {
    settings: env.settings,
    secret,
    http,
    oauth,
    loadState<T>(name: string, fallback: T): T {
      if (!isStateName(name)) throw new Permanent("a state name must be letters, digits, . _ and -");
      if (staged.has(name)) return staged.get(name) as T;
      return env.stateDir ? readState(env.stateDir, name, fallback) : fallback;
    },
    saveState(name: string, value: unknown): void {
      if (!isStateName(name)) throw new Permanent("a state name must be letters, digits, . _ and -");
      if (!env.stateDir) throw new Permanent("the bobbin keeps no state: set state = true in its [processor]");
      staged.set(name, JSON.parse(JSON.stringify(value ?? null)));
    },
    hooks: p.hooks,
    log: p.log,
    now: () => clock.now(),
    failPermanent(reason: string): never {
      throw new Permanent(cleanReason(reason));
    },
    pace: (perSec: number) => createPacer(perSec, { clock }),
  };
  return { ctx, staged };
}
