// Shared by the config tests: parse a config text as if read from one file, and catch errors.
import { expect } from "bun:test";
import { parseConfig } from "../../src/config/load.ts";
import type { Config, ConfigProblem } from "../../src/config/types.ts";

/** The file name every parsed text pretends to come from; error messages must name it. */
export const FILE = "/etc/hookspool/config.toml";

export function parse(text: string, strict = false): { config: Config; problems: ConfigProblem[] } {
  return parseConfig(text, FILE, { strict });
}

/** The config a text gives, asserting it loads without a single problem. */
export function clean(text: string): Config {
  const { config, problems } = parse(text);
  expect(problems).toEqual([]);
  return config;
}

/** The error `fn` throws, checked to be a `cls`; fails the test when `fn` returns. */
export function thrownBy<E>(cls: new (...args: never[]) => E, fn: () => unknown): E {
  let caught: unknown;
  let threw = false;
  try {
    fn();
  } catch (e) {
    caught = e;
    threw = true;
  }
  if (!threw) throw new Error("expected the call to throw, it returned");
  expect(caught).toBeInstanceOf(cls);
  return caught as E;
}
