// github.repo: GitHub repository webhooks, served from one [bobbins.github] table.
import { bobbinTest } from "./catalogue.ts";

bobbinTest("github.repo", "a push is queued and delivered, the ping is acked and ignored, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/ping.http": 200,
    "captures/rejected.http": 401,
  },
  binary: true,
});
