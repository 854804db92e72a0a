// The receiver every process suite delivers to (e2e, crash, concurrency, soak): an HTTP server on
// 127.0.0.1 that checks each delivery's signature with a stock Standard Webhooks library (or,
// for an unsigned destination, only reads it), records what arrived, and answers as the test
// says. It can go away and come back on the same port, as a receiver that restarts does.
import { Webhook } from "standardwebhooks";

/** One request as the receiver got it. */
export interface Delivery<D = unknown> {
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  webhookId: string;
  /** X-Hookspool-Batch. */
  batchHeader: string;
  body: string;
  /** The body parsed (after its signature verified, when the receiver checks one). */
  doc: D;
  /** What the receiver answered. */
  status: number;
  /** The sender gave up (its deadline) before the answer: it never saw it. */
  abandoned: boolean;
  startMs: number;
  endMs: number;
}

export type Answer = number | { status: number; headers?: Record<string, string> };

export interface ReceiverOptions<D> {
  /** The destination's signing secret (whsec_...): every delivery must verify with it. Absent: unsigned. */
  secret?: string;
  /** The answer to a delivery (a status, or a status and headers); 200 when absent. It may wait. */
  answer?(d: Pick<Delivery<D>, "path" | "headers" | "doc">): Answer | Promise<Answer>;
  /** Hold each request this long before answering, so deliveries in flight together overlap. */
  holdMs?: number;
  /** Listen on this port (0: any free one). */
  port?: number;
}

export class Receiver<D = Record<string, unknown>> {
  /** Every delivery it read, in the order they were answered. */
  readonly got: Delivery<D>[] = [];
  /** Deliveries whose signature did not verify (answered 400); a suite fails on any. */
  readonly unverified: string[] = [];
  /** The most requests, and the most distinct batch keys, in flight at once. */
  readonly peaks = { inflight: 0, keys: 0 };
  private server: ReturnType<typeof Bun.serve> | null = null;
  private boundPort: number;
  private inflight = 0;
  private readonly inflightKeys = new Map<string, number>();
  private readonly wh: Webhook | null;

  constructor(private readonly o: ReceiverOptions<D>) {
    this.wh = o.secret ? new Webhook(o.secret) : null;
    this.boundPort = o.port ?? 0;
    this.listen();
  }

  get port(): number {
    return this.boundPort;
  }

  /** Listen (again, on the same port after stop()). Throws while the port is not free yet. */
  listen(): void {
    if (this.server) return;
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: this.boundPort,
      idleTimeout: 30,
      fetch: (req) => this.take(req),
    });
    this.boundPort = this.server.port as number;
  }

  /** Stop listening: a sender now gets connection refused. */
  stop(): void {
    this.server?.stop(true);
    this.server = null;
  }

  /** Deliveries of one batch (the document's batch_id), in arrival order. */
  of(batchId: number): Delivery<D>[] {
    return this.got.filter((d) => (d.doc as { batch_id?: unknown }).batch_id === batchId);
  }

  /** The deliveries it accepted (answered 2xx, and the sender was still there to hear it). */
  accepted(): Delivery<D>[] {
    return this.got.filter((d) => d.status >= 200 && d.status < 300 && !d.abandoned);
  }

  private async take(req: Request): Promise<Response> {
    const startMs = performance.now();
    const path = new URL(req.url).pathname;
    const body = await req.text();
    const headers = Object.fromEntries(req.headers.entries());
    let doc: D;
    try {
      doc = (this.wh ? this.wh.verify(body, headers) : JSON.parse(body)) as D;
    } catch (e) {
      this.unverified.push(`${path} ${headers["webhook-id"] ?? "(no webhook-id)"}: ${(e as Error).message}`);
      return new Response("bad signature", { status: 400 });
    }
    const key = String((doc as { key?: unknown }).key ?? "");
    this.enter(key);
    try {
      const a = this.o.answer ? await this.o.answer({ path, headers, doc }) : 200;
      const { status, headers: extra } = typeof a === "number" ? { status: a, headers: undefined } : a;
      if (this.o.holdMs) await Bun.sleep(this.o.holdMs);
      this.got.push({
        path,
        headers,
        webhookId: headers["webhook-id"] ?? "",
        batchHeader: headers["x-hookspool-batch"] ?? "",
        body,
        doc,
        status,
        abandoned: req.signal.aborted,
        startMs,
        endMs: performance.now(),
      });
      return new Response(status === 204 ? null : status < 300 ? "ok" : "no", { status, headers: extra });
    } finally {
      this.leave(key);
    }
  }

  private enter(key: string): void {
    this.inflight++;
    this.inflightKeys.set(key, (this.inflightKeys.get(key) ?? 0) + 1);
    this.peaks.inflight = Math.max(this.peaks.inflight, this.inflight);
    this.peaks.keys = Math.max(this.peaks.keys, this.inflightKeys.size);
  }

  private leave(key: string): void {
    this.inflight--;
    const n = (this.inflightKeys.get(key) ?? 1) - 1;
    if (n === 0) this.inflightKeys.delete(key);
    else this.inflightKeys.set(key, n);
  }
}
