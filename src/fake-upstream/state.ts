/**
 * Everything one fake upstream instance holds: runtime configuration, the world, credentials,
 * quotas, secondary-limit mode, statistics and the response caches. reset() puts it back to the
 * seed (configuration is kept unless asked to restore it).
 */
import { World } from './data.js';
import { Credentials } from './auth.js';
import { Faults } from './faults.js';
import { Quotas } from './quota.js';
import { Secondary } from './secondary.js';
import { Stats } from './stats.js';
import type { FakeToken } from './tokens.js';

export interface RuntimeConfig {
  anonymousLimit: number;
  tokenLimit: number;
  windowSeconds: number;
  /** `search` per token and window (30); anonymous callers get at most 10. */
  searchLimit: number;
  /** `code_search` per token and window (10). */
  codeSearchLimit: number;
  /** `graphql` points per token and window (5000; one per request). */
  graphqlLimit: number;
  /** Window of `search` and `code_search` (60 s). */
  searchWindowSeconds: number;
  latencyMs: number;
  /** Maximum requests in flight before secondary-limit answers; 0 = off. */
  enforceConcurrency: number;
}

/** The budgets added with rate-limit resources: optional when a state is built, GitHub's sizes by default. */
type ResourceSettings = 'searchLimit' | 'codeSearchLimit' | 'graphqlLimit' | 'searchWindowSeconds';
export type RuntimeConfigInput = Omit<RuntimeConfig, ResourceSettings> & Partial<Pick<RuntimeConfig, ResourceSettings>>;

/** GitHub's sizes: search 30 and code search 10 a minute, 5000 GraphQL points an hour. */
export const RESOURCE_DEFAULTS: Pick<RuntimeConfig, ResourceSettings> = {
  searchLimit: 30,
  codeSearchLimit: 10,
  graphqlLimit: 5000,
  searchWindowSeconds: 60,
};

/** A cached, fully rendered response body with its validators. */
export interface Rendered {
  body: Buffer;
  hash: string;
  lastModified: number;
  link: string | null;
}

const LIST_CACHE_MAX = 5000;

/** The settings whose change restarts every quota window. */
const QUOTA_SETTINGS = [
  'anonymousLimit',
  'tokenLimit',
  'windowSeconds',
  'searchLimit',
  'codeSearchLimit',
  'graphqlLimit',
  'searchWindowSeconds',
] as const;

export class FakeState {
  config: RuntimeConfig;
  world: World;
  readonly credentials: Credentials;
  readonly quotas: Quotas;
  readonly secondary = new Secondary();
  /** Fault injection rules (POST /__fake/faults, --faults). */
  readonly faults = new Faults();
  readonly stats = new Stats();
  /** Rendered list pages, keyed by path+query, viewer, base, version and world generation. */
  private listCache = new Map<string, Rendered>();

  private readonly initialConfig: RuntimeConfig;

  constructor(
    initialConfig: RuntimeConfigInput,
    readonly tokens: FakeToken[],
    readonly orgRepoCount: number,
  ) {
    this.initialConfig = { ...RESOURCE_DEFAULTS, ...initialConfig };
    this.config = { ...this.initialConfig };
    this.world = new World({ orgRepoCount, tokens });
    this.credentials = new Credentials(tokens);
    this.quotas = new Quotas(this.config);
  }

  /** Stats, quotas, secondary mode, fault rules and mutations back to the seed; optionally the configuration too. */
  reset(restoreConfig = false): void {
    if (restoreConfig) this.config = { ...this.initialConfig };
    this.world = new World({ orgRepoCount: this.orgRepoCount, tokens: this.tokens });
    this.listCache = new Map();
    this.quotas.configure(this.config);
    this.secondary.reset();
    this.credentials.restoreAll();
    this.faults.clear();
    this.stats.reset();
  }

  /** Applies a partial configuration; quota windows start afresh when a quota setting changes. */
  configure(patch: Partial<RuntimeConfig>): void {
    const quotaChanged = QUOTA_SETTINGS.some((key) => patch[key] !== undefined);
    this.config = { ...this.config, ...patch };
    if (quotaChanged) this.quotas.configure(this.config);
  }

  /** Called after a mutation: cached list pages are stale. */
  invalidateLists(): void {
    this.listCache = new Map();
  }

  cachedList(key: string): Rendered | undefined {
    return this.listCache.get(key);
  }

  storeList(key: string, value: Rendered): void {
    if (this.listCache.size >= LIST_CACHE_MAX) this.listCache.clear();
    this.listCache.set(key, value);
  }
}
