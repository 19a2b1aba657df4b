/**
 * Pure: what webhook deliveries and purges made stale, remembered by path scope (one upstream and
 * an exact path or a path prefix, in normal form: `scopeId`, `keyPath`, `inScope`).
 * Marking does not delete: a marked entry is kept with no freshness left (`markedStale`), so the
 * next request revalidates it (a free 304 on GitHub when nothing relevant changed) and falls back
 * on it if the upstream fails (stale-if-error).
 *
 * L1 entries are marked when the mark is made (validity.ts, through the path index). The marks are
 * remembered for the entries that arrive later from elsewhere: read from L2, or fetched by an
 * exchange that started before the mark (its answer may predate the change). Such an entry is
 * stale when its representation is from before a mark that covers its path: its origin, when its
 * request went upstream (`originOf`, to the millisecond), is at or before the mark.
 *
 * The marks also time the staleness window: from a delivery to the first revalidation of an
 * entry it marked that brought a changed representation (`etagere_webhook_staleness_seconds`).
 *
 * The other side of webhooks is here too: the paths they keep current, where
 * `cache.webhook_fresh_seconds` applies (`upstreamPolicy`).
 */
import type { CacheEntry } from './entry.js';
import { normalPath } from '../../http/target.js';
import { policyOf, type FreshnessPolicy, type UpstreamPolicy } from './policy.js';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import { parseTemplate } from './webhook-events.js';
import { apiPathOf } from './webhook-paths.js';

export type MarkSource = 'webhook' | 'purge';

/** One marking: a delivery or a purge call. Every scope it names shares it. */
export interface Mark {
  /** When it was made (ms since epoch, on the replica that received it). */
  readonly at: number;
  readonly source: MarkSource;
  /** The staleness window of this delivery has been observed (the first changed revalidation). */
  observed: boolean;
}

export interface StaleMarksSettings {
  /** Marks older than this are forgotten: no entry stored before them can still be fresh. */
  horizonMs: number;
  /** At most this many scopes are remembered (the oldest forgotten first). */
  maxScopes: number;
  /** At most this many marked entries wait for their first revalidation (the staleness window). */
  maxPending: number;
}

export interface StaleMarks {
  /** Scopes remembered. */
  readonly size: number;
  remember(ids: readonly string[], mark: Mark): void;
  /** The newest mark covering the path of `key` made at or after `origin`, if any (`now` forgets old marks). */
  covering(key: string, origin: number, now: number): Mark | undefined;
  /** `key`'s entry was marked stale by `mark`: its next exchange closes the staleness window. */
  pending(key: string, mark: Mark): void;
  /**
   * An exchange for `key` came back; `changed`: with a new representation (not a 304). Returns the
   * seconds from the delivery when this closes a delivery's staleness window, else undefined.
   */
  settle(key: string, changed: boolean, now: number): number | undefined;
}

/**
 * When an entry's representation was last known current: when its request went upstream (less its
 * Age), else, for an entry stored without that time, received less the age it already had (from
 * `Date`, whole seconds: errs towards stale).
 */
export function originOf(entry: Pick<CacheEntry, 'storedAt' | 'initialAge' | 'currentAt'>): number {
  return entry.currentAt ?? entry.storedAt - entry.initialAge * 1000;
}

/** The entry with no freshness left and no stale-while-revalidate window: the next use revalidates. */
export function markedStale(entry: CacheEntry): CacheEntry {
  if (entry.lifetime === 0 && entry.staleWhileRevalidate === 0) return entry;
  return { ...entry, lifetime: 0, staleWhileRevalidate: 0 };
}

/** Sets `key` to `value` as the newest of `map`, forgetting the oldest past `max`. */
function setNewest<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}

export function createStaleMarks(settings: StaleMarksSettings): StaleMarks {
  const marks = new Map<string, Mark>();
  const waiting = new Map<string, Mark>();
  return {
    get size() {
      return marks.size;
    },
    remember(ids, mark) {
      for (const id of ids) {
        const known = marks.get(id);
        if (known === undefined || known.at <= mark.at) setNewest(marks, id, mark, settings.maxScopes);
      }
    },
    covering(key, origin, now) {
      if (marks.size === 0) return undefined;
      const where = keyPath(key);
      if (where === undefined) return undefined;
      let newest: Mark | undefined;
      for (const id of coveringScopeIds(where.upstream, where.path)) {
        const mark = marks.get(id);
        if (mark === undefined) continue;
        if (now - mark.at > settings.horizonMs) marks.delete(id);
        else if (mark.at >= origin && (newest === undefined || mark.at > newest.at)) newest = mark;
      }
      return newest;
    },
    pending(key, mark) {
      if (mark.source === 'webhook' && !mark.observed) setNewest(waiting, key, mark, settings.maxPending);
    },
    settle(key, changed, now) {
      if (waiting.size === 0) return undefined;
      const mark = waiting.get(key);
      if (mark === undefined) return undefined;
      waiting.delete(key);
      if (!changed || mark.observed) return undefined;
      mark.observed = true;
      return Math.max(0, (now - mark.at) / 1000);
    },
  };
}

