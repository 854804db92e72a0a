// The soak's senders: random bursts over the sources and five keys a source, each sender posting
// signed requests to one intake (sender i to intake i mod intakes). A request that is not acked
// (its intake killed or restarting) is held and sent again with the same body, as a real sender
// would; the dedup id makes a retry of a request that did commit a duplicate, not a second event.
import { createHmac } from "node:crypto";
import { SECRET, type Src } from "./config.ts";

interface Pending {
  src: Src;
  body: string;
  id: string;
}

export class Load {
  /** Every event an intake acked (202 or 200), by id. */
  readonly acked = new Set<string>();
  requests = 0;
  private nextId = 0;
  private readonly seq = new Map<string, number>();
  private readonly pending: Pending[][];

  /**
   * `portOf(i)`: intake i's port as it listens now (a stale one while it restarts, which refuses).
   */
  constructor(
    private readonly rand: (n: number) => number,
    private readonly portOf: (intake: number) => number,
    private readonly intakes: number,
    senders: number,
  ) {
    this.pending = Array.from({ length: senders }, () => []);
  }

  /** Every sender, on its own, until `end`: requests land while an intake is dead or restarting. */
  run(end: number): Promise<void> {
    return Promise.all(
      this.pending.map(async (_, s) => {
        while (Date.now() < end) {
          await this.burst(s);
          await Bun.sleep(20 + this.rand(120));
        }
      }),
    ).then(() => undefined);
  }

  /** Each sender sends what it holds again; true once nothing is held. */
  async retryHeld(): Promise<boolean> {
    await Promise.all(this.pending.map((_, s) => this.retry(s)));
    return this.pending.every((p) => p.length === 0);
  }

  private newEvent(): Pending {
    const src = (["a", "b", "c"] as const)[this.rand(3)];
    const key = `k${this.rand(5)}`;
    const s = (this.seq.get(`${src}/${key}`) ?? 0) + 1;
    this.seq.set(`${src}/${key}`, s);
    const id = `e${++this.nextId}`;
    return { src, id, body: JSON.stringify({ id, key, seq: s, type: "tick", pad: "x".repeat(10 + this.rand(600)) }) };
  }

  private async send(sender: number, e: Pending): Promise<boolean> {
    this.requests++;
    try {
      const port = this.portOf(sender % this.intakes);
      const res = await fetch(`http://127.0.0.1:${port}/hooks/${e.src}`, {
        method: "POST",
        body: e.body,
        headers: {
          "Content-Type": "application/json",
          "X-Sig": `sha256=${createHmac("sha256", SECRET).update(e.body).digest("hex")}`,
        },
        signal: AbortSignal.timeout(3000),
      });
      await res.arrayBuffer();
      if (res.status === 202 || res.status === 200) {
        this.acked.add(e.id);
        return true;
      }
    } catch {
      // intake down (killed): the sender holds the event and retries, as a real sender would
    }
    return false;
  }

  private async retry(sender: number): Promise<void> {
    const held = this.pending[sender].splice(0);
    for (const e of held) if (!(await this.send(sender, e))) this.pending[sender].push(e);
  }

  private async burst(sender: number): Promise<void> {
    await this.retry(sender);
    const n = 1 + this.rand(8);
    for (let i = 0; i < n; i++) {
      const e = this.newEvent();
      if (!(await this.send(sender, e))) this.pending[sender].push(e);
    }
  }
}
