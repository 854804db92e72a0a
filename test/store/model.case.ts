// The randomised model test: seeded enqueue/seal/claim/complete/replay/drop/recover
// operations run against the store and against an independent model of the state machine
// (batch states, the join rule, FIFO, leases, dedup); the two are compared after every step.
// The store is driven through the services' roles: the intake's enqueue, the dispatcher's seal,
// candidates, claims (several in one transaction, as a tick takes them), recorded outcomes
// (several workers' ends in one transaction) and lease recovery, the operator's replay and drop.
import { expect, test } from "bun:test";
import { seededRng, type Rng } from "../../src/clock.ts";
import { type EventCopy, eventSize } from "../../src/store/enqueue.ts";
import { type AttemptEnd, claimAll, type Ending, endAll } from "../helpers/attempts.ts";
import { payloadOf, T0 } from "../helpers/spool.ts";
import type { Suite } from "./suite.ts";

/** The model cases, on whatever store fresh() opens (`modelSteps` operations: fewer on a slower backend). */
export function modelCases({ fresh, modelSteps }: Suite): void {
  type State = "open" | "sealed" | "leased" | "retry" | "delivered" | "dead" | "dropped";
  interface Win {
    quiet_s: number;
    max_s: number;
    max_events: number;
    max_bytes: number;
  }
  interface MBatch {
    id: number;
    route: string;
    key: string;
    state: State;
    events: number[];
    count: number;
    bytes: number;
    first_at: number;
    last_at: number;
    win: Win;
    attempts: number;
    next_attempt_at: number | null;
    not_before: number | null;
    owner: string | null;
    lease_until: number | null;
    hash: string | null;
  }

  const WINDOWS: Record<string, Win> = {
    r1: { quiet_s: 3, max_s: 8, max_events: 4, max_bytes: 400 },
    r2: { quiet_s: 0, max_s: 0, max_events: 3, max_bytes: 300 },
    tee: { quiet_s: 2, max_s: 5, max_events: 5, max_bytes: 500 },
  };
  const DEDUP_WINDOW = 400;
  const ACTIVE: State[] = ["open", "sealed", "retry", "leased"];

  /** The model: plain data and the state machine's rules, written without looking at the SQL. */
  class Model {
    batches = new Map<number, MBatch>();
    dedup = new Map<string, { event: number; seen: number; dups: number }>();
    eventBatch = new Map<number, number>();
    nextEvent = 1;
    nextBatch = 1;
    nextAttempt = 1;

    private seal(b: MBatch): void {
      b.state = "sealed";
    }

    private join(
      route: string,
      key: string,
      size: number,
      now: number,
      destination: string,
    ): { eventId: number; batchId: number } {
      let open = [...this.batches.values()].find((b) => b.route === route && b.key === key && b.state === "open");
      if (open && open.bytes + size > open.win.max_bytes && open.count >= 1) {
        this.seal(open);
        open = undefined;
      }
      if (!open) {
        open = {
          id: this.nextBatch++,
          route,
          key,
          state: "open",
          events: [],
          count: 0,
          bytes: 0,
          first_at: now,
          last_at: now,
          win: WINDOWS[route],
          attempts: 0,
          next_attempt_at: null,
          not_before: null,
          owner: null,
          lease_until: null,
          hash: null,
        };
        this.batches.set(open.id, open);
        void destination;
      }
      const eventId = this.nextEvent++;
      open.events.push(eventId);
      open.count += 1;
      open.bytes += size;
      open.last_at = Math.max(open.last_at, now);
      this.eventBatch.set(eventId, open.id);
      if (open.count >= open.win.max_events || open.bytes >= open.win.max_bytes) this.seal(open);
      return { eventId, batchId: open.id };
    }

    enqueue(
      routes: string[],
      key: string,
      size: number,
      dedupId: string | null,
      now: number,
    ): { status: string; ids: number[] } {
      let dups = 0;
      if (dedupId) {
        const d = this.dedup.get(dedupId);
        if (d && now - d.seen < DEDUP_WINDOW) {
          const b = this.batches.get(this.eventBatch.get(d.event) as number) as MBatch;
          if (b.state === "dead") {
            this.replay(b, now);
            d.dups++;
            return { status: "replayed", ids: [d.event, b.id] };
          }
          if (b.state !== "dropped") {
            d.dups++;
            return { status: "duplicate", ids: [d.event] };
          }
          dups = d.dups + 1;
        }
      }
      const placed = routes.map((r) => this.join(r, key, size, now, r));
      if (dedupId) this.dedup.set(dedupId, { event: placed[0].eventId, seen: now, dups });
      return { status: "queued", ids: placed.flatMap((p) => [p.eventId, p.batchId]) };
    }

    sealReady(now: number): number[] {
      const out: number[] = [];
      for (const b of [...this.batches.values()].sort((x, y) => x.id - y.id)) {
        if (b.state !== "open") continue;
        const w = b.win;
        if ((w.quiet_s === 0 && w.max_s === 0) || now >= b.last_at + w.quiet_s || now >= b.first_at + w.max_s) {
          this.seal(b);
          out.push(b.id);
        }
      }
      return out;
    }

    candidates(now: number): number[] {
      const heads = new Map<string, MBatch>();
      for (const b of this.batches.values()) {
        if (!ACTIVE.includes(b.state)) continue;
        const g = `${b.route}\u0000${b.key}`;
        const h = heads.get(g);
        if (!h || b.first_at < h.first_at || (b.first_at === h.first_at && b.id < h.id)) heads.set(g, b);
      }
      return [...heads.values()]
        .filter(
          (b) =>
            (b.state === "sealed" || (b.state === "retry" && (b.next_attempt_at as number) <= now)) &&
            (b.not_before === null || b.not_before <= now),
        )
        .sort((x, y) => x.first_at - y.first_at || x.id - y.id)
        .map((b) => b.id);
    }

    claim(b: MBatch, now: number): string {
      const owner = `h:1:${this.nextAttempt++}`;
      b.state = "leased";
      b.owner = owner;
      b.lease_until = now + 30;
      return owner;
    }

    finish(b: MBatch, owner: string, outcome: "delivered" | "retry" | "dead", counted: boolean, next: number): boolean {
      if (b.state !== "leased" || b.owner !== owner) return false;
      b.owner = null;
      b.lease_until = null;
      if (counted) b.attempts += 1;
      b.state = outcome;
      if (outcome === "retry") b.next_attempt_at = next;
      if (outcome === "dead") b.next_attempt_at = null;
      return true;
    }

    recover(now: number): number[] {
      const out: number[] = [];
      for (const b of [...this.batches.values()].sort((x, y) => x.id - y.id)) {
        if (b.state === "leased" && (b.lease_until as number) < now) {
          b.state = "retry";
          b.next_attempt_at = now;
          b.owner = null;
          b.lease_until = null;
          out.push(b.id);
        }
      }
      return out;
    }

    replay(b: MBatch, now: number): void {
      b.state = "retry";
      b.attempts = 0;
      b.next_attempt_at = now;
      b.not_before = now;
    }

    drop(b: MBatch): boolean {
      if (!["open", "sealed", "retry", "dead"].includes(b.state)) return false;
      b.state = "dropped";
      b.next_attempt_at = null;
      b.not_before = null;
      return true;
    }
  }

  function pick<T>(rng: Rng, xs: T[]): T | undefined {
    return xs.length ? xs[Math.floor(rng.next() * xs.length)] : undefined;
  }

  function copiesFor(routes: string[]): EventCopy[] {
    return routes.map((r, i) => ({ route: r, destination: `http:${r}`, tee: i > 0, window: WINDOWS[r] }));
  }

  test(`${modelSteps.toLocaleString("en")} random operations agree with the model after every step`, async () => {
    const s = await fresh();
    // Durability is proven by the crash tests; this one checks the state machine, so it skips
    // fsync (SQLite's PRAGMA; the throwaway PostgreSQL server runs with fsync off).
    if (s.sqlite) s.sqlite.spool.db.run("PRAGMA synchronous = OFF");
    const rng = seededRng(20261129);
    const m = new Model();
    let now = T0;
    const owners = new Map<number, { owner: string; attempt: number }>();
    const tally: Record<string, number> = {};

    // The whole unfinished queue as one digest line per batch, read in one query so a per-step
    // comparison of every active batch stays cheap; on a mismatch the rows are compared in full.
    const f = (x: number | null) => (x === null ? "-" : x.toFixed(1));
    const digestCols = [
      "id",
      "state",
      "count",
      "bytes",
      "first_at",
      "last_at",
      "attempts",
      "next_attempt_at",
      "not_before",
      "lease_owner",
      "content_hash",
    ];
    type DigestRow = {
      id: number;
      state: string;
      count: number;
      bytes: number;
      first_at: number;
      last_at: number;
      attempts: number;
      next_attempt_at: number | null;
      not_before: number | null;
      lease_owner: string | null;
      content_hash: string | null;
    };
    const storeDigest = async () =>
      (await s.rows<DigestRow>("batches", { cols: digestCols, where: { state: ACTIVE }, order: "id" })).map((b) =>
        [
          b.id,
          b.state,
          b.count,
          b.bytes,
          f(b.first_at),
          f(b.last_at),
          b.attempts,
          b.state === "retry" ? f(b.next_attempt_at) : "-",
          f(b.not_before),
          b.lease_owner ?? "-",
          b.content_hash ?? "-",
        ].join(","),
      );
    const modelDigest = () =>
      [...m.batches.values()]
        .filter((b) => ACTIVE.includes(b.state))
        .sort((x, y) => x.id - y.id)
        .map((b) =>
          [
            b.id,
            b.state,
            b.count,
            b.bytes,
            f(b.first_at),
            f(b.last_at),
            b.attempts,
            b.state === "retry" ? f(b.next_attempt_at) : "-",
            f(b.not_before),
            b.owner ?? "-",
            b.hash ?? "HASH",
          ].join(","),
        );
    // Compared with Bun.deepEquals first and through expect only on a mismatch, so a failure
    // prints the step, the operation and the difference, and a pass costs no matcher per row.
    const same = (ctx: string, got: unknown, want: unknown) => {
      if (!Bun.deepEquals(got, want)) expect([ctx, got]).toEqual([ctx, want]);
    };
    const compare = async (step: number, op: string) => {
      const ctx = `step ${step} (${op})`;
      same(
        ctx,
        (await s.dispatch.candidates(now, Number.POSITIVE_INFINITY)).map((c) => c.id),
        m.candidates(now),
      );
      // content_hash: absent while open, set at seal (learned from the store the first time the
      // model sees it sealed), identical ever after, across attempts and replays
      const lines = await storeDigest();
      const want = modelDigest();
      for (let i = 0; i < want.length; i++) {
        if (!want[i].endsWith(",HASH")) continue;
        const b = m.batches.get(Number(want[i].split(",")[0])) as MBatch;
        if (b.state === "open") {
          want[i] = `${want[i].slice(0, -5)},-`;
        } else {
          const got = lines.find((l) => l.startsWith(`${b.id},`));
          b.hash = got ? (got.split(",").pop() as string) : null;
          if (b.hash === "-" || b.hash === null)
            same(`${ctx} batch ${b.id} sealed without a hash`, b.hash, "sha256:...");
          want[i] = `${want[i].slice(0, -5)},${b.hash}`;
        }
      }
      same(ctx, lines, want);
    };
    const fullCompare = async (step: number) => {
      const ctx = `full compare after step ${step}`;
      const membership = await s.rows<{ batch_id: number; id: number }>("events", {
        cols: ["batch_id", "id"],
        order: "id",
      });
      same(
        `${ctx}: event membership`,
        membership.map((e) => [e.id, e.batch_id]),
        [...m.eventBatch.entries()].sort((a, b) => a[0] - b[0]),
      );
      const states = await s.rows<{ id: number; state: string; attempts: number }>("batches", {
        cols: ["id", "state", "attempts"],
        order: "id",
      });
      same(
        `${ctx}: every batch`,
        states.map((x) => [x.id, x.state, x.attempts]),
        [...m.batches.values()].sort((a, b) => a.id - b.id).map((b) => [b.id, b.state, b.attempts]),
      );
      const dedup = await s.rows<{ dedup_id: string; event_id: number; dup_count: number }>("dedup", {
        cols: ["dedup_id", "event_id", "dup_count"],
        order: "dedup_id",
      });
      same(
        `${ctx}: dedup`,
        dedup.map((d) => [d.dedup_id, d.event_id, d.dup_count]),
        [...m.dedup.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([k, v]) => [k, v.event, v.dups]),
      );
    };

    for (let step = 0; step < modelSteps; step++) {
      const roll = rng.next();
      let op: string;
      if (roll < 0.34) {
        op = "enqueue";
        const primary = rng.next() < 0.6 ? "r1" : "r2";
        const routes = primary === "r1" && rng.next() < 0.15 ? ["r1", "tee"] : [primary];
        const key = pick(rng, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]) as string;
        // An event's size is its share of the document (payload and event_meta): round shares hit
        // the max_bytes boundaries exactly, odd ones fall between them.
        const size = pick(rng, [100, 150, 200, 137, 121]) as number;
        const dedupId = rng.next() < 0.25 ? `d${Math.floor(rng.next() * 30)}` : null;
        const event = {
          source: "s",
          key,
          eventType: "t",
          dedupId,
          payload: "",
          raw: null,
          headers: {},
          copies: copiesFor(routes),
          dedupWindowS: DEDUP_WINDOW,
        };
        event.payload = payloadOf(size - eventSize(event, now));
        if (eventSize(event, now) !== size)
          throw new Error(`step ${step}: a payload of share ${size} could not be made`);
        const want = m.enqueue(routes, key, size, dedupId, now);
        const [got] = await s.intake.enqueueAll([event], now);
        const gotIds =
          got.status === "queued"
            ? got.placed.flatMap((p) => [p.eventId, p.batchId])
            : got.status === "replayed"
              ? [got.eventId, got.batchId]
              : [got.eventId];
        same(`step ${step} (enqueue)`, [got.status, gotIds], [want.status, want.ids]);
        tally[`enqueue:${got.status}`] = (tally[`enqueue:${got.status}`] ?? 0) + 1;
      } else if (roll < 0.46) {
        op = "advance";
        now += Math.floor(rng.next() * 9) / 2;
      } else if (roll < 0.54) {
        op = "seal";
        same(`step ${step} (seal)`, await s.dispatch.sealReady(now), m.sealReady(now));
      } else if (roll < 0.72) {
        op = "claim";
        // up to three at once, as a tick with parallel = 3 would
        const pool = m.candidates(now);
        const picks: { b: MBatch; owner: string }[] = [];
        for (let i = 0; i < 3 && pool.length > 0; i++) {
          const id = pool.splice(Math.floor(rng.next() * pool.length), 1)[0];
          const b = m.batches.get(id) as MBatch;
          picks.push({ b, owner: m.claim(b, now) });
        }
        const claims = await claimAll(
          s,
          picks.map(({ b }) => ({
            batchId: b.id,
            route: b.route,
            key: b.key,
            destination: `http:${b.route}`,
            now,
            leaseUntil: now + 30,
            host: "h",
            pid: 1,
          })),
        );
        picks.forEach(({ b, owner }, i) => {
          const c = claims[i];
          same(`step ${step} (claim ${b.id})`, c?.owner, owner);
          owners.set(b.id, { owner, attempt: c?.attemptId as number });
          tally.claim = (tally.claim ?? 0) + 1;
        });
      } else if (roll < 0.93) {
        op = "complete";
        // up to three workers finish, as a busy tick would see
        const held = [...owners.keys()];
        const ends: (AttemptEnd & { outcome: string; applied: boolean })[] = [];
        for (let i = 0; i < 3 && held.length > 0; i++) {
          const id = held.splice(Math.floor(rng.next() * held.length), 1)[0];
          const { owner: realOwner, attempt } = owners.get(id) as { owner: string; attempt: number };
          owners.delete(id);
          const b = m.batches.get(id) as MBatch;
          const owner = rng.next() < 0.1 ? `${realOwner}-stale` : realOwner;
          const outcome = pick(rng, ["delivered", "delivered", "delivered", "retry", "retry", "dead"]) as
            | "delivered"
            | "retry"
            | "dead";
          const counted = rng.next() < 0.5;
          const next = now + Math.floor(rng.next() * 20) / 2;
          const attempts = b.attempts;
          const applied = m.finish(b, owner, outcome, counted, next);
          // The outcome the dispatcher would record for it (attempts.ts's POLICY: no backoff, no
          // breaker trip): an uncounted delivery is a probe's; a counted retry a batch failure,
          // an uncounted one a config fault (a transport failure would count toward a poison
          // run, which the model does not know); a counted death a batch failure on the last
          // attempt allowed, an uncounted one the receiver's refusal.
          const ending: Ending =
            outcome === "delivered"
              ? { kind: "delivered", counted }
              : outcome === "retry"
                ? { kind: "retry", nextAttemptAt: next, klass: counted ? "batch" : "config", status: null }
                : { kind: "dead", counted, attempts, status: null };
          ends.push({ batchId: id, attemptId: attempt, owner, now, ending, outcome, applied });
        }
        // The workers that finished together share one outcome transaction.
        const recorded = await endAll(s, ends);
        ends.forEach((e, i) => {
          const r = recorded[i];
          if (r instanceof Error) throw new Error(`step ${step} (${e.outcome} ${e.batchId}): ${r.message}`);
          same(`step ${step} (${e.outcome} ${e.batchId})`, r.applied, e.applied);
          const k = e.applied ? `mark:${e.outcome}` : "mark:discarded";
          tally[k] = (tally[k] ?? 0) + 1;
        });
      } else if (roll < 0.95) {
        op = "recover";
        const got = await s.dispatch.recoverLeases({ now, startup: false });
        same(`step ${step} (recover)`, got, m.recover(now));
        for (const id of got) owners.delete(id);
      } else if (roll < 0.98) {
        op = "replay";
        const dead = [...m.batches.values()].filter((b) => b.state === "dead");
        const b = pick(rng, dead);
        if (b) {
          m.replay(b, now);
          await s.operator.replayBatch(b.id, now);
          tally.replay = (tally.replay ?? 0) + 1;
        }
      } else {
        op = "drop";
        const b = pick(
          rng,
          [...m.batches.values()].filter((x) => x.state !== "delivered" && x.state !== "dropped"),
        );
        if (b) {
          const ok = m.drop(b);
          let refused = false;
          try {
            await s.operator.dropBatches([b.id], now);
          } catch {
            refused = true;
          }
          same(`step ${step} (drop ${b.id})`, refused, !ok);
          if (ok) owners.delete(b.id);
        }
      }
      await compare(step, op);
      if (step % 1000 === 999) await fullCompare(step);
    }
    await fullCompare(modelSteps);
    // The run exercised every path, so agreement means something.
    for (const k of [
      "enqueue:queued",
      "enqueue:duplicate",
      "enqueue:replayed",
      "claim",
      "mark:delivered",
      "mark:retry",
      "mark:dead",
      "mark:discarded",
      "replay",
    ]) {
      expect([k, (tally[k] ?? 0) > 0]).toEqual([k, true]);
    }
  }, 60_000);
}
