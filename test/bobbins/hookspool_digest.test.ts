// hookspool.digest: hookspool.webhook's source, and a processor that turns each batch into one
// digest with counts by event type and the key's running totals, through the shared `hookspool
// run` (its kit's instance and state are this file's alone: no other file posts to it).
import { createHmac } from "node:crypto";
import { expect, setDefaultTimeout, test } from "bun:test";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, kitOf, sharedRun } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

type Digest = {
  route: string;
  events: { key: string; events: number; by_type: Record<string, number>; totals: Record<string, number> }[];
};

test("each batch becomes one digest, delivered once, with totals that add up across batches", async () => {
  const b = builtin("hookspool.digest");
  const kit = kitOf(b);
  const accepted = capturesOf(b.files()).find((c) => c.file === "captures/accepted.http");
  if (!accepted) throw new Error("no accepted capture");
  const run = await sharedRun(b);
  const digests = async () => (await run.deliveries<Digest>(b)).accepted;
  const send = async (body: Uint8Array, headers: [string, string][]) =>
    fetch(`http://127.0.0.1:${run.port}/hooks/${kit.instance.name}`, {
      method: "POST",
      body,
      headers: headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())),
    });
  expect((await send(accepted.request.body, accepted.request.headers)).status).toBe(202);
  await waitFor("the first digest", async () => (await digests()).length === 1);
  // A second delivery about the same ticket, signed as the sender would.
  const body = new TextEncoder().encode(JSON.stringify({ topic: "tickets/4711", type: "ticket.closed", id: "evt_02" }));
  const sig = `sha256=${createHmac("sha256", kit.secrets.secret).update(body).digest("hex")}`;
  expect(
    (
      await send(body, [
        ["Content-Type", "application/json"],
        ["X-Signature", sig],
        ["X-Delivery", "evt-02"],
      ])
    ).status,
  ).toBe(202);
  await waitFor("the second digest", async () => (await digests()).length === 2);
  const got = await run.deliveries<Digest>(b);
  const docs = got.accepted.map((d) => d.doc);
  expect(docs.map((d) => d.route)).toEqual(["digest-digest", "digest-digest"]);
  expect(docs.map((d) => d.events.map((e) => [e.key, e.events, e.by_type, e.totals]))).toEqual([
    [["tickets/4711", 1, { "ticket.updated": 1 }, { "ticket.updated": 1 }]],
    [["tickets/4711", 1, { "ticket.closed": 1 }, { "ticket.updated": 1, "ticket.closed": 1 }]],
  ]);
  expect(got.unverified).toEqual([]);
  expect(await run.stderr()).not.toContain(kit.secrets.secret);
});
