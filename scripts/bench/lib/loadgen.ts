// The load generator of the intake benchmarks, run as its own process so it never shares the
// server's event loop: `bun loadgen.ts <spec.json>`. It keeps `concurrency` requests in flight
// over keep-alive connections (Bun's fetch pools them), fills and signs each body, and prints
// one JSON line: requests, 2xx, failures, seconds, req/s and latency p50/p99/max.
import { createHmac, randomUUID } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import type { LoadResult, LoadSpec } from "./load.ts";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8")) as LoadSpec;
const keys = spec.keys ?? 1;
const run = (spec.run ?? 0).toString(16).padStart(8, "0");

function request(i: number): { body: string; headers: Record<string, string> } {
  const body = spec.body
    .replaceAll("{{SEQ}}", `${run}${i.toString(16).padStart(32, "0")}`)
    .replaceAll("{{KEY}}", String(i % keys))
    .replaceAll("{{TS}}", String(Date.now() / 1000));
  const headers: Record<string, string> = { "Content-Type": "application/json", ...spec.headers };
  if (spec.deliveryHeader) headers[spec.deliveryHeader] = randomUUID();
  if (spec.sign)
    headers[spec.sign.header] = spec.sign.prefix + createHmac("sha256", spec.sign.secret).update(body).digest("hex");
  return { body, headers };
}

const statuses: Record<string, number> = {};
const acked: string[] = [];
const warmupFailed: Record<string, number> = {};
const lat: number[] = [];
let failed = 0;

async function one(i: number, measured: boolean): Promise<void> {
  const { body, headers } = request(i);
  const t = performance.now();
  let status = "error";
  try {
    const res = await fetch(spec.url, {
      method: "POST",
      body,
      headers,
      keepalive: true,
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer();
    status = String(res.status);
    if (spec.ackedFile && spec.deliveryHeader && status.startsWith("2")) acked.push(headers[spec.deliveryHeader]);
  } catch {
    // counted as "error"
  }
  if (!measured) {
    if (!status.startsWith("2")) warmupFailed[status] = (warmupFailed[status] ?? 0) + 1;
    return;
  }
  lat.push(performance.now() - t);
  statuses[status] = (statuses[status] ?? 0) + 1;
  if (!status.startsWith("2")) failed++;
}

async function phase(
  from: number,
  count: number,
  measured: boolean,
  maxMs: number,
): Promise<{ sent: number; ms: number }> {
  let next = from;
  const end = from + count;
  const t0 = performance.now();
  const lane = async () => {
    for (;;) {
      if (next >= end || performance.now() - t0 > maxMs) return;
      const i = next++;
      if (spec.rate && measured) {
        const wait = t0 + ((i - from) * 1000) / spec.rate - performance.now();
        if (wait > 0) await Bun.sleep(wait);
      }
      await one(i, measured);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, spec.concurrency) }, lane));
  return { sent: next - from, ms: performance.now() - t0 };
}

const warm = spec.warmup ?? 0;
if (warm > 0) await phase(0, warm, false, 30_000);
const { sent, ms } = await phase(warm, spec.n, true, spec.maxSeconds * 1000);
lat.sort((a, b) => a - b);
const pct = (p: number) =>
  lat.length ? lat[Math.min(lat.length - 1, Math.max(0, Math.ceil(lat.length * p) - 1))] : Number.NaN;
const out: LoadResult = {
  sent,
  ok: sent - failed,
  failed,
  statuses,
  seconds: ms / 1000,
  rps: sent / (ms / 1000),
  p50_ms: pct(0.5),
  p99_ms: pct(0.99),
  max_ms: lat[lat.length - 1] ?? Number.NaN,
};
if (spec.keepLatencies) out.lat_ms = lat.map((x) => +x.toFixed(3));
if (Object.keys(warmupFailed).length) out.warmup_failed = warmupFailed;
if (spec.ackedFile && acked.length) appendFileSync(spec.ackedFile, `${acked.join("\n")}\n`);
console.log(JSON.stringify(out));
