// The services' stores on both backends, for suites that run the same cases on SQLite and on a
// real PostgreSQL server (skipped, saying so, without one): every role of the factory
// (src/store/open.ts's sqliteStores / pgStores) over one spool, and a dispatcher over a
// config.toml, as `hookspool run` wires them.
import { describe } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Clock, seededRng, systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { makeDestination } from "../../src/destinations/registry.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { createLogger } from "../../src/log.ts";
import type {
  DashboardStore,
  DispatchStore,
  IntakeStore,
  MaintenanceStore,
  OperatorStore,
  StatusStore,
} from "../../src/store/api.ts";
import { pgStores, type Stores, sqliteStores } from "../../src/store/open.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { openSpool, type SqliteSpool, waitOffLoop } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "./pg.ts";
import { tempDir } from "./tmp.ts";

export type BackendName = "sqlite" | "postgres";

export interface Backend {
  backend: BackendName;
  intake: IntakeStore;
  operator: OperatorStore;
  dashboard: DashboardStore;
  /** Maintenance's chores' reads and writes. */
  maintenance: MaintenanceStore;
  /** What status, /healthz and /metrics read. */
  status: StatusStore;
  /** A dispatch store; on PostgreSQL each call is another dispatcher's (its own heartbeat id). */
  dispatch(): Promise<DispatchStore>;
  /**
   * The factory's roles as the intake takes them (`new Intake({ stores })`): on PostgreSQL over
   * the intake's own pool; closing them is the backend's close, not theirs.
   */
  intakeStores: Stores;
  /** SQLite's spool (what only SQLite has, such as its file); absent on PostgreSQL. */
  spool?: SqliteSpool;
  /** PostgreSQL's pool for the test's own reads and writes of rows; absent on SQLite. */
  pg?: PgSpool;
  /** PostgreSQL's URL of this database (no password: the server trusts its socket), for a config's spool.url. */
  pgUrl?: string;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** SQLite's spool clock (now_eff on SQLite reads it); PostgreSQL's now_eff is the database's. */
  clock?: Clock;
  /** Where SQLite's spool.db goes (a home's, say); a temp directory by default. */
  dir?: string;
}

export type OpenBackend = (o?: OpenOptions) => Promise<Backend>;

/** A fresh, migrated SQLite spool in a temp directory. */
export async function openSqlite(o: OpenOptions = {}): Promise<Backend> {
  const spool = openSpool(join(o.dir ?? tempDir(), "spool.db"), { create: true, clock: o.clock });
  migrate(spool);
  // As the services' connection is: a busy lock is waited for off the event loop.
  waitOffLoop(spool, 10);
  // The operator's close would close the spool under the other roles: the backend's close does.
  const stores = sqliteStores(spool, () => {});
  return {
    backend: "sqlite",
    spool,
    intake: stores.intake(),
    operator: stores.operator(),
    dashboard: stores.dashboard(),
    maintenance: stores.maintenance(),
    status: stores.status(),
    dispatch: () => stores.dispatch("testhost:1"),
    intakeStores: stores,
    close: async () => spool.close(),
  };
}

/**
 * `cases(open)` under "on SQLite" and "on PostgreSQL"; PostgreSQL's open makes a fresh database
 * on the suite's server each time. Without PostgreSQL its describe is skipped, saying so once.
 */
export function onBothBackends(cases: (open: OpenBackend, backend: BackendName) => void): void {
  if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
  describe("on SQLite", () => cases(openSqlite, "sqlite"));
  describe.skipIf(!PG_BIN)("on PostgreSQL", () => {
    const server = serverForSuite();
    let n = 0;
    cases(async () => {
      const name = `db${++n}`;
      await server().createDatabase(name);
      // The intake's, the dispatchers' and the operator's pools, as three processes would hold.
      const pools = [0, 1, 2].map(
        () => new PgSpool({ path: server().socket, user: server().user, database: name }, { max: 4 }),
      );
      await migratePg(pools[0], "0123456789ab");
      const [intake, dispatch, operator] = pools.map((p) => pgStores(p));
      let beats = 0;
      return {
        backend: "postgres",
        pg: pools[2],
        pgUrl: `postgres://${server().user}@localhost/${name}?host=${server().socketDir}`,
        intake: intake.intake(),
        operator: operator.operator(),
        dashboard: operator.dashboard(),
        maintenance: operator.maintenance(),
        status: operator.status(),
        dispatch: () => dispatch.dispatch(`host:${++beats}`),
        intakeStores: { ...intake, close: async () => {} },
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
