// Moved to src/config/sources.ts; this re-export goes once every importer uses the new path.
export * from "../config/sources.ts";
