// A write the spool refuses (a full disk at the worst moment), in a real `hookspool run`: the
// process stays up, nothing acknowledged is lost, the refused mark's batch is delivered again
// once its lease expires, and the spool issue says what happened.
import { expect, test } from "bun:test";
import { hook, scene, statusOf, waitFor } from "./harness.ts";

test(
  "a refused mark: run stays up, the batch is delivered again after its lease, spool:write_failed opens",
  () =>
    scene("bun", async (s) => {
      const { hs, port } = await s.start(["run"], {
        hook: "mark.before_commit",
        hookAction: "fail",
        env: { HOOKSPOOL_TEST_HOOK_CODE: "SQLITE_FULL" },
      });
      expect(statusOf(await s.send(port, hook("nodedup", { topic: "m", type: "push", n: 1 })))).toBe(
        '202 {"status":"queued"}',
      );
      // The receiver got it; the mark that would record that was refused.
      await waitFor("the first delivery", () => s.receiver.got.length >= 1);
      // timeout_s 2 + lease_grace_s 5: the lease expires, the batch is recovered and sent again.
      await waitFor(
        "the batch delivered",
        () => s.count("batches WHERE key = 'm' AND state = 'delivered'") === 1,
        20_000,
      );
      expect(s.receiver.got.filter((d) => d.doc.key === "m").length).toBe(2);
      const ids = new Set(s.receiver.got.filter((d) => d.doc.key === "m").map((d) => d.webhookId));
      expect(ids.size).toBe(1); // the same webhook-id both times: the receiver can dedup it
      expect(s.count("issues WHERE fingerprint = 'spool:write_failed' AND state = 'open'")).toBe(1);
      expect(hs.proc.exitCode).toBeNull();
      // Still serving.
      expect(statusOf(await s.send(port, hook("nodedup", { topic: "after", type: "push", n: 2 })))).toBe(
        '202 {"status":"queued"}',
      );
      expect(hs.stderr()).toContain("delivery failed: the spool refused the write reason=SQLITE_FULL");
    }),
  30_000,
);

test(
  "a refused enqueue: 503 for that request only, the issue opens, the next request is queued",
  () =>
    scene("bun", async (s) => {
      const { hs, port } = await s.start(["run"], {
        hook: "enqueue.before_commit",
        hookAction: "fail",
        env: { HOOKSPOOL_TEST_HOOK_CODE: "SQLITE_FULL" },
      });
      const refused = await s.send(port, hook("demo", { topic: "a", type: "push", n: 1 }, "r-1"));
      expect(statusOf(refused)).toBe("503 ");
      expect(statusOf(await s.send(port, hook("demo", { topic: "a", type: "push", n: 2 }, "r-2")))).toBe(
        '202 {"status":"queued"}',
      );
      // The sender retries the refused one: it was never stored, so it is queued now, not a duplicate.
      expect(statusOf(await s.send(port, hook("demo", { topic: "a", type: "push", n: 1 }, "r-1")))).toBe(
        '202 {"status":"queued"}',
      );
      expect(s.count("issues WHERE fingerprint = 'spool:write_failed' AND kind = 'spool'")).toBe(1);
      expect(hs.proc.exitCode).toBeNull();
    }),
  20_000,
);
