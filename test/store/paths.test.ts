// What the writer gives the server of a payload's indexed paths: only what jsonb reads alike
// (a string, a boolean or null, through objects), nothing when jsonb might read the text
// otherwise. test/store/pg/path-values.test.ts holds these values to the server's own reading.
import { describe, expect, test } from "bun:test";
import { jsonbReadsAlike, pathValues, pathValuesOf } from "../../src/store/paths.ts";

const of = (text: string, paths: string[]) => {
  const v = pathValuesOf(text, paths);
  return v === null ? null : (JSON.parse(v) as Record<string, unknown[]>);
};

describe("pathValues", () => {
  test("a string, a boolean or null at the path, [] for a missing one", () => {
    const text = JSON.stringify({ repository: { full_name: "o/r", private: false }, ref: null, n: 1 });
    expect(of(text, ["repository.full_name", "repository.private", "ref", "missing", "repository.x.y"])).toEqual({
      "repository.full_name": ["o/r"],
      "repository.private": [false],
      ref: [null],
      missing: [],
      "repository.x.y": [],
    });
    // Through a scalar there is nothing, as jsonb's #> finds nothing.
    expect(of(JSON.stringify({ a: "s" }), ["a.b"])).toEqual({ "a.b": [] });
  });

  test("a number, an object, an array, or a path through an array is left to the server", () => {
    const text = JSON.stringify({ n: 42, o: { x: "y" }, a: ["x"], s: "kept" });
    expect(of(text, ["n", "o", "a", "a.0", "s"])).toEqual({ s: ["kept"] });
    expect(of(text, ["n", "o"])).toBeNull();
  });

  test("keys as JSON.parse keeps them: the last of two alike, __proto__ as a key", () => {
    expect(of('{"a": "first", "a": "last"}', ["a"])).toEqual({ a: ["last"] });
    expect(pathValuesOf('{"__proto__": "p"}', ["__proto__"])).toBe('{"__proto__":["p"]}');
    expect(of('{"a": {"b": "x"}, "a": {"c": "y"}}', ["a.b", "a.c"])).toEqual({ "a.b": [], "a.c": ["y"] });
  });

  test("no paths, a text that is not JSON: nothing", () => {
    expect(pathValuesOf('{"a": "x"}', [])).toBeNull();
    expect(pathValuesOf("{nope", ["a"])).toBeNull();
    expect(pathValues('{"a": "x"}', { a: "x" }, [])).toBeNull();
  });
});

describe("jsonbReadsAlike", () => {
  test("an ordinary payload, escapes and unicode included", () => {
    expect(jsonbReadsAlike('{"a": "caf\\u00e9 \\n \\"q\\" \\\\", "e": 1.5e-7, "b": [true, null]}')).toBe(true);
    // A quote after an escaped backslash closes its string: the bracket after it is nesting.
    expect(jsonbReadsAlike(`{"a": "x\\\\", "d": ${"[".repeat(65)}0${"]".repeat(65)}}`)).toBe(false);
    expect(jsonbReadsAlike(`{"a": "x\\"${"[".repeat(65)}"}`)).toBe(true);
    expect(jsonbReadsAlike(JSON.stringify({ s: "e12345 in a string", big: 1e300 }))).toBe(true);
  });

  test("what jsonb refuses, or might read otherwise, is left to the server", () => {
    const refused = [
      '\uFEFF{"a": "x"}',
      '{"a": "x", "d": "nul \\u0000"}',
      '{"a": "x", "d": "lone \\ud800"}',
      '{"a": "x", "d": "pair \\uD83D\\uDE00"}',
      // An escaped backslash before "u0000" is taken for the escape: a doubt leaves it to the server.
      '{"a": "x", "d": "\\\\u0000"}',
      `{"a": "x", "d": ${"[".repeat(65)}0${"]".repeat(65)}}`,
      '{"a": "x", "d": 1e1001}',
      // A lone surrogate in the text itself (JSON.stringify would write it into the values raw).
      '{"a": "x\ud800"}',
      '{"a": "x", "d": 1E-400}',
      `{"a": "x", "d": ${"9".repeat(400)}}`,
    ];
    for (const text of refused) expect({ text, alike: jsonbReadsAlike(text) }).toEqual({ text, alike: false });
    // Just inside the bounds.
    expect(jsonbReadsAlike(`{"d": ${"[".repeat(63)}0${"]".repeat(63)}}`)).toBe(true);
    expect(jsonbReadsAlike('{"d": 1e300}')).toBe(true);
    // A bracket inside a string is no nesting.
    expect(jsonbReadsAlike(JSON.stringify({ s: "[".repeat(100) }))).toBe(true);
  });
});
