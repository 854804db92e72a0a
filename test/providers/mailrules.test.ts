// Mail rules: recognising a message by sender, subject, List-Id and headers, pulling values out
// of it, and every refusal a rule pack can meet at load, each reported with the key it is at.
import { describe, expect, test } from "bun:test";
import {
  addressOf,
  classify,
  hasNestedQuantifier,
  type MailMessage,
  needsSnippet,
  parseRulePack,
  type RulePack,
} from "../../src/providers/mailrules.ts";

const APPOINTMENTS = String.raw`
name = "appointments"
status = "active"

[[rules]]
name = "dentist"
from = ["@dentist.example"]
subject = ["appointment"]
output = "appointment.reminder"
extract = { date = { re = '(\d{1,2} \w+ \d{4})' }, time = { from = "snippet", re = 'at (\d{1,2}:\d{2})' } }

[[rules]]
name = "newsletters"
list_id = ["news.dentist.example"]
output = "newsletter"

[[rules]]
name = "bank"
from = ["*.bank.example"]
output = "bank.notice"
`;

/** A pack that must load; the test fails with its problems when it does not. */
function load(text: string, name = "appointments"): RulePack {
  const { pack, problems } = parseRulePack(name, text);
  expect(problems).toEqual([]);
  if (!pack) throw new Error("no pack");
  return pack;
}
const msg = (m: Partial<MailMessage>): MailMessage => ({ from: "someone@elsewhere.example", subject: "hello", ...m });
/** One rule, written as its TOML lines, in a pack of its own. */
const one = (lines: string, status = "active") =>
  load(`status = "${status}"\n[[rules]]\nname = "r"\noutput = "hit"\n${lines}\n`, "p");
const hits = (lines: string, m: Partial<MailMessage>) => classify(msg(m), [one(lines)]) !== null;
/** The keys of a pack's problems. */
const keysOf = (text: string) => parseRulePack("p", text).problems.map((p) => p.key);
const rule = (lines: string) => `[[rules]]\nname = "r"\noutput = "hit"\n${lines}\n`;

describe("a realistic pack", () => {
  const pack = load(APPOINTMENTS);

  test("loads with its rules as written, status active by default", () => {
    expect(pack.rules.map((r) => r.name)).toEqual(["dentist", "newsletters", "bank"]);
    expect(load(APPOINTMENTS.replace('status = "active"\n', "")).status).toBe("active");
  });

  test("the dentist's reminder, with the date from the subject and the time from the snippet", () => {
    const m = msg({
      from: "Dentist Office <noreply@dentist.example>",
      subject: "Your appointment on 14 March 2025",
      snippet: "See you at 9:30, bring your card",
    });
    expect(classify(m, [pack])).toEqual({
      rule: "dentist",
      pack: "appointments",
      output: "appointment.reminder",
      values: { date: "14 March 2025", time: "9:30" },
    });
  });

  test("a value whose pattern finds nothing, or whose source is missing, is left out", () => {
    expect(classify(msg({ from: "noreply@dentist.example", subject: "Appointment moved" }), [pack])?.values).toEqual(
      {},
    );
  });

  test("the newsletter by List-Id, the bank by any subdomain", () => {
    expect(classify(msg({ listId: "Dentist News <news.dentist.example>" }), [pack])?.rule).toBe("newsletters");
    expect(classify(msg({ from: "Alerts <alerts@mail.bank.example>" }), [pack])?.output).toBe("bank.notice");
  });

  test("nothing matches: null", () => {
    expect(classify(msg({ from: "a@shop.example", subject: "Your order" }), [pack])).toBeNull();
  });

  test("needsSnippet: only when a rule pulls a value from the snippet", () => {
    expect(needsSnippet([pack])).toBe(true);
    expect(needsSnippet([one('subject = ["x"]\nextract = { v = { re = "(\\\\d+)" } }')])).toBe(false);
    expect(
      needsSnippet([one('subject = ["x"]\nextract = { v = { from = "snippet", re = "(\\\\d+)" } }', "draft")]),
    ).toBe(false);
    expect(needsSnippet([])).toBe(false);
  });
});

