// Which caught failures are the spool refusing a write (counted, one spool issue) and which are
// bugs (an internal issue): SQLite's codes, the OS's, and PostgreSQL's SQLSTATEs.
import { describe, expect, test } from "bun:test";
import { errorClass, isSpoolWriteError } from "../../src/obs/faults.ts";

const pg = (errno: string) =>
  Object.assign(new Error("server said no"), { name: "PostgresError", code: "ERR_POSTGRES_SERVER_ERROR", errno });

describe("refused writes and bugs", () => {
  test("SQLite's and the OS's refusals", () => {
    for (const code of [
      "SQLITE_FULL",
      "SQLITE_BUSY",
      "SQLITE_IOERR_WRITE",
      "SQLITE_READONLY",
      "ENOSPC",
      "EDQUOT",
      "EROFS",
    ])
      expect({ code, refused: isSpoolWriteError({ code }) }).toEqual({ code, refused: true });
    expect(isSpoolWriteError({ code: "SQLITE_CONSTRAINT_CHECK" })).toBe(false);
  });

  test(
    "PostgreSQL: a lost connection, a deadlock, a full disk, a shutdown, a standby are refusals; a " +
      "syntax error or bad input is a bug",
    () => {
      for (const errno of ["08006", "40P01", "40001", "53100", "57P01", "58030", "55P03", "25006"])
        expect({ errno, refused: isSpoolWriteError(pg(errno)) }).toEqual({ errno, refused: true });
      for (const errno of ["42601", "22P02", "23505", "42P01"])
        expect({ errno, refused: isSpoolWriteError(pg(errno)) }).toEqual({ errno, refused: false });
      expect(isSpoolWriteError(Object.assign(new Error("closed"), { code: "ERR_POSTGRES_CONNECTION_CLOSED" }))).toBe(
        true,
      );
    },
  );

  test("a PostgreSQL server error's class carries its SQLSTATE, never its message", () => {
    expect(errorClass(pg("40P01"))).toBe("POSTGRES_40P01");
    expect(errorClass({ code: "ERR_POSTGRES_CONNECTION_CLOSED" })).toBe("ERR_POSTGRES_CONNECTION_CLOSED");
    expect(errorClass({ code: "SQLITE_FULL" })).toBe("SQLITE_FULL");
  });
});
