// A source's secret rotation as the intake watches it: each verification counted by the
// position of the secret that verified it (/metrics), and an issue when a request still comes
// signed with an old secret within a day of its until, the time left to finish the rotation
// at the provider. The issue resolves itself once only the newest is in force and verifies.
import type { Logger } from "../log.ts";
import type { IssueSink } from "../store/api.ts";
import type { VerifiedWith } from "./evaluate.ts";
import type { IntakeMetrics } from "./metrics.ts";

/** An old secret still in use this close to its until opens the issue. */
export const OLD_SECRET_WARN_S = 86_400;
/** The issue is raised again at most this often per source (each raise bumps its count). */
const RAISE_EVERY_S = 600;

export const oldSecretFingerprint = (source: string) => `source:${source}:old_secret_in_use`;

export class RotationWatch {
  private readonly raisedAt = new Map<string, number>();
  /** Sources whose issue this process has resolved (or found nothing to resolve) since it was last raised. */
  private readonly settled = new Set<string>();

  constructor(private readonly d: { store: IssueSink; metrics: IntakeMetrics; log: Logger }) {}

  /** A request of `source` verified with `v` at `now`. */
  verified(source: string, v: VerifiedWith, now: number): void {
    this.d.metrics.verified1(source, v.position);
    if (v.position > 0 && v.until !== null && v.until - now <= OLD_SECRET_WARN_S) {
      this.raise(source, v, now);
      return;
    }
    // The newest verified and no older one is in force: whatever issue was open is over.
    if (v.position === 0 && v.of === 1 && !this.settled.has(source)) {
      this.settled.add(source);
      void this.d.store
        .resolveIssue(oldSecretFingerprint(source), now)
        .catch((e) => this.d.log.limited("warn", "rotation issue not resolved", { source, reason: (e as Error).name }));
    }
  }

  private raise(source: string, v: VerifiedWith, now: number): void {
    const last = this.raisedAt.get(source);
    if (last !== undefined && now - last < RAISE_EVERY_S && now >= last) return;
    this.raisedAt.set(source, now);
    this.settled.delete(source);
    const left = Math.max(0, Math.round(((v.until as number) - now) / 3600));
    this.d.log.warn("an old secret still verifies requests", {
      source,
      reason: `secret ${v.position}, ${left} h left`,
    });
    void this.d.store
      .raiseIssue({
        fingerprint: oldSecretFingerprint(source),
        kind: "config",
        error:
          `requests of ${source} are still signed with an old secret (position ${v.position}), ` +
          `which stops verifying at ${new Date((v.until as number) * 1000).toISOString()}: ` +
          "set the new secret at the provider",
        now,
      })
      .catch((e) => this.d.log.limited("warn", "rotation issue not raised", { source, reason: (e as Error).name }));
  }
}
