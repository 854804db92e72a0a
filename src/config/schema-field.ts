// What the config table is made of: a key's type, its field record, and the builders the
// tables use for the common cases (a string, an integer with bounds, a number, a boolean).

export type FieldType =
  | { kind: "string"; choices?: readonly string[] }
  | { kind: "int"; min?: number; max?: number }
  | { kind: "number"; min?: number }
  | { kind: "bool" }
  | { kind: "strings" } // an array of strings
  | { kind: "stringMap" } // a table of string values
  | { kind: "scalarMap" } // a table of string, number or boolean values
  | { kind: "secret" } // a secret reference: { file }, { env } or { env_file, key }
  | { kind: "secrets" } // secret reference, or an array of them (rotation)
  | { kind: "secretMap" } // a table of name -> secret reference
  | { kind: "table" } // a table whose shape its owner checks (a template, settings)
  | { kind: "section"; fields: Fields } // a nested table with fixed keys
  // name -> table with fixed keys (closed: an unknown key is an error)
  | { kind: "map"; entry: Fields; closed?: boolean }
  | { kind: "array"; entry: Fields }; // an array of tables with fixed keys

export interface Field {
  type: FieldType;
  /** The default applied when the key is absent (undefined: no default, the key stays unset). */
  default?: unknown;
  /** One line for the starter config and the reference. */
  doc: string;
  /** The environment variable that overrides it. */
  env?: string;
  required?: boolean;
  /** A section that stays unset when the file leaves it out (its defaults apply only once it is there). */
  optional?: boolean;
}

export type Fields = Record<string, Field>;

export const str = (doc: string, def?: string, extra: Partial<Field> = {}): Field => ({
  type: { kind: "string" },
  default: def,
  doc,
  ...extra,
});
export const int = (doc: string, def?: number, min = 0, max?: number): Field => ({
  type: max === undefined ? { kind: "int", min } : { kind: "int", min, max },
  default: def,
  doc,
});

export const num = (doc: string, def?: number, min = 0): Field => ({
  type: { kind: "number", min },
  default: def,
  doc,
});
export const bool = (doc: string, def?: boolean): Field => ({ type: { kind: "bool" }, default: def, doc });
