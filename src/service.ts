// The shape of every long-lived part of a hookspool process: the intake, the dispatcher, each
// maintenance chore and the config watcher. A process builds its services, starts them in
// order, and on SIGTERM stops them in reverse, so the intake stops taking requests before the
// dispatcher lets its in-flight attempts finish.

/**
 * A long-lived part. `start()` and `stop()` are idempotent: a second start of a started service
 * and a second stop of a stopped one do nothing, and `stop()` is safe before `start()` (a
 * process that fails half-way through its start stops everything it built).
 */
export interface Service {
  /** For logs: "intake", "dispatcher", "liveness", ... */
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Start `services` in order. When one fails to start, the ones already started are stopped
 * (in reverse) before the error goes on, so nothing is left running behind a failed start.
 */
export async function startAll(services: readonly Service[]): Promise<void> {
  const started: Service[] = [];
  try {
    for (const s of services) {
      await s.start();
      started.push(s);
    }
  } catch (e) {
    await stopAll(started);
    throw e;
  }
}

/** Stop `services` in reverse order; every one is stopped even when an earlier stop fails. */
export async function stopAll(services: readonly Service[]): Promise<void> {
  let first: unknown = null;
  for (const s of [...services].reverse()) {
    try {
      await s.stop();
    } catch (e) {
      first ??= e;
    }
  }
  if (first !== null) throw first;
}

export interface PeriodicOptions {
  /** Milliseconds from the end of one run to the start of the next (read each time: a reload may change it). */
  everyMs(): number;
  /** Milliseconds from start() to the first run; the interval when absent. */
  firstMs?: number;
  /** One run. What it throws goes to `onError`, and the next run is still scheduled. */
  run(): Promise<void>;
  onError(e: unknown): void;
}

/**
 * A service that runs one task periodically, never two runs at once: the next run is scheduled
 * when the last one ends, and `stop()` waits for a run in progress.
 */
export class Periodic implements Service {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  private started = false;

  constructor(
    readonly name: string,
    private readonly o: PeriodicOptions,
  ) {}

  /** Whether it is started (and so will run again). */
  get active(): boolean {
    return this.started;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.schedule(this.o.firstMs ?? this.o.everyMs());
  }

  async stop(): Promise<void> {
    this.started = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Run the task now, outside the schedule (or join the run in progress). */
  runNow(): Promise<void> {
    this.running ??= this.o
      .run()
      .catch((e) => this.o.onError(e))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(async () => {
      this.timer = null;
      if (!this.started) return;
      await this.runNow();
      if (this.started) this.schedule(this.o.everyMs());
    }, ms);
  }
}
