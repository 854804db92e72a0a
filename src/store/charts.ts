// TODO header
export interface Buckets {
  since: number;
  bucketS: number;
  count: number;
}

/** Per series name, one number per bucket (zeros where nothing happened). */
export type Series = Record<string, number[]>;
