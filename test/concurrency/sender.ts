// One sender process of the concurrency suite: `count` signed requests through
// the real intake, one sequential chain per key (so a key's sequence numbers are committed in
// order) and the chains in parallel. Prints one JSON line: every request, whether it was acked.
//
//   bun sender.ts <port> <sender-index> <count> <keys> <secret-file>
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

/** What the suite needs to know about one request. */
export interface Sent {
  id: string;
  key: string;
  sender: number;
  seq: number;
  /** Body bytes: what the spool counts against max_bytes (events.size). */
  size: number;
  /** The last HTTP status (0: no answer) and the intake's status word. */
  status: number;
  answer: string;
  acked: boolean;
}

export interface SenderReport {
  sender: number;
  sent: Sent[];
}

/** A key in the lower half gets small payloads (max_events binds), the upper half big ones (max_bytes binds). */
export function padFor(keyIndex: number, keys: number, sender: number, i: number): number {
  return keyIndex < keys / 2 ? 40 + ((i * 37 + sender * 11) % 80) : 250 + ((i * 53 + sender * 7) % 200);
}

const ATTEMPTS = 5;

async function post(port: number, secret: string, body: string): Promise<{ status: number; answer: string }> {
  const sig = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
  let last = { status: 0, answer: "" };
  // A sender retries what was not acked, with the same body: the dedup id makes a retry of a
  // request that did commit a 200 duplicate, never a second event.
  for (let a = 0; a < ATTEMPTS; a++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/hooks/load`, {
        method: "POST",
        body,
        headers: { "Content-Type": "application/json", "X-Sig": sig },
      });
      const text = await res.text();
      let answer = "";
      try {
        answer = String((JSON.parse(text) as { status?: unknown }).status ?? "");
      } catch {
        answer = "";
      }
      last = { status: res.status, answer };
      if (res.status >= 200 && res.status < 300) return last;
    } catch (e) {
      last = { status: 0, answer: (e as Error).name };
    }
    await Bun.sleep(20 * (a + 1));
  }
  return last;
}

async function main(): Promise<void> {
  const [portArg, senderArg, countArg, keysArg, secretFile] = process.argv.slice(2);
  const port = Number(portArg);
  const sender = Number(senderArg);
  const count = Number(countArg);
  const keys = Number(keysArg);
  const secret = readFileSync(secretFile, "utf8");
  const marker = process.env.PAYLOAD_MARKER ?? "";
  const sent: Sent[] = [];
  const chain = async (k: number) => {
    for (let i = k, seq = 0; i < count; i += keys, seq++) {
      const id = `s${sender}-e${i}`;
      const key = `k${k}`;
      const body = JSON.stringify({
        id,
        key,
        sender,
        seq,
        type: "load",
        pad: `${marker}${"x".repeat(padFor(k, keys, sender, i))}`,
      });
      const r = await post(port, secret, body);
      // 202 queued or 200 duplicate is an ack of a spooled event; 202 quarantined is not a delivery.
      const acked = (r.status === 202 && r.answer === "queued") || (r.status === 200 && r.answer === "duplicate");
      sent.push({ id, key, sender, seq, size: Buffer.byteLength(body), status: r.status, answer: r.answer, acked });
    }
  };
  await Promise.all(Array.from({ length: keys }, (_, k) => chain(k)));
  process.stdout.write(`${JSON.stringify({ sender, sent } satisfies SenderReport)}\n`);
}

if (import.meta.main) await main();
