// atlassian.trello: Trello webhooks, with the HEAD check Trello makes when a webhook is created.
import { expect, test } from "bun:test";
import { builtin, expectAsCaptured, runCatalogue } from "./catalogue.ts";

test("an action is queued and delivered, the HEAD check is answered 200, a bad signature is 401", async () => {
  const results = await runCatalogue(builtin("atlassian.trello"));
  expectAsCaptured(results);
  expect(results.map((r) => [r.capture.file, r.capture.request.method, r.status]).sort()).toEqual([
    ["captures/accepted.http", "POST", 202],
    ["captures/handshake.http", "HEAD", 200],
    ["captures/rejected.http", "POST", 401],
  ]);
});

test("the callback URL the signature covers is a setting the instance must give", () => {
  const b = builtin("atlassian.trello");
  expect(b.manifest.settings.callback_url).toMatchObject({ type: "string", required: true });
});
