// What makes the dispatcher tick between its poll_s ticks, besides a delivery ending: a timer
// on the next instant a batch becomes ready by itself (here), and writes by other processes,
// which the store reports (SQLite's data_version, PostgreSQL's LISTEN: DispatchStore.watchWork).

/**
 * One timer on the earliest instant a batch becomes ready (a window ends, a retry falls due),
 * within the next tick's horizon; arming a later instant leaves an earlier one be.
 */
export class ReadyTimer {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private at = Number.POSITIVE_INFINITY;

  constructor(private readonly fire: () => void) {}

  arm(at: number, now: number, horizonS: number): void {
    if (at - now >= horizonS) return;
    if (this.timer && at >= this.at) return;
    this.clear();
    this.at = at;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.at = Number.POSITIVE_INFINITY;
        this.fire();
      },
      Math.max(0, Math.ceil((at - now) * 1000)) + 2,
    );
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.at = Number.POSITIVE_INFINITY;
  }
}
