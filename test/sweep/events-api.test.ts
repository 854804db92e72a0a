// An events-api list (src/sweep/events-api.ts) read the ways a manifest may describe it, against
// a stub on loopback: a cursor parameter fed from the page's last item or from the answer, the
// key in a header of the manifest's naming, a listing bounded by the items' own time, a next-page
// URL on another host refused (the key is never sent there), and the runaway guard.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { EventsApiSection } from "../../src/bobbin/manifest.ts";
import { createHttp } from "../../src/net/http.ts";
import { listEventsApi } from "../../src/sweep/events-api.ts";

const KEY = "kit-test-events-api-key";
const NOW = 1_787_400_000;
// Newest first, ten minutes apart.
const ITEMS = Array.from({ length: 25 }, (_, i) => ({
  id: `msg_${String(100 - i)}`,
  eventType: "thing.changed",
  timestamp: new Date((NOW - 600 * (i + 1)) * 1000).toISOString(),
  payload: { type: "thing.changed", data: { id: `thing_${i % 3}` } },
}));

let server: ReturnType<typeof Bun.serve>;
const seen: { path: string; query: URLSearchParams; key: string | null }[] = [];
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      seen.push({ path: url.pathname, query: url.searchParams, key: req.headers.get("x-api-key") });
      if (req.headers.get("x-api-key") !== KEY) return new Response("{}", { status: 401 });
      const limit = Number(url.searchParams.get("limit") ?? "10");
      const after = url.searchParams.get("iterator");
      const start = after === null ? 0 : ITEMS.findIndex((x) => x.id === after) + 1;
      const page = ITEMS.slice(start, start + limit);
      if (url.pathname === "/app/a1/msg")
        // Svix's shape: the cursor in the answer, `done` when it is the last page.
        return Response.json({
          data: page,
          iterator: page[page.length - 1]?.id ?? null,
          done: start + limit >= ITEMS.length,
        });
      if (url.pathname === "/elsewhere")
        return Response.json({ items: page, next: "http://localhost:1/elsewhere?iterator=x" });
      return Response.json({ items: page });
    },
  });
});
afterAll(() => server.stop(true));

const SPEC: EventsApiSection = {
  url: "https://api.example.com",
  path: "/app/a1/msg",
  query: { limit: "10" },
  args: {},
  auth: "header:X-Api-Key",
  items: "data",
  payload: "payload",
  id: "id",
  headers: { "webhook-id": "id" },
  since_format: "rfc3339",
  time: "timestamp",
  cursor_param: "iterator",
  cursor_value: "iterator",
  more: "!done",
  per_s: 1000,
  keeps_s: 86400,
};

const list = (spec: Partial<EventsApiSection>, since = NOW - 86400, maxPages?: number) =>
  listEventsApi({
    http: createHttp(),
    apiUrl: `http://127.0.0.1:${server.port}`,
    spec: { ...SPEC, ...spec },
    args: {},
    key: KEY,
    since,
    vendor: "Acme",
    keyHint: "an Acme key",
    now: () => NOW,
    maxPages,
  });

describe("an events-api list", () => {
  test("a cursor from the answer, the key in the manifest's header, the headers a webhook had", async () => {
    seen.length = 0;
    const r = await list({});
    expect(r.stopped).toBeNull();
    expect(r.events.map((e) => e.id)).toEqual(ITEMS.map((x) => x.id));
    expect(r.events[0]).toEqual({ id: "msg_100", payload: ITEMS[0].payload, headers: { "webhook-id": "msg_100" } });
    expect(seen.map((s) => s.query.get("iterator"))).toEqual([null, "msg_91", "msg_81"]);
    expect(seen.every((s) => s.key === KEY)).toBe(true);
  });

  test("the page's last item as the cursor; stops at the first item older than since", async () => {
    seen.length = 0;
    const r = await list(
      { path: "/plain", items: "items", cursor_value: "last:id", more: undefined },
      NOW - 600 * 12 - 1,
    );
    expect(r.events.map((e) => e.id)).toEqual(ITEMS.slice(0, 12).map((x) => x.id));
    // The second page reached past the window: no third was asked for.
    expect(seen).toHaveLength(2);
  });

  test("a next page on another host is refused: the key is not sent there", async () => {
    const spec = {
      path: "/elsewhere",
      items: "items",
      next: "next",
      more: undefined,
      cursor_param: undefined,
      cursor_value: undefined,
    };
    await expect(list(spec)).rejects.toThrow(
      "the next page is on another host (localhost:1): the key is not sent there",
    );
  });

  test("the runaway guard stops after maxPages and says so; a refused key is one line", async () => {
    const r = await list({}, NOW - 86400, 2);
    expect(r.events).toHaveLength(20);
    expect(r.stopped).toBe("more than 2 pages: run it again, or with a shorter --since");
    await expect(
      listEventsApi({
        http: createHttp(),
        apiUrl: `http://127.0.0.1:${server.port}`,
        spec: SPEC,
        args: {},
        key: "wrong",
        since: NOW - 60,
        vendor: "Acme",
        keyHint: "an Acme key",
        now: () => NOW,
      }),
    ).rejects.toThrow("Acme refused the sweep's key (http 401)");
  });
});
