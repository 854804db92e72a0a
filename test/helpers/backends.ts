// The services' stores on both backends, for suites that run the same cases through a real
// dispatcher on SQLite and on a real PostgreSQL server (skipped, saying so, without one): one
// intake, dispatch and operator store over one spool, and a dispatcher over a config.toml, as
// `hookspool run` wires them.
import { describe } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { seededRng, systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { makeDestination } from "../../src/destinations/registry.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { createLogger } from "../../src/log.ts";
import type { DashboardStore, DispatchStore, IntakeStore, OperatorStore } from "../../src/store/api.ts";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { pgDashboardStore, pgDispatchStore, pgIntakeStore, pgOperatorStore } from "../../src/store/pg/store.ts";
import {
  sqliteDashboardStore,
  sqliteDispatchStore,
  sqliteIntakeStore,
  sqliteOperatorStore,
} from "../../src/store/sqlite/store.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "./pg.ts";
import { tempDir } from "./tmp.ts";
import type { MaintenanceStore } from "../../src/store/api.ts";
import { pgMaintenanceStore } from "../../src/store/pg/store.ts";
import { sqliteMaintenanceStore } from "../../src/store/sqlite/store.ts";

export interface Backend {
  intake: IntakeStore;
  operator: OperatorStore;
  dashboard: DashboardStore;
  /** Maintenance's chores' reads and writes. */
  maintenance: MaintenanceStore;
  /** A dispatch store; on PostgreSQL each call is another dispatcher's (its own heartbeat id). */
  dispatch(): Promise<DispatchStore>;
  /** SQLite's spool (what only SQLite has, such as its status facts); absent on PostgreSQL. */
  spool?: SqliteSpool;
  close(): Promise<void>;
}

export type OpenBackend = () => Promise<Backend>;

/** A fresh, migrated SQLite spool in a temp directory. */
export async function openSqlite(): Promise<Backend> {
  const spool = openSpool(join(tempDir(), "spool.db"), { create: true });
  migrate(spool);
  return {
    spool,
    intake: sqliteIntakeStore(spool),
    operator: sqliteOperatorStore(spool),
    dashboard: sqliteDashboardStore(spool),
    maintenance: sqliteMaintenanceStore(spool),
    dispatch: async () => sqliteDispatchStore(spool),
    close: async () => spool.close(),
  };
}

/**
 * `cases(open)` under "on SQLite" and "on PostgreSQL"; PostgreSQL's open makes a fresh database
 * on the suite's server each time. Without PostgreSQL its describe is skipped, saying so once.
 */
export function onBothBackends(cases: (open: OpenBackend, backend: "sqlite" | "postgres") => void): void {
  if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
  describe("on SQLite", () => cases(openSqlite, "sqlite"));
  describe.skipIf(!PG_BIN)("on PostgreSQL", () => {
    const server = serverForSuite();
    let n = 0;
    cases(async () => {
      const name = `db${++n}`;
      await server().createDatabase(name);
      const pools = [0, 1, 2].map(
        () => new PgSpool({ path: server().socket, user: server().user, database: name }, { max: 4 }),
      );
      await migratePg(pools[0], "0123456789ab");
      let beats = 0;
      return {
        intake: pgIntakeStore(pools[0]),
        operator: pgOperatorStore(pools[2]),
        dashboard: pgDashboardStore(pools[2]),
        maintenance: pgMaintenanceStore(pools[2]),
        dispatch: () => pgDispatchStore(pools[1], `host:${++beats}`),
        close: async () => void (await Promise.all(pools.map((p) => p.close()))),
      };
    }, "postgres");
  });
}

/** A home with `config` as its config.toml, loaded. */
export function configHome(config: string): {
  home: string;
  config: Config;
  loaded: ReturnType<typeof loadConfig>;
  loadOptions: { home: string; env: Record<string, string>; cwd: string };
} {
  const home = tempDir();
  writeFileSync(join(home, "config.toml"), config);
  const loadOptions = { home, env: {}, cwd: home };
  const loaded = loadConfig(loadOptions);
  return { home, config: loaded.config, loaded, loadOptions };
}

/** A started dispatcher over `store` with the home's config and real destinations, on the system clock. */
export async function startDispatcher(store: DispatchStore, h: ReturnType<typeof configHome>): Promise<Dispatcher> {
  const d = new Dispatcher({
    store,
    loaded: h.loaded,
    loadOptions: h.loadOptions,
    clock: systemClock,
    rng: seededRng(1),
    log: createLogger("dispatch"),
    destinations: (c, name) => makeDestination(c, name, { env: {}, clock: systemClock, instanceId: store.instanceId }),
  });
  await d.start();
  return d;
}
