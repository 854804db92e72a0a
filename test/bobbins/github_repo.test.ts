// github.repo: GitHub repository webhooks, served from one [bobbins.github] table; and Octokit's
// @octokit/webhooks-methods, the signing GitHub's own JavaScript SDK does: its sign() gives the
// captures' X-Hub-Signature-256 from the kit's secret, its verify() accepts them (and refuses the
// rejected one), and a push it signs is queued by a real intake.
import { sign, verify } from "@octokit/webhooks-methods";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

bobbinTest("github.repo", "a push is queued and delivered, the ping is acked and ignored, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/ping.http": 200,
    "captures/rejected.http": 401,
  },
  binary: true,
});

const bobbin = builtin("github.repo");
const SECRET = kitOf(bobbin).secrets.secret;
const capture = (file: string) => {
  const c = capturedRequest(bobbin, `captures/${file}`);
  return { ...c, signature: c.headers["X-Hub-Signature-256"] ?? "" };
};

describe("@octokit/webhooks-methods", () => {
  test("sign() of each signed capture's body under the kit's secret is its X-Hub-Signature-256", async () => {
    for (const file of ["accepted.http", "ping.http"]) {
      const { body, signature } = capture(file);
      expect(await sign(SECRET, body)).toBe(signature);
      expect(await verify(SECRET, body, signature)).toBe(true);
    }
    const rejected = capture("rejected.http");
    expect(await verify(SECRET, rejected.body, rejected.signature)).toBe(false);
  });

  describe("a push it signs, against an intake", () => {
    let t: TestIntake;
    beforeAll(async () => {
      t = await kitIntake("github.repo");
    });
    afterAll(() => t.stop());

    test("is queued under its repository and event", async () => {
      const accepted = capture("accepted.http");
      const body = accepted.body.replaceAll("octo-org/hello-world", "octo-org/sdk-signed");
      const { "X-Hub-Signature": _sha1, ...rest } = accepted.headers;
      const headers = {
        ...rest,
        "X-GitHub-Delivery": "0b6f3c1a-9d2e-4f5a-8b7c-6d5e4f3a2b1c",
        "X-Hub-Signature-256": await sign(SECRET, body),
      };
      const res = await t.post("/hooks/github", body, headers);
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      const rows = eventsByPayload(t, "b.key, e.event_type", body);
      expect(rows).toEqual([{ key: "octo-org/sdk-signed:push", event_type: "push" }]);
    });
  });
});
