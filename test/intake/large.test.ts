// Large bodies at a real intake, on both backends: a body above [spool] inline_max_bytes is
// kept in a file named by its hash and the row refers to it; the plugin steps read it from the
// file once and let go of the bytes, so a payload the plugin rewrote (a form, a split) takes its
// raw copy from the file, and a body with a byte-order mark is still the file byte for byte.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startIntakeOn } from "../helpers/intake-world.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const SECRET = "large-test-secret";
const sign = (body: Uint8Array | string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
const sha = (body: Uint8Array | string) => createHash("sha256").update(body).digest("hex");

const HMAC = 'scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256="';
const CONFIG = `[sources.json]
template = { ${HMAC}, key = "key", event_type = "type" }
secrets.secret = { file = "{{secret:s}}" }
max_body_bytes = 1048576
action = "http:http://127.0.0.1:9/"

[sources.form]
template = { ${HMAC}, body = "form", key = "key", event_type = "type" }
secrets.secret = { file = "{{secret:s}}" }
max_body_bytes = 1048576
action = "http:http://127.0.0.1:9/"

[sources.split]
template = { ${HMAC}, split = "events", key = "key", event_type = "type", dedup = "key" }
secrets.secret = { file = "{{secret:s}}" }
max_body_bytes = 1048576
action = "http:http://127.0.0.1:9/"
`;

interface Row {
  payload: string;
  raw: Uint8Array | null;
  body_file: string | null;
}

onBothWorlds((open) => {
  describe("a body above inline_max_bytes", () => {
    const start = () => startIntakeOn(open, CONFIG, { secrets: { s: SECRET }, spool: "inline_max_bytes = 4096" });
    const rows = async (t: Awaited<ReturnType<typeof start>>, source: string) =>
      (await t.world.rows.all(
        `SELECT payload, raw, body_file FROM events WHERE source = '${source}' ORDER BY id`,
      )) as unknown as Row[];

    test("is kept in its file and the row names it; a byte-order mark stays in the file", async () => {
      const t = await start();
      try {
        const text = JSON.stringify({ key: "k1", type: "t", pad: "x".repeat(50_000) });
        expect((await t.post("/hooks/json", text, { "X-Sig": sign(text) })).status).toBe(202);
        const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(text.replace("k1", "k2"))]);
        expect((await t.post("/hooks/json", bom, { "X-Sig": sign(bom) })).status).toBe(202);
        const [plain, marked] = await rows(t, "json");
        for (const [row, body] of [
          [plain, new TextEncoder().encode(text)],
          [marked, bom],
        ] as const) {
          expect(row.body_file).toBe(sha(body));
          expect(row.raw).toBeNull();
          expect(JSON.parse(row.payload)).toEqual({ hookspool_body: { sha256: sha(body), bytes: body.length } });
          expect(new Uint8Array(readFileSync(join(t.home, "bodies", sha(body))))).toEqual(body);
        }
      } finally {
        await t.stop();
      }
    });

    test("a form the plugin rewrote is stored inline, its raw copy read from the file", async () => {
      const t = await start();
      try {
        const form = `key=k1&type=t&pad=${"y".repeat(50_000)}`;
        expect((await t.post("/hooks/form", form, { "X-Sig": sign(form) })).status).toBe(202);
        const [row] = await rows(t, "form");
        expect(row.body_file).toBeNull();
        expect(JSON.parse(row.payload)).toMatchObject({ key: "k1", type: "t" });
        expect(new TextDecoder().decode(row.raw ?? new Uint8Array())).toBe(form);
        // The temporary file went with the request; nothing names a kept one.
        await t.stop();
        expect(existsSync(join(t.home, "bodies", sha(form)))).toBe(false);
      } finally {
        await t.stop();
      }
    });

    test("a split request keeps its raw body once, with the first event", async () => {
      const t = await start();
      try {
        const pad = "z".repeat(30_000);
        const body = JSON.stringify({
          events: [
            { key: "a", type: "t", pad },
            { key: "b", type: "t", pad },
          ],
        });
        expect((await t.post("/hooks/split", body, { "X-Sig": sign(body) })).status).toBe(202);
        const [first, second] = await rows(t, "split");
        expect([first.body_file, second.body_file]).toEqual([null, null]);
        expect(JSON.parse(first.payload)).toEqual({ key: "a", type: "t", pad });
        expect(new TextDecoder().decode(first.raw ?? new Uint8Array())).toBe(body);
        expect(second.raw?.length ?? 0).toBe(0);
      } finally {
        await t.stop();
      }
    });
  });
});
