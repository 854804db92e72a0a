// Issues through the roles that raise, resolve and alert on them: one row per fingerprint,
// opened, counted, resolved and reopened; two writers raising one issue at once; the alerts
// chore's unalerted issues oldest first and its one alert per kind per rate limit, with the
// alerts it held back counted. Every backend must leave these rows.
import { expect, test } from "bun:test";
import type { IssueRow, RaiseIssue } from "../../src/store/issues.ts";
import { T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** The issue cases, on whatever store fresh() opens. */
export function issueCases({ fresh }: Suite): void {
  type S = StoreUnderTest;
  const FP = "delivery:http:d";
  const raise = (now: number): RaiseIssue => ({
    fingerprint: FP,
    kind: "delivery",
    destination: "http:d",
    batchId: 7,
    error: `e${now}`,
    now,
  });
  /** The issue's row without its id (which each backend numbers itself). */
  const issue = async (s: S, fp = FP): Promise<Omit<IssueRow, "id"> | null> => {
    const r = await s.maintenance.issueByFingerprint(fp);
    if (!r) return null;
    const { id: _, ...rest } = r;
    return rest;
  };
  const openCount = async (s: S) =>
    (await s.status.statusFacts({ now: T0 + 100, paces: new Map(), budgets: new Map(), staleS: 60 })).issuesOpen;

  test("an issue opened, counted, resolved (once: a second resolve has nothing to do), reopened", async () => {
    const s = await fresh();
    const base = {
      fingerprint: FP,
      kind: "delivery" as const,
      destination: "http:d",
      route: null,
      first_at: T0,
      sample_batch_id: 7,
      alerted_at: null,
    };
    await s.maintenance.raiseIssue(raise(T0));
    expect(await issue(s)).toEqual({ ...base, state: "open", count: 1, last_at: T0, last_error: `e${T0}` });
    await s.maintenance.raiseIssue(raise(T0 + 5));
    const counted = { ...base, count: 2, last_at: T0 + 5, last_error: `e${T0 + 5}` };
    expect(await issue(s)).toEqual({ ...counted, state: "open" });
    // Resolved at T0 + 6 (its last_at); a second resolve finds nothing open and changes nothing.
    await s.maintenance.resolveIssue(FP, T0 + 6);
    expect(await issue(s)).toEqual({ ...counted, state: "resolved", last_at: T0 + 6 });
    expect(await openCount(s)).toBe(0);
    await s.maintenance.resolveIssue(FP, T0 + 7);
    expect(await issue(s)).toEqual({ ...counted, state: "resolved", last_at: T0 + 6 });
    // Raised again: reopened, counted on, first_at kept.
    await s.maintenance.raiseIssue(raise(T0 + 8));
    const reopened: Omit<IssueRow, "id"> = {
      ...base,
      state: "open",
      count: 3,
      last_at: T0 + 8,
      last_error: `e${T0 + 8}`,
    };
    expect(await issue(s)).toEqual(reopened);
    expect(await openCount(s)).toBe(1);
    const listed = await s.operator.listIssues({ state: "all" });
    expect(listed.map(({ id: _, ...r }) => r)).toEqual([reopened]);
    expect(await s.count("issues")).toBe(1);
  });

  test("two writers raising one issue at once: one issue, counted twice", async () => {
    const s = await fresh();
    const r = { fingerprint: "spool:refused", kind: "spool" as const, now: T0 };
    // The intake's role and maintenance's: on PostgreSQL two transactions of the pool at once.
    await Promise.all([s.intake.raiseIssue(r), s.maintenance.raiseIssue(r)]);
    expect(await s.count("issues")).toBe(1);
    expect(await issue(s, "spool:refused")).toMatchObject({ state: "open", count: 2, first_at: T0, last_at: T0 });
  });

  test("alerts: unalerted open issues oldest first, one alert per kind per rate limit, the rest counted", async () => {
    const s = await fresh();
    const fps = ["delivery:a:http_5xx", "delivery:b:timeout", "spool:refused"];
    for (const [i, fp] of fps.entries())
      await s.maintenance.raiseIssue({
        fingerprint: fp,
        kind: fp.startsWith("spool") ? "spool" : "delivery",
        now: T0 + i,
      });
    const due = async () => (await s.maintenance.issuesToAlert()).map((r) => r.fingerprint);
    expect(await due()).toEqual(fps);
    const slots: boolean[] = [];
    for (const [kind, now] of [
      ["delivery", T0 + 10],
      ["delivery", T0 + 20],
      ["spool", T0 + 21],
      ["delivery", T0 + 80],
    ] as const) {
      const free = await s.maintenance.alertSlotFree(kind, now, 60);
      slots.push(free);
      if (!free) continue;
      const next = (await s.maintenance.issuesToAlert()).find((x) => x.kind === kind);
      if (!next) throw new Error(`no ${kind} issue to alert`);
      await s.maintenance.markAlerted(next.id, kind, now);
    }
    // The second delivery alert within 60 s of the first is held back (and counted).
    expect(slots).toEqual([true, false, true, true]);
    expect(await due()).toEqual([]);
    const alerted = await Promise.all(fps.map(async (fp) => (await issue(s, fp))?.alerted_at));
    expect(alerted).toEqual([T0 + 10, T0 + 80, T0 + 21]);
    expect(await s.rows("alerts", { cols: ["kind", "last_at", "suppressed"], order: "kind" })).toEqual([
      { kind: "delivery", last_at: T0 + 80, suppressed: 1 },
      { kind: "spool", last_at: T0 + 21, suppressed: 0 },
    ]);
  });
}
