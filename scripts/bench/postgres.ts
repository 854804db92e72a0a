// hookspool on PostgreSQL ([spool] backend = "postgres"), beside the same figures on SQLite from
// the same run, on a throwaway server (lib/pg.ts: fsync, synchronous_commit and full_page_writes
// ON unless BENCH_PG_FSYNC=off) reached over its unix socket. Three parts, one file each:
//
// 1. Intake (lib/pg-intake.ts): the signed ~6 KB GitHub push into one SQLite intake, one
//    PostgreSQL intake and two sharing one database, at 16 and 64 senders: req/s, latency, and
//    the CPU per event of the intakes and of the server.
// 2. Dispatch (lib/pg-drain.ts): backlogs of sealed batches, and of open batches past their
//    window, drained by one and two dispatchers against SQLite's one: batches/s, the first
//    delivery after a dispatcher's spawn, and the CPU per batch of the dispatchers and the server.
// 3. The store alone (lib/pg-store-cost.ts): claim and outcome transactions of 1, 2, 4 and 8
//    batches on a database with a delivered history, and what a batch costs the server at a
//    given dispatch.parallel (a tick claims at most that many).
//
// Then the capacity of one database core: the events per second one core of the PostgreSQL
// server carries received to delivered, at the CPU per event the intake cost (one intake, 64
// senders) plus the CPU per batch the drain cost (single-event batches: the dearest case).
//
// When PostgreSQL is not installed it prints one `skipped` line and exits 0.
//
//   bun scripts/bench/postgres.ts     BENCH_PG_INTAKE_N (3000), BENCH_PG_DISPATCH_N (2000),
//                                     BENCH_PG_DISPATCH_K (2000), BENCH_PG_DUE_N (1000),
//                                     BENCH_PG_DRAIN_ROUNDS (2), BENCH_PG_FSYNC (on; off as the
//                                     test suites run it), BENCH_PG_ONLY (intake, dispatch or store),
//                                     BENCH_PG_STORE_N (2000), BENCH_PG_STORE_HISTORY (20000),
//                                     BENCH_PG_STATEMENTS=1 (pg_stat_statements), BENCH_BINARY=1,
//                                     BENCH_PG_SETTINGS (more server settings as JSON, e.g.
//                                     auto_explain's), BENCH_PG_KEEP_LOG (copy the server's log here)
import { PG_BIN, startBenchPostgres } from "./lib/pg.ts";
import { type DrainCost, dispatchBench } from "./lib/pg-drain.ts";
import { type IntakeCost, intakeBench } from "./lib/pg-intake.ts";
import { storeCostBench } from "./lib/pg-store-cost.ts";
import { FSYNC, ONLY, POOL, STATEMENTS } from "./lib/pg-setup.ts";
import { main } from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, table } from "./lib/report.ts";

if (!PG_BIN) {
  console.log(JSON.stringify({ bench: "postgres", skipped: "PostgreSQL not installed (apt-get install postgresql)" }));
  process.exit(0);
}

/** One database core's events per second, received to delivered, at the costs this run measured. */
function capacity(intake: IntakeCost[], drain: DrainCost): void {
  const cell = intake.find((c) => c.backend === "postgres" && c.intakes === 1 && c.concurrency === 64);
  const sqlite = intake.find((c) => c.backend === "sqlite" && c.concurrency === 64);
  if (!cell || !sqlite) return;
  const perEvent = cell.postgresMs + drain.postgresMsPerBatch;
  const config = { intake: "1 intake, 64 senders", drain: "1 dispatcher, single-event batches", pg_fsync: FSYNC };
  emit("postgres_capacity", "server_cpu_per_event_received_to_delivered", perEvent, "ms", config);
  emit("postgres_capacity", "events_per_s_per_database_core", 1000 / perEvent, "events/s", config);
  emit("postgres_capacity", "intake_cpu_ratio_vs_sqlite", cell.intakeMs / sqlite.intakeMs, "ratio", config);
  emit(
    "postgres_capacity",
    "dispatcher_cpu_ratio_vs_sqlite",
    drain.dispatcherMsPerBatch / drain.sqliteDispatcherMsPerBatch,
    "ratio",
    config,
  );
  table(
    "postgres capacity: server CPU per event, and what one database core carries",
    ["part", "server ms", "one core carries /s"],
    [
      ["enqueue (1 intake, 64 senders)", cell.postgresMs, 1000 / cell.postgresMs],
      ["delivery (1 dispatcher, a batch of one event)", drain.postgresMsPerBatch, 1000 / drain.postgresMsPerBatch],
      ["received to delivered", perEvent, 1000 / perEvent],
    ],
  );
}

await main("postgres", 240, async () => {
  const pg = await startBenchPostgres({ fsync: FSYNC, statements: STATEMENTS });
  try {
    const fsync = FSYNC
      ? "ON (synchronous_commit, full_page_writes on)"
      : "OFF (synchronous_commit, full_page_writes off): it flatters PostgreSQL's commit cost";
    console.error(
      `postgres bench: ${pg.version}, a throwaway cluster on a unix socket${pg.asNobody ? " (run as nobody)" : ""}, ` +
        `fsync ${fsync}`,
    );
    emit("postgres", "server", 1, "server", {
      version: pg.version,
      fsync: FSYNC,
      synchronous_commit: FSYNC,
      socket: "unix",
      pool: POOL,
    });
    const rx = receiver();
    let intake: IntakeCost[] = [];
    try {
      if (ONLY === "" || ONLY === "intake") intake = await intakeBench(pg, rx);
    } finally {
      rx.stop();
    }
    if (ONLY === "" || ONLY === "dispatch") capacity(intake, await dispatchBench(pg));
    if (ONLY === "" || ONLY === "dispatch" || ONLY === "store") await storeCostBench(pg);
  } finally {
    await pg.stop();
  }
});
