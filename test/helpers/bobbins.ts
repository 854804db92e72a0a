// Bobbins for tests: a manifest builder and private bobbin directories under a temp
// spool.bobbin_path, so expansion and loading are tested without depending on the catalogue.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tempDir } from "./tmp.ts";

/** A template bobbin's manifest: GitHub-like, with `extra` TOML appended. */
export function manifestText(
  name: string,
  extra = "",
  source = 'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type ' +
    '= "type" }\nspan = "burst"\nsender_retries = false',
): string {
  const [vendor, product] = name.split(".");
  return `name = "${name}"
version = "1"
summary = "a ${product} test bobbin"

[provider]
vendor = "${vendor}"
product = "${product}"
homepage = "https://${vendor}.dev/"
webhook_docs = "https://${vendor}.dev/webhooks"
signature_docs = "https://${vendor}.dev/signatures"

[source]
${source}

[secrets.secret]
description = "the signing secret"

[outputs."*"]
description = "every accepted event"
${extra}`;
}

/** Write a bobbin at <root>/<vendor>/<product>/ with its bobbin.toml and any other files. */
export function writeBobbin(root: string, dir: string, manifest: string, files: Record<string, string> = {}): string {
  const at = join(root, dir);
  mkdirSync(at, { recursive: true, mode: 0o755 });
  writeFileSync(join(at, "bobbin.toml"), manifest);
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(dirname(join(at, f)), { recursive: true });
    writeFileSync(join(at, f), text);
  }
  return at;
}

/** A fresh spool.bobbin_path directory. */
export function bobbinRoot(): string {
  return tempDir("hookspool-bobbins-");
}

/**
 * acme.tally under `root`: a private bobbin whose processor is test/fixtures/tally-processor.ts
 * (state = true, output "tally"), its imports pointed at this repository's src/.
 */
export function writeTallyBobbin(root: string): string {
  const src = join(import.meta.dir, "..", "..", "src");
  const processor = readFileSync(join(import.meta.dir, "..", "fixtures", "tally-processor.ts"), "utf8").replaceAll(
    "../../src/",
    `${src}/`,
  );
  return writeBobbin(
    root,
    "acme/tally",
    manifestText(
      "acme.tally",
      '\n[processor]\nmodule = "processor"\nstate = true\n\n[outputs.tally]\ndescription = "a count"\n',
    ),
    { "processor.ts": processor },
  );
}

/** acme.tasks under `root`: a poll bobbin (every_s 900, no secret) whose poller finds nothing. */
export function writePollBobbin(root: string): string {
  const manifest = manifestText(
    "acme.tasks",
    '\n[poll]\nevery_s = 900\nmodule = "poller"\n\n[outputs.task]\ndescription = "a changed task"\n',
  )
    .replace(/\[source\][\s\S]*?\n\n/, "")
    .replace(/\[secrets\.secret\]\ndescription = "the signing secret"\n\n/, "")
    .replace(/\[outputs\."\*"\]\ndescription = "every accepted event"\n/, "");
  return writeBobbin(root, "acme/tasks", manifest, { "poller.ts": "export default { poll: () => [] };\n" });
}
