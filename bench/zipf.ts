/**
 * Deterministic Zipf-distributed request paths for the working-set cases.
 * The same seed always yields the same sequence, so runs are comparable.
 */

/** mulberry32: a tiny seeded PRNG returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Returns a sampler of ranks 1..n with P(k) proportional to 1 / k^s (inverse CDF, binary search). */
export function zipfSampler(n: number, s: number, random: () => number): () => number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`zipf: n must be a positive integer, got ${n}`);
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 1; k <= n; k++) {
    sum += 1 / Math.pow(k, s);
    cdf[k - 1] = sum;
  }
  for (let i = 0; i < n; i++) cdf[i] = (cdf[i] ?? 0) / sum;
  return () => {
    const u = random();
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((cdf[mid] ?? 1) < u) lo = mid + 1;
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
export function zipfPaths(o: ZipfPathsOptions): string[] {
  const next = zipfSampler(o.keys, o.exponent, mulberry32(o.seed));
  const out = new Array<string>(o.samples);
  for (let i = 0; i < o.samples; i++) out[i] = `${o.prefix}${next()}`;
  return out;
}
