/**
 * Everything one fake upstream instance holds: runtime configuration, the world, credentials,
 * quotas, secondary-limit mode, statistics and the response caches. reset() puts it back to the
 * seed (configuration is kept unless asked to restore it).
 */
import { WebhookSender } from './webhooks.js';
import type { FakeAppInput } from './app-spec.js';
import { AppRegistry } from './apps.js';
import { Blobs } from './blobs.js';
import { World } from './data.js';
import { Credentials, type Credential } from './auth.js';
import { Faults } from './faults.js';
import { Quotas } from './quota.js';
import { Secondary } from './secondary.js';
import { Stats } from './stats.js';
import type { Rendered } from './etag.js';
import type { FakeToken } from './tokens.js';

export interface RuntimeConfig {
  anonymousLimit: number;
  tokenLimit: number;
  windowSeconds: number;
  /** `search` per token and window (30); anonymous callers get at most 10. */
  searchLimit: number;
  /** `code_search` per token and window (10). */
  codeSearchLimit: number;
  /** `graphql` points per token and window (5000; a call costs its points, graphql-cost.ts). */
  graphqlLimit: number;
  /** Window of `search` and `code_search` (60 s). */
  searchWindowSeconds: number;
  latencyMs: number;
  /** Maximum requests in flight before secondary-limit answers; 0 = off. */
  enforceConcurrency: number;
  /** Secondary-limit points per credential per minute enforced (secondary.ts); off by default. */
  enforcePoints: boolean;
  /** REST points a credential may spend in any minute (GitHub: 900). */
  pointsPerMinute: number;
  /** GraphQL points a credential may spend in any minute (GitHub: 2,000). */
  graphqlPointsPerMinute: number;
  /** Lifetime of a GitHub App installation token (GitHub: one hour). */
  installationTokenSeconds: number;
  /**
   * Primary rate limits on (GitHub's). Off: as GitHub Enterprise Server with rate limiting off (its
   * default): GET /rate_limit answers 404, no answer carries x-ratelimit-*, no primary quota is spent
   * to the end (secondary limits and faults still apply).
   */
  rateLimits: boolean;
  /**
   * Resource and list answers (200 and 304) carry `no-transform` in their Cache-Control, as an
   * origin that forbids intermediaries to change the content coding (RFC 9110 section 7.7).
   */
  noTransform: boolean;
}

/** Settings added after the first ones: optional when a state is built, GitHub's values by default. */
type ResourceSettings =
  | 'searchLimit'
  | 'codeSearchLimit'
  | 'graphqlLimit'
  | 'searchWindowSeconds'
  | 'installationTokenSeconds'
  | 'rateLimits'
  | 'noTransform'
  | 'enforcePoints'
  | 'pointsPerMinute'
  | 'graphqlPointsPerMinute';
export type RuntimeConfigInput = Omit<RuntimeConfig, ResourceSettings> & Partial<Pick<RuntimeConfig, ResourceSettings>>;

/** GitHub's sizes: search 30 and code search 10 a minute, 5000 GraphQL points an hour. */
export const RESOURCE_DEFAULTS: Pick<RuntimeConfig, ResourceSettings> = {
  searchLimit: 30,
  codeSearchLimit: 10,
  graphqlLimit: 5000,
  searchWindowSeconds: 60,
  installationTokenSeconds: 3600,
  rateLimits: true,
  enforcePoints: false,
  pointsPerMinute: 900,
  graphqlPointsPerMinute: 2000,
  noTransform: false,
};

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
  'rateLimits',
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
  /** GitHub Apps, their installations and installation tokens. */
  readonly apps: AppRegistry;
  /** Webhooks for the fake's changes (webhooks.ts); configured by index.ts and POST /__fake/webhooks. */
  readonly webhooks = new WebhookSender();
  /** Blobs added at run time (POST /__fake/blobs) and rendered blob answers (blobs.ts). */
  readonly blobs = new Blobs();
  /** Rendered list pages, keyed by path+query, viewer, base, version and world generation. */
  private listCache = new Map<string, Rendered>();

  private readonly initialConfig: RuntimeConfig;

  /**
   * `basePath` ("" or e.g. "/api/v3", base-path.ts) is where the API is served; `apps` the GitHub
   * Apps of the start (an AppSpecError when one is wrong).
   */
  constructor(
    initialConfig: RuntimeConfigInput,
    readonly tokens: FakeToken[],
    readonly orgRepoCount: number,
    apps: readonly FakeAppInput[] = [],
    readonly basePath = '',
  ) {
    this.initialConfig = { ...RESOURCE_DEFAULTS, ...initialConfig };
    this.config = { ...this.initialConfig };
    this.world = new World({ orgRepoCount, tokens });
    this.credentials = new Credentials(tokens);
    this.apps = new AppRegistry(apps, () => this.world);
    this.quotas = new Quotas(this.config, (key) => this.apps.quotaLimit(key));
  }

  /** Who an Authorization header names: a configured token first, else an App's JWT or installation token. */
  resolveCredential(header: string | undefined, nowMs = Date.now()): Credential {
    const cred = this.credentials.resolve(header);
    if (cred.kind !== 'invalid' || header === undefined) return cred;
    return this.apps.authenticate(header, nowMs) ?? cred;
  }

  /** Stats, quotas, secondary mode, fault rules and mutations back to the seed; optionally the configuration too. */
  reset(restoreConfig = false): void {
    if (restoreConfig) this.config = { ...this.initialConfig };
    this.world = new World({ orgRepoCount: this.orgRepoCount, tokens: this.tokens });
    this.listCache = new Map();
    this.blobs.clear();
    this.quotas.configure(this.config);
    this.secondary.reset();
    this.credentials.restoreAll();
    this.apps.reset();
    this.faults.clear();
    this.stats.reset();
    this.webhooks.forget();
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
