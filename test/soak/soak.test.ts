// The 60 s soak inside make test: real intake and dispatcher processes, kill -9 of
// each, a flapping receiver and config reloads; the script asserts the promises and prints CPU
// seconds and peak RSS. The hour-long run is `make soak DURATION=3600`.
import { expect, test } from "bun:test";
import { runSoak } from "../helpers/soak.ts";

const SOAK_S = Number(process.env.HOOKSPOOL_SOAK_S ?? 60);

test(
  `soak for ${SOAK_S} s: nothing lost, one content_hash per batch, bounds kept, nothing stuck`,
  async () => {
    const { summary, code } = await runSoak<{
      soak: {
        ok: boolean;
        failures: string[];
        acked: number;
        kills: { intake: number; dispatch: number };
        backlog_high_water: number;
        drain_s_after_senders_stopped: number | null;
      };
    }>(["--duration", String(SOAK_S)]);
    expect(summary.soak.failures).toEqual([]);
    expect(summary.soak.ok).toBe(true);
    expect(code).toBe(0);
    expect(summary.soak.acked).toBeGreaterThan(100);
    // The report says how large the backlog grew and how long it took to drain once sending stopped.
    expect(summary.soak.backlog_high_water).toBeGreaterThanOrEqual(0);
    expect(typeof summary.soak.drain_s_after_senders_stopped).toBe("number");
    if (SOAK_S >= 30)
      expect((summary.soak.kills.intake ?? 0) + (summary.soak.kills.dispatch ?? 0)).toBeGreaterThanOrEqual(3);
  },
  (SOAK_S + 120) * 1000,
);
