// `hookspool outcome`'s refusals, each one line and exit 2 before the spool is touched, with
// what a person typed escaped; an id no delivery has is exit 1. The settling itself is in
// test/dispatch/awaiting.test.ts (both backends) and test/e2e/outcomes.test.ts (real processes).
import { expect, test } from "bun:test";
import { cli } from "../helpers/cli.ts";
import { initHome, oneErrorLine } from "./home.ts";

test("a bad id, a bad outcome word (escaped), --permanent with ok: usage errors; an unknown id: exit 1", async () => {
  const h = await initHome();
  const run = (...argv: string[]) => cli(["--home", h.home, "outcome", ...argv]);
  const badId = await run("msg_123", "ok");
  expect(badId.code).toBe(2);
  expect(oneErrorLine(badId.err)).toContain("hookspool delivery id");
  const badWord = await run("hs_abc_1", "bad\u001b[31mred");
  expect(badWord.code).toBe(2);
  expect(badWord.err).not.toContain("\u001b");
  expect(oneErrorLine(badWord.err)).toContain("the outcome must be ok or failed");
  expect((await run("hs_abc_1", "ok", "--permanent")).code).toBe(2);
  const unknown = await run("hs_abc_1", "ok");
  expect(unknown.code).toBe(1);
  expect(oneErrorLine(unknown.err)).toBe(
    "hookspool: no delivery has the webhook-id hs_abc_1 (hookspool show <batch> --attempts lists a batch's deliveries)",
  );
  const help = await run("--help");
  expect(help.code).toBe(0);
  expect(help.out).toContain("--permanent");
});
