// Runs scripts/soak.ts as the soak tests do: a process of its own, its last stdout line the
// JSON summary (printed for the test's log), its exit code beside it.
import { join } from "node:path";

const SOAK = join(import.meta.dir, "..", "..", "scripts", "soak.ts");

/** The soak with `args`; throws with the end of its stderr when it printed no summary. */
export async function runSoak<T>(args: readonly string[]): Promise<{ summary: T; code: number }> {
  const p = Bun.spawn([process.execPath, SOAK, ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  const line = out.trim().split("\n").pop() ?? "";
  let summary: T;
  try {
    summary = JSON.parse(line) as T;
  } catch {
    throw new Error(`the soak printed no summary (exit ${code}): ${err.slice(-800)}`);
  }
  console.log(line);
  return { summary, code };
}
