// Walks a parsed TOML document against the schema table: types, defaults, unknown keys.
import { closest } from "../spelling.ts";
import type { ConfigProblem } from "./types.ts";
import type { Field, FieldType, Fields } from "./schema.ts";

type Table = Record<string, unknown>;

export function isTable(v: unknown): v is Table {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v instanceof Date) return "a date";
  if (v === null) return "null";
  if (isTable(v)) return "a table";
  return `a ${typeof v}`;
}

/** Parse-time context: the problems found so far. Unknown keys are warnings here; `check` escalates them. */
export class Problems {
  readonly list: ConfigProblem[] = [];
  error(key: string, message: string, hint?: string): void {
    this.list.push({ level: "error", key, message, hint });
  }
  warn(key: string, message: string, hint?: string): void {
    this.list.push({ level: "warning", key, message, hint });
  }
  get errors(): ConfigProblem[] {
    return this.list.filter((p) => p.level === "error");
  }
}

const SECRET_SHAPES = 'a secret reference: { file = "..." }, { env = "NAME" } or { env_file = "...", key = "NAME" }';

function parseSecretRef(v: unknown, key: string, p: Problems): unknown {
  if (!isTable(v)) {
    p.error(key, `expected ${SECRET_SHAPES}, got ${describe(v)}`, "secrets are references, never values");
    return undefined;
  }
  const keys = Object.keys(v).sort().join(",");
  const allString = Object.values(v).every((x) => typeof x === "string" && x !== "");
  if (allString && (keys === "file" || keys === "env" || keys === "env_file,key")) return { ...v };
  p.error(key, `expected ${SECRET_SHAPES}`, "secrets are references, never values");
  return undefined;
}

/**
 * A rotation: references newest first, an older one with the instant it stops being used
 * (`until`, an RFC 3339 time, quoted or as a TOML date-time).
 */
function parseRotation(list: unknown[], key: string, p: Problems): unknown {
  if (list.length === 0) return p.error(key, "a rotation's list needs at least one secret reference");
  if (list.length > 4) return p.error(key, "a rotation's list holds at most 4 secret references");
  return list.map((x, i) => {
    const at = `${key}[${i}]`;
    if (!isTable(x) || !("until" in x)) return parseSecretRef(x, at, p);
    const { until, ...ref } = x;
    const t = until instanceof Date ? until.getTime() : typeof until === "string" ? Date.parse(until) : Number.NaN;
    if (
      !Number.isFinite(t) ||
      (typeof until === "string" && !/^\d{4}-\d{2}-\d{2}T[0-9:.]+(Z|[+-]\d{2}:\d{2})$/.test(until))
    )
      return p.error(`${at}.until`, 'expected an RFC 3339 time with its zone, e.g. "2026-12-08T00:00:00Z"');
    const parsed = parseSecretRef(ref, at, p);
    return parsed === undefined ? undefined : { ...(parsed as object), until: t / 1000 };
  });
}

