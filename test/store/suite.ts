// The store's conformance suite: every store case, on any backend that can open a fresh,
// migrated spool with an injected clock. SQLite runs it in sqlite.test.ts; a second backend
// (PostgreSQL) runs the same cases with its own open().
import { describe } from "bun:test";
import type { TestSpool } from "../helpers/spool.ts";
import { batchCases } from "./batches.case.ts";
import { enqueueCases } from "./enqueue.case.ts";
import { modelCases } from "./model.case.ts";
import { operatorVerbCases } from "./operator.case.ts";
import { retentionCases } from "./retention.case.ts";
import { schemaCases } from "./schema.case.ts";

/** A fresh, migrated spool (its clock at T0) on the backend under test. */
export type OpenSpool = () => TestSpool;

export interface StoreBackend {
  name: string;
  open: OpenSpool;
}

export function runStoreSuite(backend: StoreBackend): void {
  describe(`store on ${backend.name}`, () => {
    describe("schema", () => schemaCases(backend.open));
    describe("enqueue", () => enqueueCases(backend.open));
    describe("batches", () => batchCases(backend.open));
    describe("operator verbs", () => operatorVerbCases(backend.open));
    describe("retention", () => retentionCases(backend.open));
    describe("model", () => modelCases(backend.open));
  });
}
