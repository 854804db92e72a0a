// hookspool prune and the body files of the events it deletes, on SQLite and on a real PostgreSQL
// server (skipped, saying so, without one): a dropped event's file goes with it and is counted
// (body_files, body_bytes), a waiting event's file stays, a file younger than the grace stays.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BODY_GRACE_S, type BodyFile, BodySink, bodiesDir, bodyPath, bodyReference } from "../../src/bodies.ts";
import { systemClock } from "../../src/clock.ts";
import { type OpenBackend, onBothBackends } from "../helpers/backends.ts";
import { cli } from "../helpers/cli.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

/** A body kept in `dir` as the intake keeps one (streamed, fsync'd, renamed to its hash), `ageS` old. */
async function keptBody(dir: string, text: string, ageS: number): Promise<BodyFile> {
  const sink = await BodySink.open(dir, crypto.randomUUID());
  await sink.write(new TextEncoder().encode(text));
  const file = await sink.finish();
  await sink.keep(file);
  const at = systemClock.now() - ageS;
  utimesSync(bodyPath(dir, file.sha256), at, at);
  return file;
}

async function pruneCase(open: OpenBackend, backend: string): Promise<void> {
  const home = tempDir();
  const env: Record<string, string> = {};
  const b = await open({ dir: home });
  try {
    const spool = backend === "postgres" ? '[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n\n' : "";
    if (b.pgUrl) env.HOOKSPOOL_PG_URL = b.pgUrl;
    writeFileSync(join(home, "config.toml"), `${spool}[sources.s]\naction = "hermes:a"\n`);
    const dir = bodiesDir(home);
    const old = 2 * BODY_GRACE_S;
    const dropped = await keptBody(dir, `{"dropped":"${"d".repeat(300_000)}"}`, old);
    const waiting = await keptBody(dir, `{"waiting":"${"w".repeat(310_000)}"}`, old);
    // Named by no event, but written a moment ago: an intake may be about to commit it.
    const young = await keptBody(dir, `{"young":"${"y".repeat(320_000)}"}`, 0);
    const one = { max_events: 1 };
    const [first] = await b.intake.enqueueAll(
      [ev({ key: "k0", payload: bodyReference(dropped), body: dropped, copies: [copy("r", "hermes:a", one)] })],
      T0,
    );
    await b.intake.enqueueAll(
      [ev({ key: "k1", payload: bodyReference(waiting), body: waiting, copies: [copy("r", "hermes:a", one)] })],
      T0,
    );
    if (first.status !== "queued") throw new Error(first.status);
    await b.operator.dropBatches([first.placed[0].batchId], T0);

    const r = await cli(["--home", home, "--json", "prune"], { env });
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      batches: 1,
      events: 1,
      attempts: 0,
      dedup: 0,
      issues: 0,
      body_files: 1,
      body_bytes: dropped.bytes,
    });
    expect(existsSync(bodyPath(dir, dropped.sha256)), "the dropped event's body file").toBe(false);
    expect(existsSync(bodyPath(dir, waiting.sha256)), "the waiting event's body file").toBe(true);
    expect(existsSync(bodyPath(dir, young.sha256)), "a file younger than the grace").toBe(true);

    // Past the grace, the file no event names goes too, and the words say so.
    const past = systemClock.now() - old;
    utimesSync(bodyPath(dir, young.sha256), past, past);
    const again = await cli(["--home", home, "prune"], { env });
    expect(again.code).toBe(0);
    expect(again.out.trim()).toBe(
      "deleted 0 batches (0 events), 0 attempts, 0 dedup rows, 0 issues, 1 body file (313 KiB)",
    );
    expect(existsSync(bodyPath(dir, young.sha256))).toBe(false);
    expect(existsSync(bodyPath(dir, waiting.sha256))).toBe(true);
  } finally {
    await b.close();
  }
}

describe("prune deletes the body files of the events it deletes", () => {
  onBothBackends((open, backend) => {
    test("a dropped event's file goes and is counted; a waiting event's and a young one stay", () =>
      pruneCase(open, backend));
  });
});
