// The store's conformance suite: every store case, on any backend that can open a fresh,
// migrated store with an injected clock, through the StoreUnderTest facade
// (test/helpers/store-under-test.ts). SQLite runs it in sqlite.test.ts; PostgreSQL runs the same
// cases in pg/suite.test.ts. A case that needs what only one backend has checks `caps`.
import { afterEach, describe } from "bun:test";
import type { BackendName, Capabilities, StoreUnderTest } from "../helpers/store-under-test.ts";
import { CAPABILITIES } from "../helpers/store-under-test.ts";
import { batchCases } from "./batches.case.ts";
import { destinationCases } from "./destinations.case.ts";
import { enqueueCases } from "./enqueue.case.ts";
import { exportCases } from "./export.case.ts";
import { issueCases } from "./issues.case.ts";
import { modelCases } from "./model.case.ts";
import { operatorVerbCases } from "./operator.case.ts";
import { pieceCases } from "./pieces.case.ts";
import { outcomeCases } from "./outcomes.case.ts";
import { pollCases } from "./polls.case.ts";
import { pruneCases } from "./prune.case.ts";
import { quarantineCases } from "./quarantine.case.ts";
import { retentionCases } from "./retention.case.ts";
import { schemaCases } from "./schema.case.ts";
import { staleCases } from "./stale.case.ts";
import { statusCases } from "./status.case.ts";
import { verbCases } from "./verbs.case.ts";
import { whereCases } from "./where.case.ts";

export interface StoreBackend {
  name: BackendName;
  /** A fresh, migrated store (its clock at T0) on this backend. */
  open: () => Promise<StoreUnderTest>;
  /** The model test's operation count (default 10,000). */
  modelSteps?: number;
}

/** What a case file is given: the backend's name and capabilities, and fresh(). */
export interface Suite {
  name: BackendName;
  caps: Capabilities;
  /** A fresh store, closed after the test. */
  fresh: () => Promise<StoreUnderTest>;
  modelSteps: number;
}

export function runStoreSuite(backend: StoreBackend): void {
  describe(`store on ${backend.name}`, () => {
    const opened: StoreUnderTest[] = [];
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
    });
    const suite: Suite = {
      name: backend.name,
      caps: CAPABILITIES[backend.name],
      fresh: async () => {
        const s = await backend.open();
        opened.push(s);
        return s;
      },
      modelSteps: backend.modelSteps ?? 10_000,
    };
    describe("schema", () => schemaCases(suite));
    describe("enqueue", () => enqueueCases(suite));
    describe("batches", () => batchCases(suite));
    describe("operator verbs", () => operatorVerbCases(suite));
    describe("retention", () => retentionCases(suite));
    describe("model", () => modelCases(suite));
    describe("destinations", () => destinationCases(suite));
    describe("issues", () => issueCases(suite));
    describe("quarantine", () => quarantineCases(suite));
    describe("status figures", () => statusCases(suite));
    describe("outcomes", () => outcomeCases(suite));
    describe("verbs' rows", () => verbCases(suite));
    describe("prune", () => pruneCases(suite));
    describe("the poll clock", () => pollCases(suite));
    describe("split and exclude", () => pieceCases(suite));
    describe("export", () => exportCases(suite));
    describe("--where", () => whereCases(suite));
    // PostgreSQL reads an indexed path from the values its writer read, when they are there.
    if (backend.name === "postgres")
      describe("--where, the paths read by the writer", () => whereCases(suite, { readPaths: true }));
    describe("versions and the stale floor", () => staleCases(suite));
  });
}
