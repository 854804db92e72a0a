// The soak's flapping receiver: up, down (connection refused), slow (past the destination's
// timeout), 5xx, 429 with Retry-After, and back up, as the run's schedule says. Unsigned: the
// soak is about delivery, not signatures. A slow answer outlives the destination's timeout_s
// (1.5 s), so the dispatcher gives up on it: abandoned, not received.
import { type Delivery, Receiver } from "../../test/helpers/receiver.ts";
import { waitFor } from "../../test/helpers/proc.ts";

export type Mode = "up" | "down" | "slow" | "5xx" | "429";

/** The batch document as the checks read it. */
export interface Doc {
  route: string;
  key: string;
  batch_id: number;
  content_hash: string;
  count: number;
  events: { id: string; key: string; seq: number; pad: string }[];
  event_meta: { id: number }[];
}

export class FlappingReceiver {
  private mode: Mode = "up";
  private readonly receiver = new Receiver<Doc>({
    answer: async () => {
      if (this.mode === "5xx") return 502;
      if (this.mode === "429") return { status: 429, headers: { "Retry-After": "1" } };
      if (this.mode === "slow") await Bun.sleep(2500);
      return 200;
    },
  });

  get port(): number {
    return this.receiver.port;
  }

  async setMode(m: Mode): Promise<void> {
    if (m === "down") this.receiver.stop();
    else {
      await waitFor("the receiver to listen again", () => {
        try {
          this.receiver.listen();
          return true;
        } catch {
          return false;
        }
      });
    }
    this.mode = m;
  }

  /** The deliveries it accepted (2xx, and the dispatcher was still there to hear it), in answer order. */
  accepted(): Delivery<Doc>[] {
    return this.receiver.accepted();
  }

  stop(): void {
    this.receiver.stop();
  }
}
