// kaneo.projects: Kaneo's generic webhooks (X-Kaneo-Signature, hex HMAC-SHA256 of the body).
import { bobbinTest } from "./catalogue.ts";

bobbinTest("kaneo.projects", "a task event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": 401,
  },
});
