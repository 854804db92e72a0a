// The Service contract, run against every long-lived part: start() and stop() are idempotent,
// stop() is safe before start(), and a started part really runs (the caller says how to see it).
import { expect, test } from "bun:test";
import type { Service } from "../src/service.ts";

export interface ServiceUnderTest {
  service: Service;
  /** Whether the part is doing its work now (listening, ticking); polled after start(). */
  running(): boolean | Promise<boolean>;
  /** Release what the test built around it (a spool, a temp home). */
  cleanup?(): void | Promise<void>;
}

export function runServiceContract(label: string, make: () => ServiceUnderTest | Promise<ServiceUnderTest>): void {
  test(`${label}: stop before start, start twice, stop twice`, async () => {
    const t = await make();
    try {
      await t.service.stop(); // before start: nothing to stop, no error
      expect(await t.running()).toBe(false);
      await t.service.start();
      await t.service.start(); // a second start does nothing (a second listener would fail)
      expect(await t.running()).toBe(true);
      await t.service.stop();
      await t.service.stop();
      expect(await t.running()).toBe(false);
    } finally {
      await t.service.stop();
      await t.cleanup?.();
    }
  });
}