describe("order", () => {
  const pack = load(
    `[[rules]]\nname = "first"\nsubject = ["invoice"]\noutput = "a"\n[[rules]]\nname = "second"\n` +
      `subject = ["invoice"]\noutput = "b"\n[[rules]]\nname = "urgent"\nsubject = ["invoice"]\noutput = ` +
      `"c"\npriority = 10\n`,
    "p",
  );
  const other = load(`[[rules]]\nname = "later"\nsubject = ["invoice"]\noutput = "d"\npriority = 10\n`, "q");

  test("higher priority runs first, whatever its place", () => {
    expect(classify(msg({ subject: "Invoice 12" }), [pack])?.rule).toBe("urgent");
  });

  test("a tie goes to file order, then pack order", () => {
    const tied = load(
      `[[rules]]\nname = "first"\nsubject = ["invoice"]\noutput = "a"\n[[rules]]\nname = "second"\n` +
        `subject = ["invoice"]\noutput = "b"\n`,
      "p",
    );
    expect(classify(msg({ subject: "Invoice 12" }), [tied])?.rule).toBe("first");
    expect(classify(msg({ subject: "Invoice 12" }), [pack, other])).toMatchObject({ rule: "urgent", pack: "p" });
    expect(classify(msg({ subject: "Invoice 12" }), [other, pack])).toMatchObject({ rule: "later", pack: "q" });
  });

  test("a negative priority runs after the default", () => {
    const low = load(
      `[[rules]]\nname = "catchall"\nsubject = ["invoice"]\noutput = "z"\npriority = -1\n[[rules]]\n` +
        `name = "normal"\nsubject = ["invoice"]\noutput = "n"\n`,
      "p",
    );
    expect(classify(msg({ subject: "invoice" }), [low])?.rule).toBe("normal");
  });
});

describe("conditions", () => {
  test("from: an address, exactly", () => {
    expect(hits('from = ["noreply@dentist.example"]', { from: "noreply@dentist.example" })).toBe(true);
    expect(hits('from = ["noreply@dentist.example"]', { from: "other@dentist.example" })).toBe(false);
  });

  test("from: @domain is that domain only", () => {
    expect(hits('from = ["@dentist.example"]', { from: "x@dentist.example" })).toBe(true);
    expect(hits('from = ["@dentist.example"]', { from: "x@mail.dentist.example" })).toBe(false);
  });

  test("from: *.domain is any subdomain, not the domain itself nor a look-alike", () => {
    expect(hits('from = ["*.bank.example"]', { from: "x@a.b.bank.example" })).toBe(true);
    expect(hits('from = ["*.bank.example"]', { from: "x@bank.example" })).toBe(false);
    expect(hits('from = ["*.bank.example"]', { from: "x@evilbank.example" })).toBe(false);
  });

  test("from: the display name does not count, only the address", () => {
    expect(hits('from = ["@dentist.example"]', { from: '"noreply@dentist.example" <phish@evil.example>' })).toBe(false);
  });

  test("from: any one of the list", () => {
    expect(hits('from = ["@a.example", "@b.example"]', { from: "x@b.example" })).toBe(true);
  });

  test("subject: any one substring", () => {
    expect(hits('subject = ["receipt", "invoice"]', { subject: "Your invoice" })).toBe(true);
    expect(hits('subject = ["receipt", "invoice"]', { subject: "Your order" })).toBe(false);
  });

  test("subject_re", () => {
    expect(hits("subject_re = '^Order #\\d+ shipped$'", { subject: "Order #123 shipped" })).toBe(true);
    expect(hits("subject_re = '^Order #\\d+ shipped$'", { subject: "Re: Order #123 shipped" })).toBe(false);
  });

  test("list_id: exact, with or without angle brackets on either side", () => {
    expect(hits('list_id = ["<news.example>"]', { listId: "news.example" })).toBe(true);
    expect(hits('list_id = ["news.example"]', { listId: "The News <news.example>" })).toBe(true);
    expect(hits('list_id = ["news.example"]', { listId: "<more.news.example>" })).toBe(false);
    expect(hits('list_id = ["news.example"]', {})).toBe(false);
  });

  test("header: every named header with exactly that value", () => {
    const lines = 'header = { "x-mailer" = "Dentrix", "auto-submitted" = "auto-generated" }';
    expect(hits(lines, { headers: { "x-mailer": " dentrix ", "auto-submitted": "auto-generated" } })).toBe(true);
    expect(hits(lines, { headers: { "x-mailer": "Dentrix" } })).toBe(false);
    expect(hits(lines, { headers: { "x-mailer": "Dentrix 2", "auto-submitted": "auto-generated" } })).toBe(false);
    expect(hits(lines, {})).toBe(false);
  });

  test("every given condition must hold", () => {
    const lines = 'from = ["@dentist.example"]\nsubject = ["appointment"]\nlist_id = ["news.dentist.example"]';
    expect(hits(lines, { from: "a@dentist.example", subject: "appointment", listId: "news.dentist.example" })).toBe(
      true,
    );
    expect(hits(lines, { from: "a@other.example", subject: "appointment", listId: "news.dentist.example" })).toBe(
      false,
    );
    expect(hits(lines, { from: "a@dentist.example", subject: "hello", listId: "news.dentist.example" })).toBe(false);
    expect(hits(lines, { from: "a@dentist.example", subject: "appointment" })).toBe(false);
  });

  test("case does not matter anywhere", () => {
    expect(hits('from = ["NoReply@Dentist.EXAMPLE"]', { from: "NOREPLY@dentist.example" })).toBe(true);
    expect(hits('from = ["*.Bank.Example"]', { from: "x@MAIL.BANK.EXAMPLE" })).toBe(true);
    expect(hits('subject = ["APPOINTMENT"]', { subject: "Your Appointment" })).toBe(true);
    expect(hits("subject_re = 'your appointment'", { subject: "YOUR APPOINTMENT" })).toBe(true);
    expect(hits('list_id = ["News.Example"]', { listId: "<news.EXAMPLE>" })).toBe(true);
    expect(
      classify(msg({ subject: "ORDER abc123" }), [
        one("subject_re = 'order'\nextract = { id = { re = 'ORDER (\\w+)' } }"),
      ])?.values,
    ).toEqual({ id: "abc123" });
  });
});

