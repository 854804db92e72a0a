// github.repo: GitHub repository webhooks, served from one [bobbins.github] table.
import { expect, test } from "bun:test";
import { builtin, expectAsCaptured, runCatalogue } from "./catalogue.ts";

test("a push is queued and delivered, the ping is acked and ignored, a bad signature is 401", async () => {
  const results = await runCatalogue(builtin("github.repo"));
  expectAsCaptured(results);
  expect(results.map((r) => [r.capture.file, r.status]).sort()).toEqual([
    ["captures/accepted.http", 202],
    ["captures/ping.http", 200],
    ["captures/rejected.http", 401],
  ]);
});

test("the compiled binary carries the bobbin and serves it the same way", async () => {
  const results = await runCatalogue(builtin("github.repo"), "binary");
  expectAsCaptured(results);
}, 120_000);
