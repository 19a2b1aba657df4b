/**
 * The benchmark cases, as data. Add a case by adding a row: which server it targets (a server
 * spec, started fresh for the case) and which requests the load generator sends (a workload).
 */

/** The cache block of one etagere upstream, as written into the generated YAML config. */
export interface CacheYaml {
  readonly policy: 'max-age' | 'revalidate' | 'ttl' | 'rfc9111' | 'none';
  readonly ttl_seconds?: number;
}

export type ServerSpec =
  /** bench/servers/ceiling.ts replaying the recorded repo response (in N processes with `workers`). */
  | {
      readonly kind: 'ceiling';
      readonly workers?: number;
      /** Hold `keys` distinct responses of its own, one per path `prefix` + 1..keys (ceiling.ts --distinct). */
      readonly distinct?: { readonly prefix: string; readonly keys: number };
    }
  /** nginx proxy_cache (with proxy_cache_revalidate, 2 worker processes) in front of the fake. */
  | { readonly kind: 'nginx' }
  /** The shared fake GitHub API itself (no proxy in between). */
  | { readonly kind: 'fake-upstream' }
  /**
   * A fresh etagere process with one upstream ("/" to the fake) using this cache block.
   * logLevel overrides the run's --log-level for this case.
   */
  | {
      readonly kind: 'etagere';
      readonly cache: CacheYaml;
      readonly logLevel?: string;
      /**
       * `token_pool: true` with the first `tokens` bench tokens (bench/bench-tokens.ts) and
       * `pool.equivalent`: one shared cache partition (true) or one per token (false).
       */
      readonly pool?: { readonly tokens: number; readonly equivalent: boolean };
      /** `consumers.enabled` with one key (CONSUMER_KEY); the load generator then sends it as X-Etagere-Key. */
      readonly consumerKeys?: boolean;
      /** Give the server its own fresh redis-server; `l1: false` leaves only L2. */
      readonly redis?: { readonly l1: boolean };
      /** `workers` in the config (node:cluster). */
      readonly workers?: number;
      /** The load generator sends `Accept-Encoding: gzip`, as Octokit, PyGithub, gh and browsers do (wrk sends none). */
      readonly gzipClients?: boolean;
      /** Another checkout to run etagere from (`--before DIR`): its src/ or dist/, with its own node_modules. */
      readonly root?: string;
    };

export type EtagereSpec = Extract<ServerSpec, { readonly kind: 'etagere' }>;

export type Workload =
  | { readonly kind: 'single'; readonly path: string }
  | {
      readonly kind: 'zipf';
      /** The rank is appended to this, e.g. "/repos/octocat/hello-world?z=". */
      readonly prefix: string;
      /** Distinct URLs. */
      readonly keys: number;
      readonly exponent: number;
      /** Length of the request sequence the generator cycles through. */
      readonly samples: number;
      readonly seed: number;
      /**
       * Before each run's warm-up, fetch every one of the `keys` URLs once, so that the measured
       * run sees a full cache rather than still fetching the tail.
       */
      readonly warmAll?: boolean;
    };

export interface BenchCase {
  /** Short id for --only. */
  readonly id: string;
  /** Name shown in the table (also accepted by --only). */
  readonly name: string;
  /** One line on what the case measures (README and --list). */
  readonly measures: string;
  readonly server: ServerSpec;
  readonly workload: Workload;
  /** Id of the case this one is compared with in the table's `vs ref` column (same round). */
  readonly compareTo?: string;
}

/** The consumer key of the consumer-key cases: a fixed bench value, not a secret. */
export const CONSUMER_KEY = { name: 'bench', value: 'bench-consumer-key-not-a-secret' } as const;

/** Request headers the load generator sends to a case's server. */
export function requestHeaders(spec: ServerSpec): Record<string, string> {
  if (spec.kind !== 'etagere') return {};
  return {
    ...(spec.consumerKeys === true ? { 'x-etagere-key': CONSUMER_KEY.value } : {}),
    ...(spec.gzipClients === true ? { 'accept-encoding': 'gzip' } : {}),
  };
}

/** The path every single-URL case requests. The ceiling replays this response. */
export const REPO_PATH = '/repos/octocat/hello-world';

/** The production configuration of the all-on cases. */
const ALL_ON: EtagereSpec = {
  kind: 'etagere',
  cache: { policy: 'max-age' },
  redis: { l1: true },
  pool: { tokens: 50, equivalent: false },
  consumerKeys: true,
  logLevel: 'info',
};