describe("what runs on what", () => {
  test("the subject is cut to 1,000 characters before any pattern runs", () => {
    const long = `${"x".repeat(1000)}appointment`;
    expect(hits("subject_re = 'appointment'", { subject: long })).toBe(false);
    expect(hits('subject = ["appointment"]', { subject: long })).toBe(false);
    expect(hits("subject_re = 'appointment'", { subject: `${"x".repeat(989)}appointment` })).toBe(true);
  });

  test("so is the snippet", () => {
    const pack = one('subject = ["x"]\nextract = { code = { from = "snippet", re = "code (\\\\d+)" } }');
    expect(classify(msg({ subject: "x", snippet: `${" ".repeat(1000)}code 42` }), [pack])?.values).toEqual({});
    expect(classify(msg({ subject: "x", snippet: "your code 42" }), [pack])?.values).toEqual({ code: "42" });
  });

  test("values are trimmed and cut to 200 characters", () => {
    const pack = one("subject = [\"re:\"]\nextract = { rest = { re = 're:(.*)' } }");
    expect(classify(msg({ subject: "re:   spaced   " }), [pack])?.values).toEqual({ rest: "spaced" });
    expect(classify(msg({ subject: `re: ${"y".repeat(500)}` }), [pack])?.values.rest).toBe("y".repeat(200));
  });

  test("draft and retired packs never match", () => {
    expect(classify(msg({ subject: "x" }), [one('subject = ["x"]', "draft")])).toBeNull();
    expect(classify(msg({ subject: "x" }), [one('subject = ["x"]', "retired")])).toBeNull();
    expect(classify(msg({ subject: "x" }), [one('subject = ["x"]', "draft"), one('subject = ["x"]')])).not.toBeNull();
  });
});

