// captures/kit.toml and the capture comments: what each key means, and the refusals.
import { describe, expect, test } from "bun:test";
import { parseCapture, parseKit } from "../../src/bobbin/captures.ts";

describe("parseKit", () => {
  test("now, the instance, the secrets, and what a code source declares", () => {
    expect(
      parseKit(
        'now = 1714564800\ntimestamped = true\nbody_signed = false\n[instance]\nname = "acme"\n' +
          'settings = { a = 1 }\n[secrets]\nsecret = "kit-test"\n',
      ),
    ).toEqual({
      now: 1714564800,
      timestamped: true,
      body_signed: false,
      instance: { name: "acme", settings: { a: 1 } },
      secrets: { secret: "kit-test" },
      http: [],
    });
  });

  test("each mistake is named", () => {
    expect(() => parseKit("[secrets]\n")).toThrow("[instance] needs name");
    expect(() => parseKit('timestamped = "yes"\n[instance]\nname = "a"\n')).toThrow("timestamped is not true or false");
    expect(() => parseKit('colour = 1\n[instance]\nname = "a"\n')).toThrow("unknown key colour");
    expect(() => parseKit('[instance]\nname = "a"\n[secrets]\nsecret = 1\n')).toThrow("secrets.secret is not a string");
    expect(() => parseKit('[instance]\nname = "a"\n[[http]]\nstatus = 200\n')).toThrow("each [[http]] needs a url");
  });
});

describe("parseCapture", () => {
  test("the expectation lines, and a capture without one", () => {
    const c = parseCapture(
      "c.http",
      "# expect: 202 quarantined\n# expect-key: k\nPOST /hooks/a HTTP/1.1\nContent-Type: " +
        "application/json\n\nnot json\n",
    );
    expect(c.expect).toEqual({ status: 202, word: "quarantined", key: "k", eventType: undefined });
    expect(new TextDecoder().decode(c.request.body)).toBe("not json");
    expect(() => parseCapture("c.http", "POST /hooks/a HTTP/1.1\n\n{}")).toThrow('no "# expect: <status> [word]" line');
  });
});