/*
 * Path scopes, what a webhook delivery or a purge makes stale. A scope is one upstream and
 * either one exact path (every query, partition and representation stored under it) or a path
 * prefix (that path and every path below it, on whole segments). Paths are compared in a normal
 * form, so that the spellings a client may use for one GitHub resource meet:
 *
 *   - lower case (GitHub's owner and repository names are case-insensitive);
 *   - percent-escapes of characters that need none decoded (`hello%2Dworld` is `hello-world`);
 *   - no trailing slash (`/repos/o/r/` is `/repos/o/r`).
 *
 * Folding more spellings together than the upstream does only marks more entries stale than
 * needed (an extra revalidation, a free 304 on GitHub), never fewer.
 *
 * `normalPath` lives in src/http/target.ts (consumer scopes use it too).
 *
 * A scope's id, the form the cache remembers, publishes and persists:  <upstream> \n <x|p> \n <path>
 */
export { normalPath };

export interface PathScope {
  readonly upstream: string;
  /** A path in normal form (`normalPath`). */
  readonly path: string;
  /** true: the path and everything below it; false: that exact path. */
  readonly prefix: boolean;
}

const EXACT = 'x';
const PREFIX = 'p';

export function scopeId(scope: PathScope): string {
  return `${scope.upstream}\n${scope.prefix ? PREFIX : EXACT}\n${scope.path}`;
}

/** The scope an id names, or undefined for a malformed one (a notice from another version, say). */
export function parseScopeId(id: string): PathScope | undefined {
  const first = id.indexOf('\n');
  if (first <= 0 || id.charAt(first + 2) !== '\n') return undefined;
  const kind = id.charAt(first + 1);
  const path = id.slice(first + 3);
  if ((kind !== EXACT && kind !== PREFIX) || !path.startsWith('/')) return undefined;
  return { upstream: id.slice(0, first), path, prefix: kind === PREFIX };
}

/** The upstream and path a cache key names (key.ts: "<upstream>\n<path>\n..."), the path in normal form. */
export function keyPath(key: string): { upstream: string; path: string } | undefined {
  const first = key.indexOf('\n');
  if (first <= 0) return undefined;
  const second = key.indexOf('\n', first + 1);
  const pathname = second === -1 ? key.slice(first + 1) : key.slice(first + 1, second);
  if (!pathname.startsWith('/')) return undefined;
  return { upstream: key.slice(0, first), path: normalPath(pathname) };
}

/** The path's segments after the leading slash ("/" has none). */
export function segmentsOf(path: string): string[] {
  return path === '/' ? [] : path.slice(1).split('/');
}

/**
 * The ids of every scope that covers `path` (normal form) on `upstream`: the exact scope of the
 * path, and the prefix scopes of the path and of each of its ancestors up to "/".
 */
export function coveringScopeIds(upstream: string, path: string): string[] {
  const ids = [`${upstream}\n${EXACT}\n${path}`, `${upstream}\n${PREFIX}\n/`];
  let end = path.indexOf('/', 1);
  while (end !== -1) {
    ids.push(`${upstream}\n${PREFIX}\n${path.slice(0, end)}`);
    end = path.indexOf('/', end + 1);
  }
  if (path !== '/') ids.push(`${upstream}\n${PREFIX}\n${path}`);
  return ids;
}

/** Whether `path` (normal form) is in `scope`. */
export function inScope(scope: Pick<PathScope, 'path' | 'prefix'>, path: string): boolean {
  if (path === scope.path) return true;
  if (!scope.prefix) return false;
  return scope.path === '/' || (path.startsWith(scope.path) && path.charCodeAt(scope.path.length) === 47); /* / */
}

