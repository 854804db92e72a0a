// atlassian.trello: Trello webhooks, with the HEAD check Trello makes when a webhook is created.
import { expect, test } from "bun:test";
import { bobbinTest, builtin } from "./catalogue.ts";

bobbinTest(
  "atlassian.trello",
  "an action is queued and delivered, the HEAD check is answered 200, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/handshake.http": { method: "HEAD", status: 200 },
      "captures/rejected.http": 401,
    },
  },
);

test("the callback URL the signature covers is a setting the instance must give", () => {
  const b = builtin("atlassian.trello");
  expect(b.manifest.settings.callback_url).toMatchObject({ type: "string", required: true });
});
