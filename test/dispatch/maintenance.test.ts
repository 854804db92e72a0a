// The one Maintenance on both backends (PostgreSQL skipped, saying so, without a server): its
// chores run over the store's MaintenanceStore, the retention pass once an hour by the spool's
// own record, a refused write's issue ends after a quiet interval, and the free-disk check
// applies only where the spool is a file of this host.
import { expect, setDefaultTimeout, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { parseConfig } from "../../src/config/load.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { createLogger } from "../../src/log.ts";
import { WRITE_FAILED_ISSUE } from "../../src/obs/faults.ts";
import { onBothBackends } from "../helpers/backends.ts";

setDefaultTimeout(30_000);

onBothBackends((open, backend) => {
  test(
    "retention once an hour by the spool's record; write_failed ends after a quiet interval; the disk only where " +
      "a file is",
    async () => {
      const b = await open();
      try {
        const { config } = parseConfig('[sources.s]\naction = "hermes:a"\n', "t.toml");
        const leader = await b.dispatch();
        let diskReads = 0;
        const m = new Maintenance({
          store: b.maintenance,
          leader,
          config: () => config,
          clock: systemClock,
          log: createLogger("maintenance"),
          env: { HOOKSPOOL_ALERT_DRY: "1" },
          diskFree: () => {
            diskReads++;
            return 10 ** 12;
          },
        });
        const now = await leader.effectiveNow();
        // A refusal reported two intervals ago, none since.
        await b.maintenance.raiseIssue({
          fingerprint: WRITE_FAILED_ISSUE,
          kind: "spool",
          error: "1 write(s) refused",
          now: now - 120,
        });
        expect(await b.maintenance.lastRetention()).toBeNull();
        await m.tick();
        const first = await b.maintenance.lastRetention();
        expect(first).toBeGreaterThanOrEqual(now);
        expect((await b.maintenance.issueByFingerprint(WRITE_FAILED_ISSUE))?.state).toBe("resolved");
        // The free space is this host's to read only where the spool is a file here.
        expect(b.maintenance.spoolFile === null).toBe(backend === "postgres");
        expect(diskReads).toBe(backend === "sqlite" ? 1 : 0);
        // Within the hour the pass does not run again: its record stands.
        await m.tick();
        expect(await b.maintenance.lastRetention()).toBe(first);
        // An hour since the last pass (by the spool's record): it runs again.
        await b.maintenance.noteRetention((first as number) - 3600);
        await m.tick();
        expect(await b.maintenance.lastRetention()).toBeGreaterThanOrEqual(first as number);
        await leader.release("host", 1);
      } finally {
        await b.close();
      }
    },
  );
});
