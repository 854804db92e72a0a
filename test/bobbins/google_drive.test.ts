// google.drive: a Drive changes.watch channel (core's Google channel source: the channel token,
// sync ignored, the message number as dedup id) and a processor that asks changes.list what
// changed, through a real `hookspool run` whose Google (token endpoint, changes.getStartPageToken,
// changes.list over two pages) is a stub on 127.0.0.1: the instances' api_base_url and the
// credential's token_uri point at it.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { DRIVE_CHANGE_FIELDS, type DriveChange } from "../../src/providers/google.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { baseOf, itemsOf, mimeTypesOf } from "../../bobbins/google/drive/processor.ts";
import { type Hookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("google.drive");
const kit = kitOf(bobbin);
const TOKEN = kit.secrets.channel_token;
const ACCESS = "kit-test-access-drive";
const DOC = "application/vnd.google-apps.document";
const PDF = "application/pdf";

const file = (name: string, mimeType: string, modifiedTime: string, extra: Record<string, unknown> = {}) => ({
  name,
  mimeType,
  modifiedTime,
  trashed: false,
  webViewLink: `https://docs.google.com/kit-test/${encodeURIComponent(name)}`,
  ...extra,
});

/** changes.list as the stub answers it: from 1001 two pages, ending at 1004; from 1004 nothing new. */
const PAGES: Record<string, Record<string, unknown>> = {
  "1001": {
    nextPageToken: "1002",
    changes: [
      {
        kind: "drive#change",
        changeType: "file",
        fileId: "kitTestDoc01",
        removed: false,
        time: "2026-09-16T08:00:01.000Z",
        file: file("Quarterly plan", DOC, "2026-09-16T08:00:00.000Z"),
      },
      {
        kind: "drive#change",
        changeType: "file",
        fileId: "kitTestPdf01",
        removed: false,
        time: "2026-09-16T08:00:02.000Z",
        file: file("Invoice 1042.pdf", PDF, "2026-09-16T08:00:02.000Z"),
      },
    ],
  },
  "1002": {
    newStartPageToken: "1004",
    changes: [
      {
        kind: "drive#change",
        changeType: "file",
        fileId: "kitTestGone01",
        removed: true,
        time: "2026-09-16T08:01:00.000Z",
      },
      {
        kind: "drive#change",
        changeType: "file",
        fileId: "kitTestPdf02",
        removed: false,
        time: "2026-09-16T08:01:30.000Z",
        file: file("Old draft.pdf", PDF, "2026-09-10T10:00:00.000Z", { trashed: true }),
      },
      // A shared drive's own change names no file: core skips it.
      {
        kind: "drive#change",
        changeType: "drive",
        driveId: "kitTestSharedDrive",
        removed: false,
        time: "2026-09-16T08:01:40.000Z",
      },
      // The doc again, edited later in the same round: one item, its latest state.
      {
        kind: "drive#change",
        changeType: "file",
        fileId: "kitTestDoc01",
        removed: false,
        time: "2026-09-16T08:02:00.000Z",
        file: file("Quarterly plan v2", DOC, "2026-09-16T08:02:00.000Z"),
      },
    ],
  },
  "1004": { newStartPageToken: "1004", changes: [] },
};

interface Asked {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | null;
  form?: Record<string, string>;
}

function stubGoogle() {
  const asked: Asked[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      const a: Asked = {
        method: req.method,
        path: u.pathname,
        query: Object.fromEntries(u.searchParams),
        authorization: req.headers.get("authorization"),
      };
      if (req.method === "POST" && u.pathname === "/token") {
        a.form = Object.fromEntries(new URLSearchParams(await req.text()));
        asked.push(a);
        return Response.json({ access_token: ACCESS, expires_in: 3600, token_type: "Bearer" });
      }
      asked.push(a);
      if (a.authorization !== `Bearer ${ACCESS}`)
        return Response.json({ error: { code: 401, message: "Invalid Credentials" } }, { status: 401 });
      if (req.method === "GET" && u.pathname === "/drive/v3/changes/startPageToken")
        return Response.json({ kind: "drive#startPageToken", startPageToken: "1001" });
      if (req.method === "GET" && u.pathname === "/drive/v3/changes") {
        const page = PAGES[u.searchParams.get("pageToken") ?? ""];
        if (!page) return Response.json({ error: { code: 400, message: "Invalid Value" } }, { status: 400 });
        return Response.json({ kind: "drive#changeList", ...page });
      }
      return Response.json({ error: { code: 404, message: "Not Found" } }, { status: 404 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, asked, stop: () => server.stop(true) };
}

type Doc = { route: string; key: string; events: Record<string, unknown>[] };

// A home of its own, not the shared run (catalogue.ts): the instances' api_base_url and the
// credential's token_uri name this file's stub Google, so the home is written after it listens.
describe("hookspool run with a stub Google", () => {
  let google: ReturnType<typeof stubGoogle>;
  let receiver: Receiver<Doc>;
  let hs: Hookspool;
  let home: string;
  let port = 0;
  // Two instances on the one stub: every type, and Google Docs only.
  const INSTANCES = { drive: [], docs: [DOC] } as const;

  beforeAll(async () => {
    google = stubGoogle();
    receiver = new Receiver<Doc>({});
    home = tempDir("hookspool-drive-");
    const tokenFile = join(home, "secret-channel_token");
    const credentialFile = join(home, "secret-credential");
    writeFileSync(tokenFile, TOKEN, { mode: 0o600 });
    // The kit's credential, its token_uri on the stub.
    const credential = {
      ...(JSON.parse(kit.secrets.credential) as Record<string, string>),
      token_uri: `${google.url}/token`,
    };
    writeFileSync(credentialFile, JSON.stringify(credential), { mode: 0o600 });
    const bobbins = Object.fromEntries(
      Object.entries(INSTANCES).map(([name, types]) => [
        name,
        {
          bobbin: "google.drive",
          secrets: { channel_token: { file: tokenFile }, credential: { file: credentialFile } },
          settings: { api_base_url: `${google.url}/drive/v3/`, mime_types: [...types] },
          outputs: { changed: "receiver", removed: "receiver" },
          span: "immediate",
        },
      ]),
    );
    writeFileSync(
      join(home, "config.toml"),
      stringify({
        intake: { listen: "127.0.0.1:0" },
        dispatch: { poll_s: 0.05, heartbeat_s: 1 },
        bobbins,
        destinations: {
          receiver: {
            type: "http",
            url: `http://127.0.0.1:${receiver.port}/in`,
            allow_insecure: true,
            unsigned: true,
            timeout_s: 5,
          },
        },
      }),
    );
    hs = await startHookspool(home, ["run"]);
    port = await hs.port();
  });

  afterAll(async () => {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
    google.stop();
  });

  /** A changes.watch notification as Drive sends it, on the channel `channel`. */
  const notify = (instance: string, channel: string, n: number, o: { state?: string; token?: string } = {}) =>
    fetch(`http://127.0.0.1:${port}/hooks/${instance}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json; utf-8",
        "X-Goog-Channel-ID": channel,
        "X-Goog-Channel-Token": o.token ?? TOKEN,
        "X-Goog-Channel-Expiration": "Fri, 08 Jan 2027 12:00:00 GMT",
        "X-Goog-Resource-ID": "kitTestResource0Drive0001",
        "X-Goog-Resource-URI": "https://www.googleapis.com/drive/v3/changes?alt=json&pageToken=1001",
        "X-Goog-Resource-State": o.state ?? "change",
        "X-Goog-Message-Number": String(n),
      },
      body: o.state === "sync" ? "" : '{"kind": "drive#changes"}',
    });

  const answer = async (r: Response) => [r.status, await r.text()];
  const batches = (source: string) => {
    const db = openSpool(join(home, "spool.db"));
    try {
      return db.db.query("SELECT id, state FROM batches WHERE source = ? ORDER BY id").all(source) as {
        id: number;
        state: string;
      }[];
    } finally {
      db.close();
    }
  };
  const allDelivered = (source: string, n: number) => {
    const b = batches(source);
    return b.length === n && b.every((x) => x.state === "delivered");
  };
  const pageToken = (instance: string) =>
    (JSON.parse(readFileSync(join(home, "bobbins", instance, "state", "pageToken.json"), "utf8")) as { value: unknown })
      .value;
  const delivered = (route: string) =>
    receiver
      .accepted()
      .filter((d) => d.doc.route === route)
      .flatMap((d) => d.doc.events);
  const drive = (path: string, pageToken?: string) =>
    google.asked.filter(
      (a) => a.path === `/drive/v3/${path}` && (pageToken === undefined || a.query.pageToken === pageToken),
    );

  test(
    "the sync message is 200 ignored, a wrong channel token 401 with an empty body: nothing " +
      "stored, Google not asked",
    async () => {
      expect(await answer(await notify("drive", "kit-chan-1", 1, { state: "sync" }))).toEqual([
        200,
        '{"status":"ignored"}',
      ]);
      expect(await answer(await notify("drive", "kit-chan-1", 2, { token: "kit-test-wrong-token" }))).toEqual([
        401,
        "",
      ]);
      expect(batches("drive")).toEqual([]);
      expect(google.asked).toEqual([]);
    },
  );

  test("the first notification records the start page token and delivers nothing", async () => {
    for (const i of Object.keys(INSTANCES))
      expect(await answer(await notify(i, `kit-chan-${i}`, 10))).toEqual([202, '{"status":"queued"}']);
    await waitFor("the first batches processed", () => allDelivered("drive", 1) && allDelivered("docs", 1));
    for (const i of Object.keys(INSTANCES)) expect(pageToken(i)).toBe("1001");
    expect(drive("changes/startPageToken").length).toBe(2);
    expect(drive("changes")).toEqual([]);
    expect(receiver.accepted()).toEqual([]);
    // One refresh per instance, with the credential's client and refresh token, as a form.
    const refreshes = google.asked.filter((a) => a.path === "/token").map((a) => a.form);
    expect(refreshes).toEqual(
      [0, 1].map(() => ({
        grant_type: "refresh_token",
        client_id: "kit-test-client",
        client_secret: "kit-test-secret",
        refresh_token: "kit-test-refresh",
      })),
    );
  });

  test(
    "the next notification delivers each changed and removed file, over two pages, and saves the " + "new token",
    async () => {
      expect(await answer(await notify("drive", "kit-chan-drive", 11))).toEqual([202, '{"status":"queued"}']);
      // The same notification again (Google's retry): a duplicate, no second batch.
      expect(await answer(await notify("drive", "kit-chan-drive", 11))).toEqual([200, '{"status":"duplicate"}']);
      await waitFor("the second batch processed", () => allDelivered("drive", 1 + 1 + 4));
      expect(pageToken("drive")).toBe("1004");
      // Both pages, with the metadata-only fields mask, removals included, the Bearer token.
      expect(
        drive("changes").map((a) => [a.query.pageToken, a.query.fields, a.query.includeRemoved, a.authorization]),
      ).toEqual([
        ["1001", DRIVE_CHANGE_FIELDS, "true", `Bearer ${ACCESS}`],
        ["1002", DRIVE_CHANGE_FIELDS, "true", `Bearer ${ACCESS}`],
      ]);
      expect(delivered("drive-changed").sort((a, b) => String(a.fileId).localeCompare(String(b.fileId)))).toEqual([
        {
          key: "kitTestDoc01",
          fileId: "kitTestDoc01",
          name: "Quarterly plan v2",
          mimeType: DOC,
          modifiedTime: "2026-09-16T08:02:00.000Z",
          webViewLink: "https://docs.google.com/kit-test/Quarterly%20plan%20v2",
        },
        {
          key: "kitTestPdf01",
          fileId: "kitTestPdf01",
          name: "Invoice 1042.pdf",
          mimeType: PDF,
          modifiedTime: "2026-09-16T08:00:02.000Z",
          webViewLink: "https://docs.google.com/kit-test/Invoice%201042.pdf",
        },
      ]);
      expect(delivered("drive-removed").sort((a, b) => String(a.fileId).localeCompare(String(b.fileId)))).toEqual([
        { key: "kitTestGone01", fileId: "kitTestGone01", reason: "removed" },
        {
          key: "kitTestPdf02",
          fileId: "kitTestPdf02",
          reason: "trashed",
          name: "Old draft.pdf",
          mimeType: PDF,
          modifiedTime: "2026-09-10T10:00:00.000Z",
        },
      ]);
      // Each item a batch of its own, keyed by its file.
      expect(
        receiver
          .accepted()
          .map((d) => d.doc.key)
          .sort(),
      ).toEqual(["kitTestDoc01", "kitTestGone01", "kitTestPdf01", "kitTestPdf02"]);
    },
  );

  test("mime_types keeps only those types; a removal, which names no type, is kept", async () => {
    expect(await answer(await notify("docs", "kit-chan-docs", 11))).toEqual([202, '{"status":"queued"}']);
    await waitFor("the docs batch processed", () => allDelivered("docs", 1 + 1 + 2));
    expect(pageToken("docs")).toBe("1004");
    expect(delivered("docs-changed").map((e) => [e.fileId, e.name])).toEqual([["kitTestDoc01", "Quarterly plan v2"]]);
    expect(delivered("docs-removed").map((e) => [e.fileId, e.reason])).toEqual([["kitTestGone01", "removed"]]);
  });

  test(
    "a later notification asks from the saved token; nothing new, nothing delivered; no secret in " + "the log",
    async () => {
      const before = receiver.accepted().length;
      expect(await answer(await notify("drive", "kit-chan-drive", 12))).toEqual([202, '{"status":"queued"}']);
      await waitFor("the third batch processed", () => allDelivered("drive", 1 + 1 + 4 + 1));
      expect(drive("changes", "1004").length).toBe(1);
      expect(pageToken("drive")).toBe("1004");
      expect(receiver.accepted().length).toBe(before);
      expect(receiver.unverified).toEqual([]);
      // The access token was kept between batches: refreshed once per instance only.
      expect(google.asked.filter((a) => a.path === "/token").length).toBe(2);
      for (const secret of [TOKEN, "kit-test-secret", "kit-test-refresh", ACCESS])
        expect(hs.stderr()).not.toContain(secret);
    },
  );
});

describe("the processor's rules", () => {
  const change = (fileId: string, c: Partial<DriveChange> = {}): DriveChange => ({ fileId, removed: false, ...c });

  test("one item per file, its latest change; removed or trashed is `removed`, else `changed`", () => {
    const items = itemsOf(
      [
        change("a", { name: "A", mimeType: DOC }),
        change("b", { removed: true }),
        change("c", { name: "C", mimeType: PDF, trashed: true }),
        change("a", { name: "A2", mimeType: DOC, modifiedTime: "t2" }),
        change("d", {}),
      ],
      new Set(),
    );
    expect(items).toEqual([
      { event_type: "removed", key: "b", fileId: "b", reason: "removed" },
      { event_type: "removed", key: "c", fileId: "c", reason: "trashed", name: "C", mimeType: PDF, modifiedTime: null },
      {
        event_type: "changed",
        key: "a",
        fileId: "a",
        name: "A2",
        mimeType: DOC,
        modifiedTime: "t2",
        webViewLink: null,
      },
      {
        event_type: "changed",
        key: "d",
        fileId: "d",
        name: null,
        mimeType: null,
        modifiedTime: null,
        webViewLink: null,
      },
    ]);
    // Never anything but metadata: no field beyond those named.
    for (const i of items)
      for (const k of Object.keys(i))
        expect(["event_type", "key", "fileId", "reason", "name", "mimeType", "modifiedTime", "webViewLink"]).toContain(
          k,
        );
  });

  test("mime_types: exact types kept; a change without a type is dropped, a removal kept", () => {
    const keep = mimeTypesOf([" application/pdf ", 7, "", "application/pdf"]);
    expect([...keep]).toEqual([PDF]);
    const items = itemsOf(
      [
        change("a", { mimeType: DOC }),
        change("b", { mimeType: PDF }),
        change("c"),
        change("d", { removed: true }),
        change("e", { mimeType: DOC, trashed: true }),
      ],
      keep,
    );
    expect(items.map((i) => [i.event_type, i.fileId])).toEqual([
      ["changed", "b"],
      ["removed", "d"],
    ]);
    expect(mimeTypesOf(undefined).size).toBe(0);
  });

  test("api_base_url: empty is Google's own; https, or http on 127.0.0.1 or localhost only", () => {
    expect(baseOf("")).toBeUndefined();
    expect(baseOf(undefined)).toBeUndefined();
    expect(baseOf("https://drive-proxy.example.com/drive/v3/")).toBe("https://drive-proxy.example.com/drive/v3");
    expect(baseOf("http://127.0.0.1:8080/drive/v3")).toBe("http://127.0.0.1:8080/drive/v3");
    expect(baseOf("http://localhost:8080")).toBe("http://localhost:8080");
    for (const bad of [
      "http://drive.example.com",
      "http://10.0.0.5/drive/v3",
      "ftp://127.0.0.1/",
      "www.googleapis.com/drive/v3",
      "https://user:pw@www.googleapis.com/drive/v3",
      "https://www.googleapis.com/drive/v3?key=x",
      42,
    ])
      expect(baseOf(bad)).toBeNull();
  });

  test("the captures are what the kit serves: sync ignored, a wrong token 401, no channel id quarantined", () => {
    const expects = Object.fromEntries(
      capturesOf(bobbin.files()).map((c) => [c.file, [c.expect.status, c.expect.word ?? null]]),
    );
    expect(expects).toEqual({
      "captures/accepted.http": [202, "queued"],
      "captures/rejected.http": [401, null],
      "captures/sync.http": [200, "ignored"],
      "captures/unclassifiable.http": [202, "quarantined"],
    });
  });
});

describe("an api_base_url the processor refuses", () => {
  let google: ReturnType<typeof stubGoogle>;
  beforeAll(() => {
    google = stubGoogle();
  });
  afterAll(() => google.stop());

  test("plain http to another host ends the batch for good, and asks nothing", async () => {
    // A home of its own: its one instance has the refused setting, which no kit carries.
    const home = tempDir("hookspool-drive-bad-");
    writeFileSync(join(home, "t"), TOKEN, { mode: 0o600 });
    writeFileSync(
      join(home, "c"),
      JSON.stringify({
        ...(JSON.parse(kit.secrets.credential) as Record<string, string>),
        token_uri: `${google.url}/token`,
      }),
      { mode: 0o600 },
    );
    writeFileSync(
      join(home, "config.toml"),
      stringify({
        intake: { listen: "127.0.0.1:0" },
        dispatch: { poll_s: 0.05, heartbeat_s: 1 },
        bobbins: {
          bad: {
            bobbin: "google.drive",
            secrets: { channel_token: { file: join(home, "t") }, credential: { file: join(home, "c") } },
            settings: { api_base_url: "http://drive.example.com/drive/v3" },
            outputs: { changed: "r", removed: "r" },
            span: "immediate",
          },
        },
        destinations: { r: { type: "http", url: "http://127.0.0.1:9/in", allow_insecure: true, unsigned: true } },
      }),
    );
    const hs = await startHookspool(home, ["run"]);
    try {
      const port = await hs.port();
      const r = await fetch(`http://127.0.0.1:${port}/hooks/bad`, {
        method: "POST",
        headers: {
          "X-Goog-Channel-ID": "kit-chan-bad",
          "X-Goog-Channel-Token": TOKEN,
          "X-Goog-Resource-State": "change",
          "X-Goog-Message-Number": "5",
        },
        body: "",
      });
      expect(r.status).toBe(202);
      const state = () => {
        const db = openSpool(join(home, "spool.db"));
        try {
          return db.db.query("SELECT state, last_error FROM batches WHERE source = 'bad'").get() as {
            state: string;
            last_error: string | null;
          } | null;
        } finally {
          db.close();
        }
      };
      const dead = await waitFor("the batch dead", () => (state()?.state === "dead" ? state() : null));
      expect(dead?.last_error ?? "").toContain("api_base_url must be https");
      expect(google.asked).toEqual([]);
    } finally {
      hs.kill("SIGTERM");
      await hs.exited;
    }
  });
});