describe("addressOf", () => {
  test.each([
    ["Dentist Office <noreply@dentist.example>", "noreply@dentist.example"],
    ["noreply@dentist.example", "noreply@dentist.example"],
    ["  NoReply@Dentist.Example  ", "noreply@dentist.example"],
    ['"Smith, John" <John.Smith@corp.example>', "john.smith@corp.example"],
    ['"Support <help@fake.example>" <real@corp.example>', "real@corp.example"],
    ["john@corp.example (John Smith)", "john@corp.example"],
    ["<bare@corp.example>", "bare@corp.example"],
    ["", ""],
    ["Undisclosed recipients", ""],
    ["<>", ""],
    ["Name <not an address>", ""],
  ])("%j -> %j", (from, address) => {
    expect(addressOf(from)).toBe(address);
  });

  test("a rule with from never matches a message without an address", () => {
    expect(hits('from = ["*.example"]', { from: "" })).toBe(false);
  });
});

describe("load problems, each at its key", () => {
  test("not TOML", () => {
    expect(keysOf("[[rules]\n")).toEqual([""]);
  });

  test("unknown keys anywhere", () => {
    expect(
      keysOf(`colour = 1\n${rule('subject = ["x"]\nsender = "a"\nextract = { v = { re = "(a)", flags = "g" } }')}`),
    ).toEqual(["colour", "rules[0].sender", "rules[0].extract.v.flags"]);
  });

  test("the pack's name: its file's, and a proper name", () => {
    expect(keysOf(`name = "other"\n${rule('subject = ["x"]')}`)).toEqual(["name"]);
    expect(parseRulePack("Bad Name", rule('subject = ["x"]')).problems.map((p) => p.key)).toEqual(["name"]);
  });

  test("status is one of active, draft, retired", () => {
    expect(keysOf(`status = "paused"\n${rule('subject = ["x"]')}`)).toEqual(["status"]);
    expect(one('subject = ["x"]', "retired").status).toBe("retired");
  });

  test("rules: at least one, at most 500", () => {
    expect(keysOf('name = "p"\n')).toEqual(["rules"]);
    expect(keysOf('rules = "x"\n')).toEqual(["rules"]);
    const many = (n: number) =>
      Array.from({ length: n }, (_, i) => rule('subject = ["x"]').replace('"r"', `"r${i}"`)).join("");
    expect(keysOf(many(500))).toEqual([]);
    expect(keysOf(many(501))).toEqual(["rules"]);
  });

  test("a rule with no condition", () => {
    expect(keysOf(rule('extract = { v = { re = "(a)" } }'))).toEqual(["rules[0]"]);
  });

  test("a rule's name: required, a name, unique", () => {
    expect(keysOf('[[rules]]\noutput = "a"\nsubject = ["x"]\n')).toEqual(["rules[0].name"]);
    expect(keysOf(rule('subject = ["x"]').replace('"r"', '"Dentist Office"'))).toEqual(["rules[0].name"]);
    expect(keysOf(rule('subject = ["x"]').replace('"r"', `"${"a".repeat(65)}"`))).toEqual(["rules[0].name"]);
    expect(keysOf(rule('subject = ["x"]') + rule('subject = ["y"]'))).toEqual(["rules[1].name"]);
  });

  test("output: required, an event type", () => {
    expect(keysOf('[[rules]]\nname = "r"\nsubject = ["x"]\n')).toEqual(["rules[0].output"]);
    expect(keysOf(rule('subject = ["x"]').replace('"hit"', '"not an event"'))).toEqual(["rules[0].output"]);
    expect(keysOf(rule('subject = ["x"]').replace('"hit"', '"mail.appointment:reminder-2"'))).toEqual([]);
  });

  test("condition values of the wrong shape", () => {
    expect(keysOf(rule('from = "@a.example"'))).toEqual(["rules[0].from"]);
    expect(keysOf(rule("from = []"))).toEqual(["rules[0].from"]);
    expect(keysOf(rule('from = ["@a.example", "dentist.example", "@", "*.", "a b@c.example"]'))).toEqual([
      "rules[0].from[1]",
      "rules[0].from[2]",
      "rules[0].from[3]",
      "rules[0].from[4]",
    ]);
    expect(keysOf(rule('subject = [""]'))).toEqual(["rules[0].subject"]);
    expect(keysOf(rule("list_id = [1]"))).toEqual(["rules[0].list_id"]);
    expect(keysOf(rule("subject_re = 1"))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule("header = {}"))).toEqual(["rules[0].header"]);
    expect(keysOf(rule('header = { "X-Mailer" = "a", "x-b" = 1, "from" = "a@b.example" }'))).toEqual([
      "rules[0].header.X-Mailer",
      "rules[0].header.x-b",
      "rules[0].header.from",
    ]);
    expect(keysOf(rule('subject = ["x"]\npriority = 1.5'))).toEqual(["rules[0].priority"]);
    expect(keysOf(rule('subject = ["x"]\nextract = { v = { from = "body", re = "(a)" } }'))).toEqual([
      "rules[0].extract.v.from",
    ]);
    expect(keysOf(rule('subject = ["x"]\nextract = { "Bad Name" = { re = "(a)" }, w = "(a)" }'))).toEqual([
      'rules[0].extract."Bad Name"',
      "rules[0].extract.w",
    ]);
  });

  test("a pattern too long, not compiling, or with flags", () => {
    expect(keysOf(rule(`subject_re = '${"a".repeat(201)}'`))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule(`subject_re = '${"a".repeat(200)}'`))).toEqual([]);
    expect(keysOf(rule("subject_re = '(unclosed'"))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule("subject_re = '/appointment/i'"))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule("subject_re = '/appointment/g'"))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule("subject_re = '(?m:^a)'"))).toEqual(["rules[0].subject_re"]);
    expect(keysOf(rule("subject_re = '(?-i:Exact)'"))).toEqual([]);
    expect(keysOf(rule("subject_re = 'a\\(?m:'"))).toEqual([]); // an escaped paren, not a group
  });

  test("the key points at the rule it is in", () => {
    const pack =
      rule('subject = ["x"]').replace('"r"', '"a"') +
      rule('subject = ["x"]').replace('"r"', '"b"') +
      rule("subject_re = '(a+)+'").replace('"r"', '"c"');
    expect(keysOf(pack)).toEqual(["rules[2].subject_re"]);
  });

  test("an extract pattern needs exactly one capture group", () => {
    const ex = (re: string) => keysOf(rule(`subject = ["x"]\nextract = { v = { re = '${re}' } }`));
    expect(ex("\\d+")).toEqual(["rules[0].extract.v.re"]);
    expect(ex("(\\d+)-(\\d+)")).toEqual(["rules[0].extract.v.re"]);
    expect(ex("(?:no)(\\d+)")).toEqual([]);
    expect(ex("(?<n>\\d+)")).toEqual([]);
    expect(ex("[(](\\d+)\\)")).toEqual([]);
  });

  test("every problem is reported, and no pack comes back", () => {
    const { pack, problems } = parseRulePack("p", `status = "x"\n[[rules]]\nname = "R"\noutput = "bad event"\n`);
    expect(pack).toBeNull();
    expect(problems.map((p) => p.key)).toEqual(["status", "rules[0].name", "rules[0]", "rules[0].output"]);
    expect(problems.every((p) => p.message.length > 0)).toBe(true);
  });
});

describe("nested quantifiers are refused", () => {
  test.each(["(a+)+", "(a*)*", "(.+)*", "(?:\\w+\\s?)+", "((a)+)*", "(a+){2,}", "(a+){1,5}", "(x(a+))*", "(a+?)+"])(
    "%s",
    (re) => {
      expect(hasNestedQuantifier(re)).toBe(true);
      expect(keysOf(rule(`subject_re = '${re}'`))).toEqual(["rules[0].subject_re"]);
    },
  );

  test.each([
    "(\\d{1,2} \\w+ \\d{4})",
    "(ab)+",
    "(a+)?",
    "(a{1,3})+",
    "a+b*",
    "[(a+)]+",
    "\\(a+\\)+",
    "(a+)b(c)*",
    "(?<n>\\d+)",
  ])("%s is fine", (re) => {
    expect(hasNestedQuantifier(re)).toBe(false);
  });
});
