// --where's grammar (store/where.ts): each operator, quoting, lists, what a bare value may also
// be, and the one-line refusals (never naming a value); payload paths' bounds; the payload
// indexes' names and the plan that builds and drops them.
import { describe, expect, test } from "bun:test";
import { isHookspoolError } from "../../src/errors.ts";
import { PAYLOAD_PATH_LIMITS, payloadPathProblem } from "../../src/plugin/get-path.ts";
import {
  candidateOf,
  INDEX_PREFIX,
  indexName,
  indexPlan,
  parseWhere,
  parseWheres,
  WHERE_LIMITS,
} from "../../src/store/where.ts";

const bare = candidateOf;
const quoted = (t: string) => candidateOf(t, true);

/** The refusal of `text`: E_USAGE, one line. */
function refusal(text: string | string[]): string {
  try {
    parseWheres(Array.isArray(text) ? text : [text]);
  } catch (e) {
    if (!isHookspoolError(e)) throw e;
    expect(e.code).toBe("E_USAGE");
    expect(e.exitCode).toBe(2);
    expect(e.message).not.toContain("\n");
    return e.message;
  }
  throw new Error(`accepted: ${String(text)}`);
}

describe("a condition", () => {
  test("each operator, with or without spaces around it", () => {
    expect(parseWhere("pull_request.number = 42")).toEqual({
      path: "pull_request.number",
      keys: ["pull_request", "number"],
      op: "=",
      values: [{ text: "42", number: "42", boolean: null }],
    });
    expect(parseWhere("a=1").values).toEqual([bare("1")]);
    expect(parseWhere("a!=x")).toMatchObject({ op: "!=", values: [bare("x")] });
    expect(parseWhere("a ~ sub")).toMatchObject({ op: "~", values: [bare("sub")] });
    expect(parseWhere("a exists")).toMatchObject({ op: "exists", values: [] });
    expect(parseWhere("a EXISTS ")).toMatchObject({ op: "exists" });
    expect(parseWhere("action in (opened, synchronize)")).toMatchObject({
      op: "in",
      values: [bare("opened"), bare("synchronize")],
    });
    expect(parseWhere("a in(x)").values).toEqual([bare("x")]);
  });

  test("a bare value is the rest, trimmed; a quoted one keeps spaces and is a string only", () => {
    expect(parseWhere("title =  Fix: a, b (c)  ").values).toEqual([bare("Fix: a, b (c)")]);
    expect(parseWhere('title = say "hi"').values).toEqual([bare('say "hi"')]);
    expect(parseWhere('title = "  padded "').values).toEqual([quoted("  padded ")]);
    expect(parseWhere('title = ""').values).toEqual([quoted("")]);
    expect(parseWhere('t = "a \\"q\\" \\\\ b"').values).toEqual([quoted('a "q" \\ b')]);
    expect(parseWhere('n = "42"').values).toEqual([{ text: "42", number: null, boolean: null }]);
    expect(parseWhere('a in ("x, y", z, "(p)", "")').values).toEqual([
      quoted("x, y"),
      bare("z"),
      quoted("(p)"),
      quoted(""),
    ]);
  });

  test("what a bare value may also equal: a JSON number, true or false", () => {
    for (const n of ["0", "-3", "42.5", "1e20", "1E-2", "-0"]) expect(bare(n).number).toBe(n);
    const notNumbers = [".5", "01", "1.", "+1", "0x10", "1e400", "NaN", "Infinity", " 1"];
    for (const n of notNumbers) expect(bare(n).number).toBeNull();
    expect(bare("true").boolean).toBe(true);
    expect(bare("false").boolean).toBe(false);
    expect(bare("True").boolean).toBeNull();
    expect(bare("null")).toEqual({ text: "null", number: null, boolean: null });
  });

  test("a malformed condition is one line naming its place and path, never its values", () => {
    expect(refusal("")).toContain("a condition starts with a payload path");
    expect(refusal("= 42")).toContain("--where");
    expect(refusal("a..b = 1")).toContain("joined by single dots");
    expect(refusal("a = ")).toBe("--where (a): a value after the operator");
    expect(refusal("a == secret-ish")).toBe("--where (a): equality is a single =");
    expect(refusal("a is secret-ish")).toBe("--where (a): after the path: =, !=, ~, in (...) or exists");
    expect(refusal('a = "secret-ish')).toBe("--where (a): a quoted value is never closed");
    expect(refusal('a = "x" y')).toContain("nothing may follow a quoted value");
    expect(refusal('a = "x\\y"')).toContain("a backslash");
    expect(refusal("a in secret-ish")).toContain("in takes a list in parentheses");
    expect(refusal("a in ()")).toContain("an empty value");
    expect(refusal("a in (x, )")).toContain("an empty value");
    expect(refusal("a in (x) y")).toContain("in takes a list in parentheses");
    expect(refusal("a in (x y (z))")).toContain("quoted");
    expect(refusal('a in ("x" "y")')).toContain("separated by commas");
    expect(refusal("a exists now")).toContain("after the path");
    expect(refusal(["a = 1", "b = "])).toBe("--where 2 (b): a value after the operator");
    for (const text of ["a = secret-ish", 'a in ("secret-ish", "x', "a ~ secret-ish x"]) {
      try {
        parseWhere(`${text}"`);
      } catch (e) {
        expect((e as Error).message).not.toContain("secret-ish");
      }
    }
  });

  test("bounds: conditions, values in a list, characters in a value", () => {
    expect(refusal(Array(WHERE_LIMITS.conditions + 1).fill("a exists"))).toContain(
      `at most ${WHERE_LIMITS.conditions} conditions`,
    );
    expect(parseWheres(Array(WHERE_LIMITS.conditions).fill("a exists"))).toHaveLength(WHERE_LIMITS.conditions);
    const list = (n: number) => `a in (${Array.from({ length: n }, (_, i) => `v${i}`).join(", ")})`;
    expect(parseWhere(list(WHERE_LIMITS.values)).values).toHaveLength(WHERE_LIMITS.values);
    expect(refusal(list(WHERE_LIMITS.values + 1))).toContain(`at most ${WHERE_LIMITS.values} values`);
    expect(refusal(`a = ${"x".repeat(WHERE_LIMITS.chars + 1)}`)).toContain(`at most ${WHERE_LIMITS.chars} characters`);
  });
});

