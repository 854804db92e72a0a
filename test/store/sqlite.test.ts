// The store's conformance suite on SQLite: a real WAL file database in a temp home.
import { freshSpool } from "../helpers/spool.ts";
import { runStoreSuite } from "./suite.ts";

runStoreSuite({ name: "sqlite", open: freshSpool });
