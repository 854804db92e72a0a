// The shared destination suite on hermes, http and script.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HermesDestination } from "../../src/destinations/hermes.ts";
import { HttpDestination } from "../../src/destinations/http.ts";
import { ScriptDestination } from "../../src/destinations/script.ts";
import { tempDir } from "../helpers/tmp.ts";
import { type Arrival, destinationConformance, type Harness } from "./destination.case.ts";
import { closedPort, type Hit, never, SENTINEL, stub, writeScript } from "./support.ts";

const SECRET = `raw-secret-${SENTINEL}`;

function fromHits(hits: Hit[]): Arrival[] {
  return hits.map((h) => ({
    body: h.body,
    batchId: h.headers["x-hookspool-batch"],
    deliveryId: h.headers["webhook-id"],
    attempt: h.headers["x-hookspool-attempt"],
  }));
}

const echo = (status: number) => (hit: Hit) =>
  new Response(JSON.stringify(hit), { status, statusText: `echo ${SENTINEL}` });

destinationConformance("http", (): Harness => {
  const dir = tempDir();
  const secretFile = join(dir, "secret");
  writeFileSync(secretFile, SECRET, { mode: 0o600 });
  // The sentinel in the query string too: a URL with its token must never reach an outcome.
  const http = (url: string, timeoutS = 30) =>
    new HttpDestination({
      name: "audit",
      url: `${url}/in?token=${SENTINEL}`,
      secret: { file: secretFile },
      allowInsecure: true,
      timeoutS,
      instanceId: "inst1",
    });
  return {
    async accepting() {
      const s = stub(() => new Response("ok"));
      return { dest: http(s.url), received: async () => fromHits(s.hits) };
    },
    async hanging(timeoutS) {
      return http(stub(never).url, timeoutS);
    },
    async unreachable() {
      return http(`http://127.0.0.1:${closedPort()}`);
    },
    async failingEcho() {
      return http(stub(echo(500)).url);
    },
  };
});

destinationConformance("hermes", (): Harness => {
  const dir = tempDir();
  const subs = join(dir, "subscriptions.json");
  writeFileSync(subs, JSON.stringify({ ci: { secret: SECRET, prompt: "x" } }));
  const hermes = (baseUrl: string, timeoutS = 30) =>
    new HermesDestination({
      name: "hermes:ci",
      route: "ci",
      baseUrl,
      subscriptionsPath: subs,
      timeoutS,
      instanceId: "inst1",
    });
  return {
    async accepting() {
      const s = stub(() => Response.json({ status: "accepted" }, { status: 202 }));
      return { dest: hermes(s.url), received: async () => fromHits(s.hits) };
    },
    async hanging(timeoutS) {
      return hermes(stub(never).url, timeoutS);
    },
    async unreachable() {
      return hermes(`http://127.0.0.1:${closedPort()}`);
    },
    async failingEcho() {
      return hermes(stub(echo(401)).url);
    },
  };
});

destinationConformance("script", (): Harness => {
  const dir = tempDir();
  const out = join(dir, "out");
  const script = (text: string, timeoutS = 30) =>
    new ScriptDestination({
      name: "script:conf",
      argv: [writeScript(dir, `s-${Math.floor(performance.now() * 1000)}`, text)],
      env: { OUT: out, TOKEN: SENTINEL },
      timeoutS,
      parentEnv: { PATH: process.env.PATH, HOME: dir },
    });
  return {
    async accepting() {
      const dest = script(
        '#!/bin/sh\ncat > "$OUT.body"\nprintf %s "$HOOKSPOOL_BATCH_ID" > "$OUT.batch"\nprintf %s ' +
          '"$HOOKSPOOL_DELIVERY_ID" > "$OUT.delivery"\n',
      );
      return {
        dest,
        async received() {
          if (!existsSync(`${out}.body`)) return [];
          const body = readFileSync(`${out}.body`, "utf8");
          // A script sees the attempt in the document, not in its environment.
          const attempt = String((JSON.parse(body) as { attempt: number }).attempt);
          return [
            {
              body,
              batchId: readFileSync(`${out}.batch`, "utf8"),
              deliveryId: readFileSync(`${out}.delivery`, "utf8"),
              attempt,
            },
          ];
        },
      };
    },
    async hanging(timeoutS) {
      return script("#!/bin/sh\nexec sleep 30\n", timeoutS);
    },
    async unreachable() {
      return new ScriptDestination({ name: "script:gone", argv: [join(dir, "no-such-script")], parentEnv: {} });
    },
    async failingEcho() {
      return script('#!/bin/sh\ncat | tee /dev/stderr\nenv\nenv >&2\necho "$TOKEN"\nexit 3\n');
    },
  };
});
