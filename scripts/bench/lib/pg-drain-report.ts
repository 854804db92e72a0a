// What the PostgreSQL drains print (pg-drain.ts runs them): each drain's JSON lines, then the
// tables of every drain and of each layout over its rounds against SQLite's drain of the same
// backlog at the same parallel.
import { emit, table } from "./report.ts";

/** [dispatch] parallel's default: a drain at another one says so in its name. */
export const DEFAULT_PARALLEL = 4;

/** A backlog to drain: what its source seals, how many batches over how many keys. */
export interface Backlog {
  kind: "sealed" | "due";
  n: number;
  keys: number;
  source: string;
  template: string;
}

/** The run's shape, for the tables' titles. */
export interface DrainRun {
  rounds: number;
  sealedN: number;
  sealedKeys: number;
  dueN: number;
  fsync: boolean;
}

/** One drain's figures. */
export interface Drain {
  name: string;
  /** dispatch.parallel, and the receiver's max_inflight with it. */
  parallel: number;
  kind: Backlog["kind"];
  backend: "sqlite" | "postgres";
  dispatchers: number;
  round: number;
  delivered: number;
  duplicates: number;
  attempts: number;
  drainS: number;
  firstS: number;
  /** From the first 2xx to the last. */
  spanS: number;
  rate: number;
  /** Batches each dispatcher logged as delivered. */
  shares: number[];
  /** CPU seconds of the dispatchers (their start-up included) and of the PostgreSQL server during the drain. */
  cpuHookspool: number;
  cpuPostgres: number;
}

/** One drain's JSON lines. */
export function emitDrain(d: Drain, b: Backlog, fsync: boolean): void {
  const config = {
    backlog: b.kind,
    backend: d.backend,
    dispatchers: d.dispatchers,
    round: d.round,
    batches: b.n,
    keys: b.keys,
    events_per_batch: 1,
    dispatch:
      d.parallel === DEFAULT_PARALLEL
        ? "defaults (poll_s 1, parallel 4, max_inflight 4 per dispatcher)"
        : `poll_s 1, parallel ${d.parallel}, max_inflight ${d.parallel} per dispatcher`,
    pg_fsync: d.backend === "postgres" ? fsync : null,
  };
  emit("postgres_dispatch", "batches_per_s", d.rate, "batches/s", config);
  emit("postgres_dispatch", "drain_time", d.drainS, "s", config);
  emit("postgres_dispatch", "first_delivery_after_spawn", d.firstS, "s", config);
  emit("postgres_dispatch", "batches_delivered", d.delivered, "batches", config);
  emit("postgres_dispatch", "duplicate_deliveries", d.duplicates, "batches", config);
  emit("postgres_dispatch", "attempts", d.attempts, "attempts", config);
  emit("postgres_dispatch", "dispatcher_cpu_per_batch", (d.cpuHookspool * 1000) / d.delivered, "ms", {
    ...config,
    note: "every dispatcher process, start-up included",
  });
  if (d.backend === "postgres")
    emit("postgres_dispatch", "postgres_cpu_per_batch", (d.cpuPostgres * 1000) / d.delivered, "ms", config);
  if (d.dispatchers > 1)
    for (let i = 0; i < d.shares.length; i++)
      emit("postgres_dispatch", "delivered_by_dispatcher", d.shares[i], "batches", { ...config, dispatcher: i });
}

/** Each layout over its rounds, against SQLite's drain of the same backlog. */
export function summarise(drains: Drain[], run: DrainRun): void {
  const names = [...new Set(drains.map((d) => d.name))];
  // Batches delivered after the first over the time from first to last 2xx, over the rounds.
  const rate = (name: string) => {
    const ds = drains.filter((d) => d.name === name);
    return ds.reduce((a, d) => a + d.delivered - 1, 0) / ds.reduce((a, d) => a + d.spanS, 0);
  };
  const firstS = (name: string) => Math.max(...drains.filter((d) => d.name === name).map((d) => d.firstS));
  const ref = (d: Drain) =>
    `${d.kind}, sqlite: 1 dispatcher${d.parallel === DEFAULT_PARALLEL ? "" : `, parallel ${d.parallel}`}`;
  const rows: (string | number)[][] = [];
  for (const name of names) {
    const d = drains.find((x) => x.name === name) as Drain;
    const config = {
      backlog: d.kind,
      backend: d.backend,
      dispatchers: d.dispatchers,
      parallel: d.parallel,
      rounds: run.rounds,
      pg_fsync: d.backend === "postgres" ? run.fsync : null,
    };
    emit("postgres_dispatch", "batches_per_s_all_rounds", rate(name), "batches/s", config);
    emit("postgres_dispatch", "first_delivery_after_spawn_worst", firstS(name), "s", config);
    if (d.backend === "postgres")
      emit("postgres_dispatch", "batches_per_s_ratio_vs_sqlite", rate(name) / rate(ref(d)), "ratio", config);
    rows.push([name, rate(name), rate(name) / rate(ref(d)), firstS(name)]);
  }
  table(
    `postgres dispatch: every drain (sealed: ${run.sealedN} single-event sealed batches over ${run.sealedKeys} ` +
      `keys; due: ${run.dueN} open batches past their quiet window), default [dispatch] unless said; ` +
      `PostgreSQL fsync ${run.fsync ? "on" : "OFF"}`,
    [
      "drain",
      "round",
      "delivered",
      "dupes",
      "drain s",
      "first 2xx s",
      "batches/s",
      "per dispatcher",
      "dispatcher ms/batch",
      "postgres ms/batch",
    ],
    drains.map((d) => [
      d.name,
      d.round,
      d.delivered,
      d.duplicates,
      d.drainS,
      d.firstS,
      d.rate,
      d.shares.join("+"),
      (d.cpuHookspool * 1000) / d.delivered,
      d.backend === "postgres" ? (d.cpuPostgres * 1000) / d.delivered : "-",
    ]),
  );
  table(
    `postgres dispatch: over ${run.rounds} round(s), against SQLite`,
    ["drain", "batches/s", "vs sqlite", "worst first 2xx s"],
    rows,
  );
}
