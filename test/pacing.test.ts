// A destination's rate: the grammar config writes it in, the rolling window over attempts' hits
// (in flight, or ended within the window), when the next slot comes free, and how many hits an
// attempt reserves and made.
import { describe, expect, test } from "bun:test";
import { hitsMade, hitsNeeded, parseRate, rateMarginS, windowState } from "../src/pacing.ts";

describe("parseRate", () => {
  const cases: [string, { limit: number; windowS: number } | null][] = [
    ["30/min", { limit: 30, windowS: 60 }],
    ["5/s", { limit: 5, windowS: 1 }],
    ["1000/h", { limit: 1000, windowS: 3600 }],
    ["30/10s", { limit: 30, windowS: 10 }],
    ["2 / 1.5 min", { limit: 2, windowS: 90 }],
    ["12 per hour", { limit: 12, windowS: 3600 }],
    ["none", null],
    ["OFF", null],
  ];
  for (const [text, want] of cases) test(`"${text}"`, () => expect(parseRate(text)).toEqual(want));

  const bad: [string, RegExp][] = [
    ["30", /is not a rate/],
    ["30/fortnight", /unit is s, min or h/],
    ["0/min", /at least 1/],
    ["-1/min", /is not a rate/],
    ["3/0s", /more than 0 s/],
    ["3/2d", /unit is s, min or h/],
    ["3/25h", /at most a day/],
    ["", /is not a rate/],
  ];
  for (const [text, why] of bad) test(`refuses "${text}"`, () => expect(() => parseRate(text)).toThrow(why));
});

describe("the window", () => {
  const rate = { limit: 3, windowS: 60 };
  const m = rateMarginS(rate);

  test("counts hits in flight and those that ended within the window plus its margin", () => {
    const now = 1000;
    const hits = [
      { hits: 1, finishedAt: null },
      { hits: 1, finishedAt: now - 30 },
      { hits: 5, finishedAt: now - 60 - m - 0.001 }, // left the window
    ];
    expect(windowState(rate, hits, now)).toEqual({ used: 2, room: 1, nextFreeAt: null });
  });

  test("full: the next slot comes when the oldest ended hit leaves it", () => {
    const hits = [
      { hits: 1, finishedAt: 950 },
      { hits: 1, finishedAt: 990 },
      { hits: 1, finishedAt: null },
    ];
    expect(windowState(rate, hits, 1000)).toEqual({ used: 3, room: 0, nextFreeAt: 950 + 60 + m });
    // Just before that instant the window is still full; at it, there is room.
    expect(windowState(rate, hits, 950 + 60 + m - 0.01).room).toBe(0);
    expect(windowState(rate, hits, 950 + 60 + m + 0.01).room).toBe(1);
  });

  test("filled by attempts in flight only: no instant to name, their ends will free it", () => {
    expect(windowState(rate, [{ hits: 3, finishedAt: null }], 1000)).toEqual({
      used: 3,
      room: 0,
      nextFreeAt: Number.POSITIVE_INFINITY,
    });
  });

  test("an attempt that needs several hits waits until that many are free", () => {
    const hits = [
      { hits: 1, finishedAt: 950 },
      { hits: 1, finishedAt: 970 },
    ];
    expect(windowState(rate, hits, 1000, 1).nextFreeAt).toBeNull();
    expect(windowState(rate, hits, 1000, 2)).toEqual({ used: 2, room: 1, nextFreeAt: 950 + 60 + m });
    expect(windowState(rate, hits, 1000, 3)).toEqual({ used: 2, room: 1, nextFreeAt: 970 + 60 + m });
  });

  test("the margin is 2 % of the window, at most a second", () => {
    expect(rateMarginS({ limit: 1, windowS: 10 })).toBeCloseTo(0.2);
    expect(rateMarginS({ limit: 1, windowS: 3600 })).toBe(1);
  });
});

describe("hits", () => {
  test("reserved: one for a document, one per event with unwrap, never past the limit, never none", () => {
    const rate = { limit: 30, windowS: 60 };
    expect(hitsNeeded(rate, false, 400)).toBe(1);
    expect(hitsNeeded(rate, true, 7)).toBe(7);
    expect(hitsNeeded(rate, true, 400)).toBe(30);
    expect(hitsNeeded(rate, true, 0)).toBe(1);
  });

  test("made: every request sent but one answered 429", () => {
    expect(hitsMade(202, null, true)).toBe(1);
    expect(hitsMade(429, null, false)).toBe(0);
    expect(hitsMade(503, null, false)).toBe(1);
    expect(hitsMade(null, null, false)).toBe(1); // no answer: it may have been counted
    // Unwrap: the requests this attempt sent, the last one answered 429 left out.
    expect(hitsMade(202, 4, true)).toBe(4);
    expect(hitsMade(429, 3, false)).toBe(2);
    expect(hitsMade(500, 3, false)).toBe(3);
    expect(hitsMade(null, 0, false)).toBe(0);
  });
});
