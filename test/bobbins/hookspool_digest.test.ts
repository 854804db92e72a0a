// hookspool.digest: hookspool.webhook's source, and a processor that turns each batch into one
// digest with counts by event type and the key's running totals, through a real `hookspool run`.
import { createHmac } from "node:crypto";
import { expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

test("each batch becomes one digest, delivered once, with totals that add up across batches", async () => {
  const b = builtin("hookspool.digest");
  const kit = kitOf(b);
  const accepted = capturesOf(b.files()).find((c) => c.file === "captures/accepted.http");
  if (!accepted) throw new Error("no accepted capture");
  const home = tempDir("hookspool-digest-");
  const secret = join(home, "secret");
  writeFileSync(secret, kit.secrets.secret, { mode: 0o600 });
  const receiver = new Receiver<{ route: string; events: { key: string; events: number; by_type: Record<string, number>; totals: Record<string, number> }[] }>({});
  writeFileSync(
    join(home, "config.toml"),
    stringify({
      intake: { listen: "127.0.0.1:0" },
      dispatch: { poll_s: 0.05, heartbeat_s: 1 },
      bobbins: { digest: { bobbin: "hookspool.digest", secrets: { secret: { file: secret } }, settings: kit.instance.settings, outputs: { digest: "receiver" }, span: "immediate" } },
      destinations: { receiver: { type: "http", url: `http://127.0.0.1:${receiver.port}/in`, allow_insecure: true, unsigned: true, timeout_s: 5 } },
    }),
  );
  const env = { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String((kit.now ?? 0) - Date.now() / 1000) };
  const hs = await startHookspool(home, ["run"], { env });
  try {
    const port = await hs.port();
    const send = async (body: Uint8Array, headers: [string, string][]) =>
      fetch(`http://127.0.0.1:${port}/hooks/digest`, { method: "POST", body, headers: headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())) });
    expect((await send(accepted.request.body, accepted.request.headers)).status).toBe(202);
    await waitFor("the first digest", () => receiver.accepted().length === 1);
    // A second delivery about the same ticket, signed as the sender would.
    const body = new TextEncoder().encode(JSON.stringify({ topic: "tickets/4711", type: "ticket.closed", id: "evt_02" }));
    const sig = `sha256=${createHmac("sha256", kit.secrets.secret).update(body).digest("hex")}`;
    expect((await send(body, [["Content-Type", "application/json"], ["X-Signature", sig], ["X-Delivery", "evt-02"]])).status).toBe(202);
    await waitFor("the second digest", () => receiver.accepted().length === 2);
  } finally {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
  }
  const digests = receiver.accepted().map((d) => d.doc);
  expect(digests.map((d) => d.route)).toEqual(["digest-digest", "digest-digest"]);
  expect(digests.map((d) => d.events.map((e) => [e.key, e.events, e.by_type, e.totals]))).toEqual([
    [["tickets/4711", 1, { "ticket.updated": 1 }, { "ticket.updated": 1 }]],
    [["tickets/4711", 1, { "ticket.closed": 1 }, { "ticket.updated": 1, "ticket.closed": 1 }]],
  ]);
  expect(hs.stderr()).not.toContain(kit.secrets.secret);
});
