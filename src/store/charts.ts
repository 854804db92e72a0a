// The dashboard's charts as both backends answer them: bucketed series over a time range.
export interface Buckets {
  since: number;
  bucketS: number;
  count: number;
}

/** Per series name, one number per bucket (zeros where nothing happened). */
export type Series = Record<string, number[]>;
