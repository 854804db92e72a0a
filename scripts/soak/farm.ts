// The soak's processes: `hookspool intake` and `hookspool dispatch` processes, each in its home
// (on SQLite the intake and the one dispatcher share one; on PostgreSQL each has its own, as on
// separate hosts), killed with kill -9 and started again. It keeps each process's stderr for the
// log checks, what a killed dispatcher died holding, and the CPU time and peak RSS of them all.
import { readFileSync } from "node:fs";
import { type Hookspool, type Runtime, startHookspool, waitFor } from "../../test/helpers/proc.ts";
import type { SoakStore } from "./checks.ts";

export type Kind = "intake" | "dispatch";

const TICKS = 100; // CLK_TCK on Linux

export interface FarmOptions {
  intakeHomes: string[];
  dispatchHomes: string[];
  runtime: Runtime;
  env: Record<string, string>;
  store: SoakStore;
}

export class Farm {
  readonly kills = { intake: 0, dispatch: 0 };
  readonly usage = { cpuS: 0, peakRssKb: 0 };
  /** Every stopped process's stderr. */
  readonly stderrs: string[] = [];
  /** The attempts whose leases killed dispatchers held when they died. */
  readonly heldAtKill: number[] = [];
  private readonly procs: Record<Kind, (Hookspool | null)[]>;
  private readonly ports: number[];

  constructor(private readonly o: FarmOptions) {
    this.procs = { intake: o.intakeHomes.map(() => null), dispatch: o.dispatchHomes.map(() => null) };
    this.ports = o.intakeHomes.map(() => 0);
  }

  count(kind: Kind): number {
    return this.procs[kind].length;
  }

  /** The dispatchers that hold a lease now, by index: a kill of one of them tests the takeover. */
  async leaseHolders(): Promise<number[]> {
    const out: number[] = [];
    for (const [i, h] of this.procs.dispatch.entries())
      if (h && (await this.o.store.leasesOf(h.proc.pid)).length > 0) out.push(i);
    return out;
  }

  /** Intake i's port: the last one it listened on (refused while it is down). */
  port(i: number): number {
    return this.ports[i];
  }

  /** `hookspool migrate`, once, from the first intake's home (every home shares the spool). */
  async migrate(): Promise<void> {
    const m = await startHookspool(this.o.intakeHomes[0], ["migrate"], this.opts());
    if ((await m.exited) !== 0) throw new Error(`migrate failed: ${m.stderr().slice(-500)}`);
  }

  async startAll(): Promise<void> {
    for (let i = 0; i < this.count("intake"); i++) await this.start("intake", i);
    for (let i = 0; i < this.count("dispatch"); i++) await this.start("dispatch", i);
  }

  async start(kind: Kind, i: number): Promise<void> {
    const home = kind === "intake" ? this.o.intakeHomes[i] : this.o.dispatchHomes[i];
    const h = await startHookspool(home, [kind], this.opts());
    this.procs[kind][i] = h;
    if (kind === "intake") {
      this.ports[i] = await h.port();
      return;
    }
    // Its first tick's heartbeat names its pid: from then on it holds the lock (SQLite) and delivers.
    const pid = h.proc.pid;
    await waitFor(`dispatcher ${i}'s first heartbeat`, () => this.o.store.beating(pid));
  }

  /** kill -9 of one process; a dispatcher's leases it died holding are noted for the checks. */
  async kill9(kind: Kind, i: number): Promise<void> {
    const h = this.procs[kind][i];
    if (!h) return;
    this.account(h);
    h.kill("SIGKILL");
    await h.exited;
    this.stderrs.push(h.stderr());
    this.procs[kind][i] = null;
    this.kills[kind]++;
    if (kind === "dispatch") this.heldAtKill.push(...(await this.o.store.leasesOf(h.proc.pid)));
  }

  /** SIGTERM to every process left, each accounted for first. */
  async stopAll(): Promise<void> {
    for (const kind of ["intake", "dispatch"] as const)
      for (let i = 0; i < this.procs[kind].length; i++) {
        const h = this.procs[kind][i];
        if (!h) continue;
        this.account(h);
        h.kill("SIGTERM");
        await h.exited;
        this.stderrs.push(h.stderr());
        this.procs[kind][i] = null;
      }
  }

  /** kill -9 of every process left, without waiting (the soak was interrupted). */
  killAll(): void {
    for (const kind of ["intake", "dispatch"] as const) for (const h of this.procs[kind]) h?.kill("SIGKILL");
  }

  private opts() {
    return { runtime: this.o.runtime, env: this.o.env };
  }

  /** Read a live process's CPU time and peak RSS from /proc before it goes away. */
  private account(h: Hookspool): void {
    try {
      const stat = readFileSync(`/proc/${h.proc.pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      this.usage.cpuS += (Number(fields[11]) + Number(fields[12])) / TICKS;
      const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${h.proc.pid}/status`, "utf8"));
      if (hwm) this.usage.peakRssKb = Math.max(this.usage.peakRssKb, Number(hwm[1]));
    } catch {
      // already gone
    }
  }
}
