// The scorecard's captures row: no real credential or e-mail address in a capture, test values
// for the kit's secrets, an accepted and a rejected capture, and every capture sent through a
// real intake at the kit's time getting what its `# expect:` lines say.
import { systemClock } from "../../clock.ts";
import type { Capture, Kit } from "../../bobbin/captures.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import { startKitIntake } from "../kit/intake.ts";
import { acceptedOf, KIT, kitConfig, type Loaded, requestOf } from "./kit-files.ts";
import { lineOf, type Problem, type Row, row, skipped } from "./row.ts";
import type { CheckSubject } from "./subject.ts";

/** Values that look like a real credential, whatever file they are in. */
const CREDENTIAL = [
  /\bgh[pousr]_[A-Za-z0-9]{30,}/,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/,
  /\b[sr]k_live_[A-Za-z0-9]{10,}/,
  /\bAKIA[0-9A-Z]{16}\b/,
  /\bAIza[0-9A-Za-z_-]{35}\b/,
  /\bya29\.[A-Za-z0-9_-]{20,}/,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  // A JWT is a credential where it is a bearer token: a signature header (Plaid-Verification)
  // only proves one request and is fine in a capture.
  /^(authorization|proxy-authorization|cookie|x-api-key):.*\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./i,
  /"(access_token|id_token|refresh_token)"\s*:\s*"eyJ/,
];
/** An e-mail address that is not on a reserved example domain or a no-reply address. */
const EMAIL = /[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}/g;
const SAFE_EMAIL = new RegExp(
  "(@|\\.)(example\\.(com|org|net)|[a-z0-9-]+\\.(test|example|invalid))$" +
    "|^(no-?reply|noreply)[^@]*@|@users\\.noreply\\.github\\.com$|^git@",
  "i",
);
/** A kit secret says it is a test value. */
const TEST_VALUE = /test|kit|example|fake|dummy/i;

/** Each capture's instance: the kit's, or one per distinct `# settings:`. */
function instancesOf(
  kit: Kit,
  captures: Capture[],
): Map<string, { settings: Record<string, unknown>; captures: Capture[] }> {
  const out = new Map<string, { settings: Record<string, unknown>; captures: Capture[] }>();
  const ids = new Map<string, string>([[JSON.stringify(kit.instance.settings), kit.instance.name]]);
  out.set(kit.instance.name, { settings: kit.instance.settings, captures: [] });
  for (const c of captures) {
    const key = JSON.stringify(c.settings ?? kit.instance.settings);
    let name = ids.get(key);
    if (!name) {
      name = `${kit.instance.name}-${ids.size}`;
      ids.set(key, name);
      out.set(name, { settings: c.settings ?? {}, captures: [] });
    }
    out.get(name)?.captures.push(c);
  }
  return out;
}

export async function capturesRow(s: CheckSubject, m: Manifest | null, l: Loaded): Promise<Row> {
  const out = [...l.problems];
  for (const [f, text] of s.files) {
    if (!f.startsWith("captures/")) continue;
    for (const [i, line] of text.split("\n").entries()) {
      if (CREDENTIAL.some((re) => re.test(line)))
        out.push({
          file: f,
          line: i + 1,
          message: "holds what looks like a real credential",
          fix: "replace it with a test value (the kit's secrets say test or kit)",
        });
      for (const e of line.match(EMAIL) ?? [])
        if (!SAFE_EMAIL.test(e))
          out.push({
            file: f,
            line: i + 1,
            message: `holds a real-looking e-mail address ${e.replace(/^[^@]{2}[^@]*/, (x) => `${x.slice(0, 2)}…`)}`,
            fix: "redact it to an address at example.com",
          });
    }
  }
  for (const [n, v] of Object.entries(l.kit?.secrets ?? {}))
    if (!TEST_VALUE.test(v))
      out.push({
        file: KIT,
        line: lineOf(s.files.get(KIT), new RegExp(`^\\s*${n}\\s*=`)),
        message: `secrets.${n} does not look like a test value`,
        fix: "use a made-up value that says test or kit; never a real secret",
      });
  if (m?.poll) {
    // A poll has no requests: its captures are what a tick finds (the processor row runs them).
    for (const c of l.captures)
      out.push({
        file: c.file,
        message: "a poll bobbin takes no requests",
        fix: "remove it; a poll bobbin's captures are captures/poll-<name>.json",
      });
    if (!l.polls.length && !l.problems.length)
      out.push({
        file: "captures/",
        message: "no poll capture",
        fix: "add captures/poll-<name>.json: what one tick finds (the API's answers, redacted)",
      });
    return row("captures", out, out.length ? undefined : `${l.polls.length} poll capture(s)`);
  }
  if (!acceptedOf(l))
    out.push({
      file: "captures/",
      message: "no accepted capture (# expect: 202 queued) for the kit's instance",
      fix: "add captures/accepted.http: a real delivery, redacted, signed with the kit's secret",
    });
  if (!l.captures.some((c) => c.expect.status === 401))
    out.push({
      file: "captures/",
      message: "no rejected capture (# expect: 401)",
      fix: "add captures/rejected.http: the accepted delivery under a wrong signature",
    });
  if (out.length) return row("captures", out);
  if (!m || !l.kit)
    return skipped("captures", "the manifest or captures/kit.toml does not load, so no capture was sent");
  out.push(...(await expectationsHold(s, m, l.kit, l.captures)));
  return row("captures", out, `${l.captures.length} captures`);
}

