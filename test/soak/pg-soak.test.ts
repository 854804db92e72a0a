// The soak on PostgreSQL inside make test-all: two intakes and two dispatchers, each in a home of
// its own, on one database of a throwaway server, a random one of each kind killed with kill -9
// and restarted, a flapping receiver and config reloads; the script reads the database at the end
// and asserts the promises. The long run is `make soak DURATION=600 BACKEND=postgres`.
import { expect, test } from "bun:test";
import { runSoak } from "../helpers/soak.ts";
import { PG_BIN, PG_SKIP_MESSAGE } from "../helpers/pg.ts";

const SOAK_S = Number(process.env.HOOKSPOOL_PG_SOAK_S ?? 30);

interface Summary {
  soak: {
    ok: boolean;
    backend: string;
    intakes: number;
    dispatchers: number;
    failures: string[];
    acked: number;
    lost: number;
    order_breaks: number;
    duplicates_with_two_contents: number;
    kills: { intake: number; dispatch: number };
    leases_held_at_kill: number;
    leases_recovered: number;
    drain_s_after_senders_stopped: number | null;
  };
}

test.skipIf(!PG_BIN)(
  `PostgreSQL soak for ${SOAK_S} s, 2 intakes and 2 dispatchers: nothing lost, one content_hash per batch, ` +
    "order per key, bounds kept, nothing stuck, leases taken over",
  async () => {
    const { summary, code } = await runSoak<Summary>([
      "--backend",
      "postgres",
      "--intakes",
      "2",
      "--dispatchers",
      "2",
      "--duration",
      String(SOAK_S),
    ]);
    const s = summary.soak;
    expect(s?.failures).toEqual([]);
    expect(s?.ok).toBe(true);
    expect(code).toBe(0);
    expect([s?.backend, s?.intakes, s?.dispatchers]).toEqual(["postgres", 2, 2]);
    expect(s?.acked).toBeGreaterThan(100);
    expect(s?.lost).toBe(0);
    expect(s?.order_breaks).toBe(0);
    expect(s?.duplicates_with_two_contents).toBe(0);
    expect(s?.kills.intake).toBeGreaterThanOrEqual(1);
    expect(s?.kills.dispatch).toBeGreaterThanOrEqual(1);
    // A dispatcher killed holding leases had them taken over by the other (the script fails otherwise).
    if ((s?.leases_held_at_kill ?? 0) > 0) expect(s?.leases_recovered).toBeGreaterThan(0);
    expect(typeof s?.drain_s_after_senders_stopped).toBe("number");
  },
  (SOAK_S + 150) * 1000,
);

if (!PG_BIN) test("PostgreSQL soak", () => console.info(PG_SKIP_MESSAGE));
