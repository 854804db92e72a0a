// Arming a source that learns its secret, as `hookspool source arm` does: the arm file beside the
// secret file, with its expiry and its one-time token, and the hook path the provider must be
// given (the token in its query string).
import { writeFileSync } from "node:fs";
import { ARM_PARAM } from "../../src/intake/learn.ts";

/** Arm the source whose secret file is `secretFile` until `until`; returns the token. */
export function armSource(secretFile: string, until: number, token = "test-arm-token-0123456789"): string {
  writeFileSync(`${secretFile}.armed`, JSON.stringify({ until, token }), { mode: 0o600 });
  return token;
}

/** A hook path with the arm token added, as the provider would call it. */
export const withArm = (path: string, token: string) => `${path}?${ARM_PARAM}=${encodeURIComponent(token)}`;