/** Serve the bobbin and send every capture at the kit's time: each gets what it says. */
async function expectationsHold(s: CheckSubject, m: Manifest, kit: Kit, captures: Capture[]): Promise<Problem[]> {
  const instances = instancesOf(kit, captures);
  const out: Problem[] = [];
  let k: Awaited<ReturnType<typeof startKitIntake>>;
  try {
    k = await startKitIntake({
      config: kitConfig(s, m, kit, instances),
      secrets: kit.secrets,
      now: kit.now ?? Math.floor(systemClock.now()),
      http: kit.http,
    });
  } catch (e) {
    const problems = (e as { problems?: { key: string; message: string }[] }).problems;
    const why = problems?.length ? problems.map((p) => `${p.key}: ${p.message}`).join("; ") : (e as Error).message;
    return [
      {
        file: KIT,
        message: `the kit's instance does not load: ${why}`,
        fix: "make [instance] settings and [secrets] what the manifest requires",
      },
    ];
  }
  try {
    for (const [name, i] of instances) {
      for (const c of i.captures) {
        const r = await k.send(requestOf(c, name));
        const word = (() => {
          try {
            return (
              (JSON.parse(r.text) as { status?: string }).status ?? r.headers.get("x-hookspool-status") ?? undefined
            );
          } catch {
            // A source's own ack body (TwiML, Discord's reply): the word is in the header.
            return r.headers.get("x-hookspool-status") ?? undefined;
          }
        })();
        const fail = (message: string) =>
          out.push({
            file: c.file,
            line: 1,
            message,
            fix: "correct the capture or the bobbin; a capture is a real delivery and what it must get",
          });
        if (r.status !== c.expect.status)
          fail(
            `got ${r.status}${word ? ` ${word}` : ""}, ` +
              `# expect: says ${c.expect.status}${c.expect.word ? ` ${c.expect.word}` : ""}`,
          );
        else if (c.expect.word && word !== c.expect.word)
          fail(`got ${r.status} ${word ?? "(no status word)"}, # expect: says ${c.expect.word}`);
        else if (
          c.expect.word === "queued" &&
          (c.expect.key !== undefined || c.expect.eventType !== undefined || c.expect.version !== undefined)
        ) {
          const ev = k.spool.newestEvent();
          if (c.expect.key !== undefined && ev?.key !== c.expect.key)
            fail(`queued under key ${JSON.stringify(ev?.key)}, # expect-key: says ${JSON.stringify(c.expect.key)}`);
          if (c.expect.eventType !== undefined && ev?.event_type !== c.expect.eventType)
            fail(
              `queued as event type ${JSON.stringify(ev?.event_type)}, ` +
                `# expect-event-type: says ${JSON.stringify(c.expect.eventType)}`,
            );
          if (c.expect.version !== undefined && ev?.version !== c.expect.version)
            fail(`queued with version ${ev?.version ?? "none"}, # expect-version: says ${c.expect.version}`);
        }
      }
    }
  } finally {
    await k.stop();
  }
  return out;
}

/** The template the kit's instance runs, as config loading expands it (fixed keys and settings). */