function parseValue(v: unknown, type: FieldType, key: string, p: Problems): unknown {
  switch (type.kind) {
    case "string":
      if (typeof v !== "string") return p.error(key, `expected a string, got ${describe(v)}`);
      if (type.choices && !type.choices.includes(v))
        return p.error(key, `expected one of ${type.choices.join(", ")}, got "${v}"`);
      return v;
    case "int":
      if (typeof v !== "number" || !Number.isInteger(v)) return p.error(key, `expected an integer, got ${describe(v)}`);
      if (type.min !== undefined && v < type.min) return p.error(key, `expected an integer >= ${type.min}, got ${v}`);
      if (type.max !== undefined && v > type.max) return p.error(key, `expected an integer <= ${type.max}, got ${v}`);
      return v;
    case "number":
      if (typeof v !== "number" || !Number.isFinite(v)) return p.error(key, `expected a number, got ${describe(v)}`);
      if (type.min !== undefined && v < type.min) return p.error(key, `expected a number >= ${type.min}, got ${v}`);
      return v;
    case "bool":
      if (typeof v !== "boolean") return p.error(key, `expected true or false, got ${describe(v)}`);
      return v;
    case "strings":
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string"))
        return p.error(key, `expected an array of strings, got ${describe(v)}`);
      return [...v];
    case "stringMap":
    case "scalarMap": {
      if (!isTable(v)) return p.error(key, `expected a table, got ${describe(v)}`);
      const ok = (x: unknown) =>
        typeof x === "string" || (type.kind === "scalarMap" && (typeof x === "number" || typeof x === "boolean"));
      for (const [k, x] of Object.entries(v)) {
        if (!ok(x))
          p.error(
            `${key}.${quoteKey(k)}`,
            `expected ${type.kind === "stringMap" ? "a string" : "a string, number or boolean"}, got ${describe(x)}`,
          );
      }
      return { ...v };
    }
    case "secret":
      return parseSecretRef(v, key, p);
    case "secrets":
      if (Array.isArray(v)) return v.map((x, i) => parseSecretRef(x, `${key}[${i}]`, p));
      return parseSecretRef(v, key, p);
    case "secretMap": {
      if (!isTable(v)) return p.error(key, `expected a table of secret references, got ${describe(v)}`);
      const out: Table = {};
      for (const [k, x] of Object.entries(v))
        out[k] = Array.isArray(x) ? parseRotation(x, `${key}.${k}`, p) : parseSecretRef(x, `${key}.${k}`, p);
      return out;
    }
    case "table":
      if (!isTable(v)) return p.error(key, `expected a table, got ${describe(v)}`);
      return v;
    case "section":
      if (!isTable(v)) return p.error(key, `expected a table, got ${describe(v)}`);
      return parseFields(v, type.fields, key, p);
    case "map": {
      if (!isTable(v)) return p.error(key, `expected a table of named tables, got ${describe(v)}`);
      const out: Table = {};
      for (const [name, entry] of Object.entries(v)) {
        const path = `${key}.${quoteKey(name)}`;
        // out[name] = ... with this name would set the prototype: the table would vanish.
        if (name === "__proto__") {
          p.error(path, "__proto__ cannot be a name");
          continue;
        }
        if (!isTable(entry)) {
          p.error(path, `expected a table, got ${describe(entry)}`);
          continue;
        }
        out[name] = parseFields(entry, type.entry, path, p, type.closed === true);
      }
      return out;
    }
    case "array": {
      if (!Array.isArray(v)) return p.error(key, `expected an array of tables ([[${key}]]), got ${describe(v)}`);
      return v.map((entry, i) => {
        const path = `${key}[${i}]`;
        if (!isTable(entry)) return p.error(path, `expected a table, got ${describe(entry)}`);
        return parseFields(entry, type.entry, path, p);
      });
    }
  }
}

/** A key as it is written in a TOML path: bare when it can be, quoted otherwise. */
export function quoteKey(name: string): string {
  return /^[A-Za-z0-9_-]+$/.test(name) ? name : JSON.stringify(name);
}

function defaultOf(field: Field): unknown {
  if (field.default === undefined) return undefined;
  return structuredClone(field.default);
}

/** Parse one table: known keys typed, defaults filled, unknown keys reported. */
export function parseFields(table: Table, fields: Fields, path: string, p: Problems, closed = false): Table {
  const out: Table = {};
  for (const [name, value] of Object.entries(table)) {
    // hasOwn: a key such as constructor or toString is unknown, not Object.prototype's.
    const field = Object.hasOwn(fields, name) ? fields[name] : undefined;
    const key = path ? `${path}.${quoteKey(name)}` : quoteKey(name);
    if (!field) {
      if (closed) p.error(key, "unknown key", closest(name, Object.keys(fields)));
      else p.warn(key, "unknown key", closest(name, Object.keys(fields)));
      continue;
    }
    const parsed = parseValue(value, field.type, key, p);
    if (parsed !== undefined) out[name] = parsed;
  }
  for (const [name, field] of Object.entries(fields)) {
    if (name in out) continue;
    if (field.required && !(name in table)) {
      p.error(path ? `${path}.${name}` : name, "is required");
      continue;
    }
    if (field.type.kind === "section") {
      // An optional section left out stays unset (a source's pull table): its keys say what it is.
      if (!field.optional) out[name] = parseFields({}, field.type.fields, path ? `${path}.${name}` : name, p);
    } else if (field.type.kind === "map") {
      out[name] = {};
    } else if (field.type.kind === "array") {
      out[name] = [];
    } else if (!(name in table)) {
      const d = defaultOf(field);
      if (d !== undefined) out[name] = d;
    }
  }
  return out;
}
