/**
 * Primary rate limits: one fixed window per credential and per rate-limit resource (anonymous
 * callers per client address, each token on its own). GitHub keeps a separate budget per resource:
 * `core` (most of REST), `search` (`/search/*` but code), `code_search` (`/search/code`), `graphql`,
 * and a few others that the fake only reports. A window starts at its first use and lasts the
 * resource's window length; `x-ratelimit-reset` is its end in epoch seconds. Spending never goes
 * past the limit, so limit = remaining + used always holds. With `rateLimits: false` (GitHub
 * Enterprise Server's default) every window is too large to spend to the end.
 */

/** Every resource GitHub's GET /rate_limit lists, in its order. */
export const RESOURCES = [
  'core',
  'search',
  'code_search',
  'graphql',
  'integration_manifest',
  'dependency_snapshots',
  'code_scanning_upload',
  'actions_runner_registration',
  'source_import',
  'audit_log',
] as const;
export type Resource = (typeof RESOURCES)[number];

export interface QuotaSettings {
  anonymousLimit: number;
  tokenLimit: number;
  windowSeconds: number;
  /** `search` per token and window (GitHub: 30 a minute); anonymous callers get at most 10. */
  searchLimit: number;
  /** `code_search` per token and window (GitHub: 10 a minute). */
  codeSearchLimit: number;
  /** `graphql` points per token and window (GitHub: 5000 an hour); anonymous callers get none. */
  graphqlLimit: number;
  /** Window of `search` and `code_search` (GitHub: 60 s). */
  searchWindowSeconds: number;
  /** Primary rate limits on (default); off: no window ever runs out. */
  rateLimits?: boolean;
}

/** A window's size when rate limits are off: never spent to the end. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

/** The resources the fake only reports in /rate_limit (GitHub's documented sizes, an hour each). */
const REPORTED_ONLY: Readonly<Record<string, number>> = {
  integration_manifest: 5000,
  dependency_snapshots: 100,
  code_scanning_upload: 1000,
  actions_runner_registration: 10000,
  source_import: 100,
  audit_log: 1750,
};

/** Anonymous callers' search budget (GitHub: 10 a minute). */
const ANONYMOUS_SEARCH = 10;

/** The resource of an API path (below the base): GitHub's own classification. */
export function resourceOfPath(path: string): Resource {
  if (path === '/search/code' || path.startsWith('/search/code/')) return 'code_search';
  if (path === '/search' || path.startsWith('/search/')) return 'search';
  if (path === '/graphql') return 'graphql';
  return 'core';
}

export interface QuotaWindow {
  limit: number;
  used: number;
  endMs: number;
  /** Epoch seconds of the window end. */
  reset: number;
  resource: Resource;
}

export interface QuotaSnapshot {
  limit: number;
  remaining: number;
  used: number;
  reset: number;
  resource: Resource;
}

export class Quotas {
  private readonly windows = new Map<string, QuotaWindow>();

  /**
   * `limitOf(key)` may give a key its own `core` and `graphql` budget (a GitHub App installation's
   * rate limit, apps.ts); other keys get the settings' sizes.
   */
  constructor(
    private settings: QuotaSettings,
    private readonly limitOf: (key: string) => number | undefined = () => undefined,
  ) {}

  /** Changes the limits; every window starts afresh (documented). */
  configure(settings: QuotaSettings): void {
    this.settings = settings;
    this.windows.clear();
  }

  reset(): void {
    this.windows.clear();
  }

  /** A window's size and length for a key and resource. */
  private shape(key: string, resource: Resource, anonymous: boolean): { limit: number; seconds: number } {
    const set = this.settings;
    if (set.rateLimits === false) return { limit: NO_LIMIT, seconds: set.windowSeconds };
    if (!anonymous && (resource === 'core' || resource === 'graphql')) {
      const own = this.limitOf(key);
      if (own !== undefined) return { limit: own, seconds: set.windowSeconds };
    }
    switch (resource) {
      case 'core':
        return { limit: anonymous ? set.anonymousLimit : set.tokenLimit, seconds: set.windowSeconds };
      case 'search':
        return { limit: anonymous ? Math.min(ANONYMOUS_SEARCH, set.searchLimit) : set.searchLimit, seconds: set.searchWindowSeconds };
      case 'code_search':
        return { limit: set.codeSearchLimit, seconds: set.searchWindowSeconds };
      case 'graphql':
        return { limit: anonymous ? 0 : set.graphqlLimit, seconds: set.windowSeconds };
      default:
        return { limit: REPORTED_ONLY[resource] ?? 0, seconds: 3600 };
    }
  }

  /** The live window of a key and resource (creating it at first use, or when the old one has ended). */
  window(key: string, anonymous: boolean, resource: Resource = 'core', now = Date.now()): QuotaWindow {
    const id = `${key}|${resource}`;
    let window = this.windows.get(id);
    if (window === undefined || now >= window.endMs) {
      const shape = this.shape(key, resource, anonymous);
      const endMs = now + shape.seconds * 1000;
      window = { limit: shape.limit, used: 0, endMs, reset: Math.ceil(endMs / 1000), resource };
      this.windows.set(id, window);
    }
    return window;
  }

  /** The state without starting a window (for GET /rate_limit). */
  peek(key: string, anonymous: boolean, resource: Resource = 'core', now = Date.now()): QuotaSnapshot {
    const window = this.windows.get(`${key}|${resource}`);
    if (window === undefined || now >= window.endMs) {
      const shape = this.shape(key, resource, anonymous);
      const reset = Math.ceil((now + shape.seconds * 1000) / 1000);
      return { limit: shape.limit, remaining: shape.limit, used: 0, reset, resource };
    }
    return snapshot(window);
  }

  /** GET /rate_limit's body: every resource in GitHub's order, and `rate` (a copy of core) when asked. */
  document(key: string, anonymous: boolean, withRate: boolean): { resources: Record<string, QuotaSnapshot>; rate?: QuotaSnapshot } {
    const resources: Record<string, QuotaSnapshot> = {};
    for (const name of RESOURCES) {
      const snap = this.peek(key, anonymous, name);
      // GitHub's key order: limit, used, remaining, reset, resource.
      resources[name] = { limit: snap.limit, used: snap.used, remaining: snap.remaining, reset: snap.reset, resource: name };
    }
    return withRate ? { resources, rate: resources.core } : { resources };
  }
}

export function remaining(window: QuotaWindow): number {
  return window.limit - window.used;
}

/** Spends one unit if any is left; returns whether it did. */
export function spend(window: QuotaWindow): boolean {
  if (window.used >= window.limit) return false;
  window.used++;
  return true;
}

/** Spends `units` (a GraphQL call's points) if that many are left; returns whether it did. */
export function spendUnits(window: QuotaWindow, units: number): boolean {
  if (units <= 0 || window.used + units > window.limit) return false;
  window.used += units;
  return true;
}

export function snapshot(window: QuotaWindow): QuotaSnapshot {
  return { limit: window.limit, remaining: window.limit - window.used, used: window.used, reset: window.reset, resource: window.resource };
}

export const anonymousKey = (address: string): string => `ip:${address}`;
export const tokenKey = (token: string): string => `token:${token}`;
