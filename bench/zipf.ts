/**
 * Deterministic Zipf-distributed request paths for the working-set cases.
 * The same seed always yields the same sequence, so runs are comparable.
 */

import { mulberry32 } from '../fake-github/faults.js';

/** mulberry32: a tiny seeded PRNG returning floats in [0, 1) (the fake's, whose fault dice use it). */
export { mulberry32 };

/** Returns a sampler of ranks 1..rankCount with P(k) proportional to 1 / k^exponent (inverse CDF, binary search). */
export function zipfSampler(rankCount: number, exponent: number, random: () => number): () => number {
  if (!Number.isInteger(rankCount) || rankCount < 1) throw new RangeError(`zipf: n must be a positive integer, got ${rankCount}`);
  const cdf = new Float64Array(rankCount);
  let sum = 0;
  for (let k = 1; k <= rankCount; k++) {
    sum += 1 / Math.pow(k, exponent);
    cdf[k - 1] = sum;
  }
  for (let i = 0; i < rankCount; i++) cdf[i] = (cdf[i] ?? 0) / sum;
  return () => {
    const uniform = random();
    let lo = 0;
    let hi = rankCount - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((cdf[mid] ?? 1) < uniform) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  };
}

export interface ZipfPathsOptions {
  /** Path the rank is appended to, e.g. "/repos/octocat/hello-world?z=". */
  readonly prefix: string;
  /** Number of distinct URLs (ranks 1..keys). */
  readonly keys: number;
  /** Zipf exponent; 1.0 is the classic web-cache workload. */
  readonly exponent: number;
  /** Length of the generated request sequence. */
  readonly samples: number;
  readonly seed: number;
}

/** The request sequence: `samples` paths drawn from the Zipf distribution. */
export function zipfPaths(options: ZipfPathsOptions): string[] {
  const next = zipfSampler(options.keys, options.exponent, mulberry32(options.seed));
  const out = new Array<string>(options.samples);
  for (let i = 0; i < options.samples; i++) out[i] = `${options.prefix}${next()}`;
  return out;
}
