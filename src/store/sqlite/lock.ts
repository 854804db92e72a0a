// TODO(cli): dispatch.lock moved to src/lock.ts (it is not a store thing); this re-export stays
// only until init.ts, migrate.ts and migrate-store.ts import it from there. Then delete it.
export { acquireLock, type FileLock } from "../../lock.ts";
