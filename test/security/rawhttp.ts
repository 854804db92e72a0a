// A raw HTTP/1.1 client over Bun.connect, for what fetch will not send: a lying or missing
// Content-Length, a 10 MiB header block, a body dripped a byte at a time, an unknown method.
const enc = new TextEncoder();

export interface RawConnection {
  /** Write everything, waiting for the socket to drain; stops quietly if the server hangs up. */
  write(data: string | Uint8Array): Promise<void>;
  /** Everything received so far, as latin1 text. */
  received(): string;
  /** The status codes of every response received so far, in order. */
  statuses(): number[];
  closed(): boolean;
  /** Wait until the server closes the connection; false if it did not within `ms`. */
  waitClosed(ms: number): Promise<boolean>;
  /** Wait until `n` responses have arrived (or the connection closed, or `ms` passed). */
  waitResponses(n: number, ms: number): Promise<number[]>;
  close(): void;
}

export async function rawConnect(port: number): Promise<RawConnection> {
  let buf = "";
  let closed = false;
  let waiters: (() => void)[] = [];
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(_s, d) {
        buf += Buffer.from(d).toString("latin1");
        wake();
      },
      drain: wake,
      close() {
        closed = true;
        wake();
      },
      error() {
        closed = true;
        wake();
      },
    },
  });
  const nap = (ms: number) =>
    new Promise<void>((r) => {
      waiters.push(r);
      setTimeout(r, ms);
    });
  const statuses = () => [...buf.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1]));
  return {
    async write(data) {
      let bytes = typeof data === "string" ? enc.encode(data) : data;
      while (bytes.length > 0 && !closed) {
        const n = sock.write(bytes);
        if (n > 0) bytes = bytes.subarray(n);
        if (bytes.length > 0) await nap(50);
      }
      sock.flush();
    },
    received: () => buf,
    statuses,
    closed: () => closed,
    async waitClosed(ms) {
      const until = Date.now() + ms;
      while (!closed && Date.now() < until) await nap(Math.max(1, Math.min(50, until - Date.now())));
      return closed;
    },
    async waitResponses(n, ms) {
      const until = Date.now() + ms;
      while (statuses().length < n && !closed && Date.now() < until)
        await nap(Math.max(1, Math.min(50, until - Date.now())));
      return statuses();
    },
    close() {
      if (!closed) sock.end();
      closed = true;
    },
  };
}

/** Send one request (add "Connection: close" to it) and collect the answers until the server hangs up. */
export async function rawRequest(
  port: number,
  data: string | Uint8Array,
  ms = 3000,
): Promise<{ statuses: number[]; closed: boolean; text: string }> {
  const c = await rawConnect(port);
  try {
    await c.write(data);
    const closed = await c.waitClosed(ms);
    return { statuses: c.statuses(), closed, text: c.received() };
  } finally {
    c.close();
  }
}
