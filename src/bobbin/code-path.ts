// Code loaded by path (a private bobbin's module, a hooks module, a spool.bobbin_path entry)
// runs as the service user, so whoever can write it can run code as hookspool: it must be a
// regular file or directory, not group- or other-writable, owned by root or the service user.
import { type Stats, statSync } from "node:fs";

/** Why `path` may not be loaded as code, or null. */
export function codePathProblem(
  path: string,
  want: "file" | "directory",
  uid: number,
): { message: string; hint?: string } | null {
  let st: Stats;
  try {
    st = statSync(path);
  } catch {
    return { message: `no ${want} at ${path}` };
  }
  if (want === "file" && !st.isFile()) return { message: `${path} is not a regular file` };
  if (want === "directory" && !st.isDirectory()) return { message: `${path} is not a directory` };
  if (st.mode & 0o022)
    return {
      message: `${path} is writable by group/other: anyone who can write it runs code as hookspool`,
      hint: `chmod go-w ${path}`,
    };
  if (st.uid !== 0 && st.uid !== uid)
    return {
      message: `${path} is owned by uid ${st.uid}, not root or the user hookspool runs as (uid ${uid})`,
      hint: `chown root ${path}`,
    };
  return null;
}
