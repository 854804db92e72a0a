// kaneo.projects: Kaneo's generic webhooks (X-Kaneo-Signature, hex HMAC-SHA256 of the body).
import { expect, test } from "bun:test";
import { builtin, expectAsCaptured, runCatalogue } from "./catalogue.ts";

test("a task event is queued and delivered, a bad signature is 401", async () => {
  const results = await runCatalogue(builtin("kaneo.projects"));
  expectAsCaptured(results);
  expect(results.map((r) => [r.capture.file, r.status]).sort()).toEqual([
    ["captures/accepted.http", 202],
    ["captures/rejected.http", 401],
  ]);
});
