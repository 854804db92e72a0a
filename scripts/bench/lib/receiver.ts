// The receiver the dispatcher delivers to: a Bun.serve on 127.0.0.1 that answers 200 at once.

export interface Arrival {
  /** Unix seconds (wall clock) when the receiver answered. */
  at: number;
  batchId: number;
  /** The batch's (route, key) key. */
  key: string;
  /** The batch document's last_at: when its last event was received (Unix s). */
  lastAt: number;
  count: number;
  /** The first event's own `sent_at` (Unix s), when the payload has one. */
  sentAt: number;
}

export interface Receiver {
  port: number;
  arrivals: Arrival[];
  /** TCP connections the deliveries came over (distinct client ports): few when the dispatcher keeps them alive. */
  connections(): number;
  stop(): void;
}

/** A receiver that answers 200 at once and records each delivery's batch id and timestamps. */
export function receiver(): Receiver {
  const arrivals: Arrival[] = [];
  const clients = new Set<number>();
  const server: ReturnType<typeof Bun.serve> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 60,
    async fetch(req) {
      const peer = server.requestIP(req);
      if (peer) clients.add(peer.port);
      const body = await req.text();
      let doc: { batch_id?: number; key?: string; last_at?: number; count?: number; events?: { sent_at?: number }[] } =
        {};
      try {
        doc = JSON.parse(body);
      } catch {
        // an unparsable body still gets its 200: this receiver only counts
      }
      arrivals.push({
        at: Date.now() / 1000,
        batchId: Number(doc.batch_id ?? req.headers.get("x-hookspool-batch") ?? -1),
        key: String(doc.key ?? ""),
        lastAt: Number(doc.last_at ?? Number.NaN),
        count: Number(doc.count ?? 0),
        sentAt: Number(doc.events?.[0]?.sent_at ?? Number.NaN),
      });
      return new Response("ok");
    },
  });
  return { port: server.port as number, arrivals, connections: () => clients.size, stop: () => server.stop(true) };
}
