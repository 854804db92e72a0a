// The source kit's spool: `hookspool bobbin check` and `source test`'s kit replay a bobbin's
// captures into a throwaway SQLite home (always SQLite: the kit is hermetic, one process, one
// file), run the real intake on it, and read back what was stored to judge each answer. This is
// that home's spool with the reads the kit checks with, and its writes refused on demand.
import type { Clock } from "../clock.ts";
import { type Stores, sqliteStores } from "./open.ts";
import { openSpool } from "./sqlite/db.ts";
import {
  eventCount,
  findText,
  newestEvent,
  newestQuarantined,
  openIssueCount,
  type QuarantinedEvent,
  refuseWrites,
  type StoredEvent,
} from "./sqlite/inspect.ts";
import { migrate } from "./sqlite/migrate.ts";

export type { QuarantinedEvent, StoredEvent };

export interface KitSpool {
  /** The roles the kit's intake writes through. */
  readonly stores: Stores;
  eventCount(): number;
  newestEvent(): StoredEvent | null;
  newestQuarantined(): QuarantinedEvent | null;
  openIssueCount(fingerprint: string): number;
  /** Where a planted value appears in the spool, if anywhere (a secret must never). */
  findText(needle: string): { table: string; column: string } | null;
  /** Make every write fail (the kit's "spool unwritable" case), or stop. */
  refuseWrites(refuse: boolean): void;
  close(): void;
}

/** A new, migrated spool at `file` on the kit's clock. */
export function openKitSpool(file: string, clock: Clock): KitSpool {
  const spool = openSpool(file, { create: true, clock });
  try {
    migrate(spool);
  } catch (e) {
    spool.close();
    throw e;
  }
  return {
    stores: sqliteStores(spool),
    eventCount: () => eventCount(spool),
    newestEvent: () => newestEvent(spool),
    newestQuarantined: () => newestQuarantined(spool),
    openIssueCount: (fp) => openIssueCount(spool, fp),
    findText: (needle) => findText(spool, needle),
    refuseWrites: (refuse) => refuseWrites(spool, refuse),
    close: () => spool.close(),
  };
}