describe("a payload path", () => {
  test("a selector's bare path, bounded", () => {
    for (const ok of ["a", "repository.full_name", "items.0.id", "$ref.a-b", "a.b.c.0.1.2.3"])
      expect(payloadPathProblem(ok)).toBeNull();
    const l = PAYLOAD_PATH_LIMITS;
    expect(payloadPathProblem("")).toBe("an empty path");
    expect(payloadPathProblem("a.")).toContain("single dots");
    expect(payloadPathProblem("a b")).toContain("single dots");
    expect(payloadPathProblem("a'b")).toContain("single dots");
    expect(payloadPathProblem('a"b')).toContain("single dots");
    expect(payloadPathProblem(`a.${"b".repeat(l.chars)}`)).toContain(`at most ${l.chars} characters`);
    const keys = (n: number) => Array.from({ length: n }, () => "k").join(".");
    expect(payloadPathProblem(keys(l.keys))).toBeNull();
    expect(payloadPathProblem(keys(l.keys + 1))).toContain(`at most ${l.keys} keys`);
    expect(payloadPathProblem("a.0.1.2.3.4")).toContain(`at most ${l.indexes} array indexes`);
    expect(payloadPathProblem(`a.${"9".repeat(l.indexDigits + 1)}`)).toContain(`${l.indexDigits} digits`);
    expect(payloadPathProblem("a.-1")).toContain("negative");
    expect(refusal(`${keys(l.keys + 1)} = 1`)).toContain(`at most ${l.keys} keys`);
  });
});

describe("payload indexes", () => {
  test("a name per path and expression version: readable, distinct, at most 63 characters", () => {
    const n = indexName("repository.full_name", 1);
    expect(n).toMatch(/^events_where_repository_full_name_[0-9a-f]{10}$/);
    expect(indexName("repository.full_name", 1)).toBe(n);
    expect(indexName("repository.full_name", 2)).not.toBe(n);
    expect(indexName("a-b", 1)).not.toBe(indexName("a_b", 1));
    const long = indexName(Array(30).fill("segment").join("."), 1);
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long.startsWith(INDEX_PREFIX)).toBe(true);
    expect(indexName("$ref.x", 1)).toMatch(/^[a-z0-9_]+$/i);
  });

  test("the plan: build what is wanted and missing, drop what is there and unwanted, leave others' indexes", () => {
    const a = indexName("a", 1);
    const b = indexName("b", 1);
    expect(indexPlan(["b", "a", "a"], [], 1)).toEqual({
      create: [
        { path: "a", name: a },
        { path: "b", name: b },
      ],
      drop: [],
    });
    expect(indexPlan(["a"], [a, b, "events_batch"], 1)).toEqual({ create: [], drop: [b] });
    // An index of an older expression is dropped, and its path's built anew.
    expect(indexPlan(["a"], [indexName("a", 0)], 1)).toEqual({
      create: [{ path: "a", name: a }],
      drop: [indexName("a", 0)],
    });
  });
});