export const CASES: readonly BenchCase[] = [
  {
    id: 'ceiling',
    name: 'ceiling',
    measures: 'bare node:http server replaying one recorded repo response: the Node ceiling on this machine',
    server: { kind: 'ceiling' },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'ceiling-2w',
    name: 'ceiling, 2 workers',
    measures: 'the ceiling server in 2 processes (node:cluster) sharing the port: the multi-core ceiling',
    server: { kind: 'ceiling', workers: 2 },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'ceiling-zipf10k',
    name: 'ceiling, zipf10k paths',
    measures: 'the ceiling server driven by the Zipf 10k workload (wrk runs a Lua script per request): the fair baseline for l1-zipf10k',
    server: { kind: 'ceiling' },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1.0, samples: 200_000, seed: 0x5eed },
  },
  {
    id: 'ceiling-zipf10k-distinct',
    name: 'ceiling, zipf10k, 10k responses',
    measures:
      'the ceiling server holding 10,000 distinct responses (own body, own ETag), looked up by path, driven by the Zipf 10k workload: the least any in-process cache of that working set pays',
    server: { kind: 'ceiling', distinct: { prefix: `${REPO_PATH}?z=`, keys: 10_000 } },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1.0, samples: 200_000, seed: 0x5eed },
  },
  {
    id: 'nginx',
    name: 'nginx proxy_cache (2 workers)',
    measures:
      'nginx proxy_cache with proxy_cache_revalidate in front of the fake, 2 worker processes: what etagere is compared with (installed with apt when missing; skipped otherwise)',
    server: { kind: 'nginx' },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'fake-upstream',
    name: 'fake-upstream',
    measures: 'the fake GitHub API answered directly (what every cache miss costs upstream)',
    server: { kind: 'fake-upstream' },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'pass-through',
    name: 'etagere pass-through (policy none)',
    measures: 'etagere with cache policy none: routing, forwarding and streaming every request to the fake',
    server: { kind: 'etagere', cache: { policy: 'none' } },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'l1-hot',
    name: 'etagere L1 hot',
    measures: 'etagere with the default policy (max-age), one hot URL: the in-process (L1) cache hit path',
    server: { kind: 'etagere', cache: { policy: 'max-age' } },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'l1-hot-2w',
    name: 'etagere L1 hot, 2 workers',
    measures: 'as l1-hot with workers: 2 (node:cluster, each worker its own L1)',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, workers: 2 },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'ceiling-2w',
  },
  {
    id: 'l1-hot-pool',
    name: 'etagere L1 hot, token pool',
    measures: 'as l1-hot for anonymous consumers of a two-token pool: hits also carry the pool x-ratelimit-* and x-etagere-token',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, pool: { tokens: 2, equivalent: true } },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l2-hot',
    name: 'etagere L2 hot (L1 off)',
    measures: 'as l1-hot with the in-process cache off (cache.l1: false) and a local redis-server: every hit is one Redis GET and a decode',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, redis: { l1: false } },
    workload: { kind: 'single', path: REPO_PATH },
  },
  {
    id: 'l1-hot-redis',
    name: 'etagere L1 hot, Redis on',
    measures: 'as l1-hot with Redis configured: L1 hits must not touch Redis, so this should match l1-hot',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, redis: { l1: true } },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l1-hot-quiet',
    name: 'etagere L1 hot, log warn',
    measures: 'as l1-hot with log level warn (no access log line per request): what the access log costs',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, logLevel: 'warn' },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l1-hot-pool50',
    name: 'etagere L1 hot, 50 tokens not equivalent',
    measures: 'as l1-hot-pool with 50 pool tokens and pool.equivalent: false (one cache partition per token)',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, pool: { tokens: 50, equivalent: false } },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l1-hot-keys',
    name: 'etagere L1 hot, consumer keys',
    measures: 'as l1-hot-pool with consumer keys on (consumers.enabled); every request sends its X-Etagere-Key',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, pool: { tokens: 2, equivalent: true }, consumerKeys: true },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l1-hot-allon',
    name: 'etagere L1 hot, all on',
    measures:
      'the production configuration: Redis on (L1 and L2), 50 pool tokens not equivalent, consumer keys, access log at info whatever --log-level says',
    server: ALL_ON,
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'l1-hot',
  },
  {
    id: 'l1-hot-allon-2w',
    name: 'etagere L1 hot, all on, 2 workers',
    measures: 'as l1-hot-allon with workers: 2 (one Redis shared by both workers), compared with the 2-worker ceiling (nginx beside it)',
    server: { ...ALL_ON, workers: 2 },
    workload: { kind: 'single', path: REPO_PATH },
    compareTo: 'ceiling-2w',
  },
  {
    id: 'l1-zipf10k',
    name: 'etagere L1 zipf10k',
    measures: 'default policy, 10,000 distinct URLs drawn from Zipf(s=1.0): a realistic working set with misses',
    server: { kind: 'etagere', cache: { policy: 'max-age' } },
    workload: {
      kind: 'zipf',
      prefix: `${REPO_PATH}?z=`,
      keys: 10_000,
      exponent: 1.0,
      samples: 200_000,
      seed: 0x5eed,
    },
    compareTo: 'ceiling-zipf10k',
  },
  {
    id: 'l1-zipf10k-warm',
    name: 'etagere L1 zipf10k, warmed',
    measures:
      'as l1-zipf10k after a warm-up that first fetches all 10,000 URLs once: the hit path over a large working set, without the misses',
    server: { kind: 'etagere', cache: { policy: 'max-age' } },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1.0, samples: 200_000, seed: 0x5eed, warmAll: true },
    compareTo: 'ceiling-zipf10k',
  },
  {
    id: 'l1-zipf10k-warm-gzip',
    name: 'etagere L1 zipf10k, warmed, gzip clients',
    measures:
      'as l1-zipf10k-warm with the load generator sending Accept-Encoding: gzip: the stored gzip bytes go out as they are (no decoded form), as for Octokit, PyGithub, gh and browsers',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, gzipClients: true },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1.0, samples: 200_000, seed: 0x5eed, warmAll: true },
    compareTo: 'ceiling-zipf10k',
  },
  {
    id: 'l1-zipf10k-2w',
    name: 'etagere L1 zipf10k, 2 workers',
    measures: 'as l1-zipf10k with workers: 2',
    server: { kind: 'etagere', cache: { policy: 'max-age' }, workers: 2 },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1.0, samples: 200_000, seed: 0x5eed },
  },
  {
    id: 'miss',
    name: 'etagere miss',
    measures: 'default policy, 1,000,000 distinct URLs drawn uniformly: nearly every request a miss (upstream fetch, store, serve)',
    server: { kind: 'etagere', cache: { policy: 'max-age' } },
    workload: { kind: 'zipf', prefix: `${REPO_PATH}?m=`, keys: 1_000_000, exponent: 0, samples: 200_000, seed: 0x5eed },
  },
  {
    id: 'revalidate',
    name: 'etagere revalidation (304)',
    measures: 'cache policy revalidate: every request revalidates upstream (If-None-Match, 304) then serves the cached body',
    server: { kind: 'etagere', cache: { policy: 'revalidate' } },
    workload: { kind: 'single', path: REPO_PATH },
  },
];

/** Cases selected by `--only` (ids or names, comma-separated); all cases when `only` is undefined. */
/**
 * With `before` (another checkout), each etagere case is followed by the same case run from that
 * checkout (`<id>-before`), measured in the same rounds; its `vs ref` is before / after.
 */
export function withBefore(cases: readonly BenchCase[], before: string | undefined): BenchCase[] {
  if (before === undefined) return [...cases];
  return cases.flatMap((benchCase) => {
    const { server, id, name } = benchCase;
    if (server.kind !== 'etagere') return [benchCase];
    return [benchCase, { ...benchCase, id: `${id}-before`, name: `${name} (before)`, server: { ...server, root: before }, compareTo: id }];
  });
}

export function selectCases(only: string | undefined): BenchCase[] {
  if (only === undefined || only.trim() === '') return [...CASES];
  const wanted = only
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
  const unknown = wanted.filter((w) => !CASES.some((c) => c.id === w || c.name.toLowerCase() === w));
  if (unknown.length > 0) {
    throw new Error(`unknown case(s): ${unknown.join(', ')}; known: ${CASES.map((c) => c.id).join(', ')}`);
  }
  return CASES.filter((c) => wanted.includes(c.id) || wanted.includes(c.name.toLowerCase()));
}
