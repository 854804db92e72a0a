// What the benchmarks send: a real GitHub push, and the secrets of the homes they write.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./procs.ts";

/**
 * The captured GitHub push (bobbins/github/repo/captures/accepted.http), grown with more commits to `bytes` once filled
 * in.
 */
export function githubPush(bytes = 6144): string {
  const text = readFileSync(join(ROOT, "bobbins", "github", "repo", "captures", "accepted.http"), "utf8").replace(
    /\r\n/g,
    "\n",
  );
  const doc = JSON.parse(text.slice(text.indexOf("\n\n") + 2).trim()) as {
    after: string;
    compare: string;
    commits: Record<string, unknown>[];
    head_commit: Record<string, unknown>;
  };
  const commit = doc.commits[0];
  doc.after = "{{SEQ}}";
  doc.head_commit = { ...doc.head_commit, id: "{{SEQ}}" };
  // Each {{SEQ}} (7 characters) becomes 40; more commits, then the compare URL, take up the rest.
  for (let i = 1; ; i++) {
    doc.commits.push({
      ...commit,
      id: i.toString(16).padStart(40, "0"),
      message: `Commit ${i} of the push: tidy the worker and its tests`,
      modified: [`src/worker-${i}.ts`, `test/worker-${i}.test.ts`],
    });
    if (JSON.stringify(doc).length + 2 * 33 > bytes) {
      doc.commits.pop();
      break;
    }
  }
  const short = bytes - (JSON.stringify(doc).length + 2 * 33);
  if (short > 1) doc.compare = `${doc.compare}#${"0".repeat(short - 1)}`;
  return JSON.stringify(doc);
}

/** The senders' signing secret (secrets/github in every home: the github.repo instance and the template sources). */
export const SENDER_SECRET = "bench-sender-secret";
/** The http destination's signing secret (the dispatcher signs every delivery, as in production). */
export const DEST_SECRET = "whsec_YmVuY2gtcmVjZWl2ZXItc2VjcmV0LWJ5dGVz";
