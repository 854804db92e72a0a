// Fair shares of a tick's free slots: each goes to the destination with ready work that has the
// fewest deliveries in flight, the one whose last turn is oldest among equals, each bounded by
// its own gate (max_inflight, the breaker's probe, the 429 gate, its rate). So a destination with
// ready work gets a slot within one delivery time however large another's backlog is.
import type { Destination, Pace } from "../delivery.ts";
import { hitsNeeded } from "../pacing.ts";
import type { Candidate } from "../store/queue.ts";

/** A destination with ready work in one tick: what its gate lets start, and what it has running. */
export interface Lane {
  name: string;
  dest: Destination | null;
  pace: Pace | null;
  /** Its candidates in FIFO order (the one probe, when half-open). */
  queue: Candidate[];
  slots: number;
  /** Requests its rate has room for. */
  hits: number;
  probe: boolean;
  maxInflight: number;
  /** Deliveries in flight, this tick's picks counted. */
  busy: number;
}

/** One batch a tick will claim: its lane, and the hits it reserves in its destination's window. */
export interface Pick {
  c: Candidate;
  lane: Lane;
  hits: number;
}

export class FairShare {
  /** When each destination last got a slot (a counter): equals in flight take turns by it. */
  private readonly turns = new Map<string, number>();
  private turn = 0;

  /** Hand out up to `free` slots among `lanes` (which it uses up as it goes). */
  share(lanes: Lane[], free: number): Pick[] {
    const picks: Pick[] = [];
    while (free > 0) {
      let best: Lane | null = null;
      for (const l of lanes) {
        if (l.slots <= 0 || l.queue.length === 0) continue;
        if (best === null || l.busy < best.busy || (l.busy === best.busy && this.lastTurn(l) < this.lastTurn(best)))
          best = l;
      }
      if (best === null) break;
      const c = best.queue[0];
      const hits = best.pace ? hitsNeeded(best.pace.rate, best.dest?.unwrap ?? false, c.count) : 0;
      if (hits > best.hits) {
        // The rate has no room for its next batch: it waits, in order, for the window to move.
        best.slots = 0;
        continue;
      }
      best.queue.shift();
      best.slots--;
      best.hits -= hits;
      best.busy++;
      free--;
      this.turns.set(best.name, ++this.turn);
      picks.push({ c, lane: best, hits });
    }
    return picks;
  }

  private lastTurn(l: Lane): number {
    return this.turns.get(l.name) ?? 0;
  }
}