/*
 * The paths webhooks keep current, where `cache.webhook_fresh_seconds` applies. A path is
 * covered when every change GitHub makes to what it serves comes with an event that marks it
 * (webhook-events.ts): the repository, its code and refs, issues, pull requests, labels, milestones,
 * releases, stargazers, comments, statuses and checks, deployments, Actions runs; the owner's
 * repository lists, members and teams. test/unit/webhook-events.test.ts checks that each
 * pattern here is marked by some event of the table.
 *
 * Deliveries come only for the accounts whose webhooks point at the proxy (`webhooks.owners`):
 * `/repos/<owner>/...`, `/orgs/<owner>/...` and `/users/<owner>/repos` are covered for those
 * owners. Paths that name no owner (`/repositories/<id>/...`, `/user/repos`) are covered only
 * with `"*"` (every account).
 *
 * Not covered, because GitHub sends no event for the change: user profiles and followers,
 * traffic, computed statistics, an organization's own profile, search. Covered paths still miss
 * what no event announces (reactions, subscribers_count, permissions gained through a team):
 * docs/webhooks.md lists it with the trade-off.
 */
const REPO_PARTS = [
  '',
  '/branches/**',
  '/commits/**',
  '/contents/**',
  '/git/**',
  '/compare/**',
  '/readme/**',
  '/tags/**',
  '/issues/**',
  '/pulls/**',
  '/labels/**',
  '/milestones/**',
  '/releases/**',
  '/stargazers',
  '/comments/**',
  '/statuses/**',
  '/check-runs/**',
  '/check-suites/**',
  '/deployments/**',
  '/actions/runs/**',
  '/actions/jobs/**',
];

/** Covered paths, as templates of webhook-events.ts ({repo}: by name and by id; {owner}: one of webhooks.owners). */
export const COVERED: readonly string[] = [
  ...REPO_PARTS.map((part) => `{repo}${part}`),
  '/orgs/{owner}/repos',
  '/users/{owner}/repos',
  '/orgs/{owner}/members/**',
  '/orgs/{owner}/teams/**',
  '/user/repos',
];

const OWNER = Symbol('owner');
const ANY = Symbol('any');
type Segment = string | typeof OWNER | typeof ANY;

interface Pattern {
  readonly segments: readonly Segment[];
  readonly prefix: boolean;
}

function compile(template: string): Pattern[] {
  const { path, prefix } = parseTemplate(template);
  const forms = path.startsWith('{repo}') ? [`/repos/{owner}/{name}${path.slice(6)}`, `/repositories/{id}${path.slice(6)}`] : [path];
  return forms.map((form) => ({
    segments: segmentsOf(form).map((part): Segment => (part === '{owner}' ? OWNER : /^\{\w+\}$/.test(part) ? ANY : part)),
    prefix,
  }));
}

const PATTERNS: readonly Pattern[] = COVERED.flatMap(compile);

/** Whether webhooks keep `apiPath` current, given the accounts they come from (`"*"`: every one). */
export function createCoverage(owners: readonly string[]): (apiPath: string) => boolean {
  const every = owners.includes('*');
  const known = new Set(owners.map((owner) => owner.toLowerCase()));
  const matches = (pattern: Pattern, segments: readonly string[]): boolean => {
    if (segments.length < pattern.segments.length || (!pattern.prefix && segments.length !== pattern.segments.length)) return false;
    let owned = false;
    for (let index = 0; index < pattern.segments.length; index++) {
      const want = pattern.segments[index]!;
      const got = segments[index]!;
      if (want === OWNER) {
        if (!every && !known.has(got)) return false;
        owned = true;
      } else if (want !== ANY && want !== got) return false;
    }
    return owned || every;
  };
  return (apiPath) => {
    if (!every && known.size === 0) return false;
    const segments = segmentsOf(normalPath(apiPath));
    return PATTERNS.some((pattern) => matches(pattern, segments));
  };
}

/**
 * An upstream's freshness policy by path: on the paths webhooks cover, at least
 * `cache.webhook_fresh_seconds` of freshness (policy.ts `freshFloor`); elsewhere the policy as configured.
 */
export function policyByPath(
  cfg: Pick<UpstreamConfig, 'prefix' | 'strip_prefix' | 'cache'>,
  policy: FreshnessPolicy,
  owners: readonly string[],
): (pathname: string) => FreshnessPolicy {
  const seconds = cfg.cache.webhook_fresh_seconds;
  if (seconds === 0) return () => policy;
  const covered = createCoverage(owners);
  const extended: FreshnessPolicy = { ...policy, freshFloor: seconds };
  return (pathname) => (covered(apiPathOf(cfg, pathname)) ? extended : policy);
}

/** An upstream's freshness policy (policy.ts `UpstreamPolicy`): as configured, with the webhooks' floor on the paths they cover. */
export function upstreamPolicy(cfg: Pick<UpstreamConfig, 'prefix' | 'strip_prefix' | 'cache'>, owners: readonly string[]): UpstreamPolicy {
  const policy = policyOf(cfg.cache);
  return { kind: policy.kind, at: policyByPath(cfg, policy, owners) };
}
