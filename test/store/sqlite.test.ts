// The store's conformance suite on SQLite: a real WAL file database in a temp home.
import { openSqliteStore } from "../helpers/store-under-test.ts";
import { runStoreSuite } from "./suite.ts";

runStoreSuite({ name: "sqlite", open: openSqliteStore });
