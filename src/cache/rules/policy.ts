/**
 * Pure freshness and storage rules (RFC 9111), parameterised by the upstream's policy:
 *
 * - `max-age`:    fresh for s-maxage / max-age / Expires (optionally capped), then revalidate.
 * - `revalidate`: never fresh: every use revalidates (a 304 is free on GitHub), as ghproxy does.
 * - `ttl`:        fresh for a fixed time, whatever the upstream says (validator-less upstreams).
 * - `rfc9111`:    a standards-conforming shared cache: honours private, no-store, no-cache,
 *                 Authorization (section 3.5), must-revalidate, s-maxage; heuristic freshness
 *                 only when configured.
 *
 * Request directives (no-cache, max-age, min-fresh, max-stale, only-if-cached, no-store) apply
 * under every policy; `planFor` says what a request does with what is stored. Every function here
 * takes plain data and returns plain data.
 */
import { isJsonMediaType, type Directives, REPRESENTATION_FRAMING } from '../../http/headers/fields.js';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import type { CacheEntry } from './entry.js';
import type { CheckedBody } from '../../upstream/fetch.js';

export type PolicyKind = 'max-age' | 'revalidate' | 'ttl' | 'rfc9111' | 'none';

export interface FreshnessPolicy {
  kind: PolicyKind;
  /** Fixed lifetime for `ttl`, seconds. */
  ttl: number;
  /** Upper bound on the lifetime under `max-age` and `rfc9111`, seconds. */
  maxAgeCap: number | undefined;
  /** Default stale-if-error window, seconds. */
  staleIfError: number;
  /** Default stale-while-revalidate window, seconds (0 = off). */
  staleWhileRevalidate: number;
  /** rfc9111 heuristic freshness: this fraction of (Date - Last-Modified); 0 = off. */
  heuristicFraction: number;
  /**
   * A floor on the lifetime of a response the policy lets be fresh at all, seconds: an upstream's
   * `cache.webhook_fresh_seconds` on the paths its webhooks cover (src/cache/rules/stale-marks.ts). Unset: none.
   */
  freshFloor?: number;
  /** How long a 404 or 410 to a GET is stored under the GitHub policies, seconds (classify.ts); unset or 0: never. */
  negativeSeconds?: number;
}

/**
 * An upstream's freshness policy, the one way it is read: its kind (the same on every path), and
 * the policy for one client path, with more freshness where webhooks cover it (stale-marks.ts
 * `upstreamPolicy` builds it).
 */
export interface UpstreamPolicy {
  readonly kind: PolicyKind;
  at(pathname: string): FreshnessPolicy;
}

/** The freshness policy an upstream's `cache` settings give (before any path's floor). */
export function policyOf(cache: UpstreamConfig['cache']): FreshnessPolicy {
  return {
    kind: cache.policy,
    ttl: cache.ttl_seconds ?? 0,
    maxAgeCap: cache.max_age_cap_seconds,
    staleIfError: cache.stale_if_error_seconds,
    staleWhileRevalidate: cache.stale_while_revalidate_seconds,
    heuristicFraction: cache.heuristic_fraction,
    negativeSeconds: cache.negative_seconds,
  };
}

/** Statuses a shared cache may store without explicit freshness (RFC 9110 section 15.1 "heuristically cacheable", minus 206). */
const RFC_CACHEABLE = new Set([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]);

/**
 * Final statuses whose caching rules this cache knows (RFC 9110 section 15), the ones a response
 * with `must-understand` may be stored with (RFC 9111 section 5.2.2.3). 206 is left out: the cache
 * stores no partial content.
 */
const UNDERSTOOD = new Set([
  200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413,
  414, 415, 416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505,
]);

export interface StoreInput {
  status: number;
  method: 'GET' | 'HEAD';
  req: Readonly<Directives>;
  res: Readonly<Directives>;
  /** The request carried credentials (the client's own or a pool token). */
  authorized: boolean;
  hasValidator: boolean;
  hasExpires: boolean;
  hasSetCookie: boolean;
  varyStar: boolean;
}

/** Why a response is not stored, or null when it may be. */
export function notStorableReason(policy: FreshnessPolicy, input: StoreInput): string | null {
  if (policy.kind === 'none') return 'policy-none';
  if (input.req.noStore) return 'request-no-store';
  if (input.res.noStore) return 'no-store';
  if (input.varyStar) return 'vary-star';
  if (input.hasSetCookie) return 'set-cookie';
  if (policy.kind !== 'rfc9111') return input.status === 200 ? null : 'status';
  return rfcNotStorableReason(policy, input);
}

/**
 * RFC 9111 section 3 for a shared cache: any final status (206 aside) may be stored when the
 * response gives explicit freshness or says `public`; without, only the heuristically cacheable
 * ones. `must-understand` limits storing to the statuses the cache understands.
 */
function rfcNotStorableReason(policy: FreshnessPolicy, input: StoreInput): string | null {
  if (input.status < 200 || input.status === 206 || input.status === 304) return 'status';
  if (input.res.mustUnderstand && !UNDERSTOOD.has(input.status)) return 'must-understand';
  const freshness = input.res.sMaxage !== undefined || input.res.maxAge !== undefined || input.hasExpires;
  if (!RFC_CACHEABLE.has(input.status) && !freshness && !input.res.public) return 'status';
  if (input.res.private) return 'private';
  if (input.authorized && !(input.res.public || input.res.sMaxage !== undefined || input.res.mustRevalidate)) return 'authorization';
  const explicit = freshness || input.res.public;
  if (!explicit && !input.hasValidator && policy.heuristicFraction === 0) return 'no-freshness';
  return null;
}

/**
 * Whether a successful answer's body contradicts its own Content-Type: a body labelled JSON that
 * does not parse (garbled or cut by the upstream or something in between, with a consistent
 * Content-Length). Such an answer is an upstream failure: never stored, never served as the
 * resource (a stored entry is served instead, stale-if-error). Other types, GitHub's media types with
 * a parameter (`application/vnd.github.raw+json`: src/http/headers/fields.ts) among them, are not inspected.
 * A gzip body comes already checked, as it was decoded a chunk at a time.
 */
export function corruptBody(status: number, contentType: string | undefined, body: Buffer | CheckedBody): boolean {
  const whole = Buffer.isBuffer(body);
  if (status < 200 || status >= 300 || (whole ? body.length : body.size) === 0 || !isJsonMediaType(contentType)) return false;
  if (!whole) return body.json === false; // src/upstream/fetch.ts
  try {
    JSON.parse(body.toString('utf8'));
    return false;
  } catch {
    return true;
  }
}

export interface LifetimeInput {
  res: Readonly<Directives>;
  /** Parsed Date header, ms since epoch, or undefined. */
  date: number | undefined;
  expires: number | undefined;
  lastModified: number | undefined;
  /**
   * When the response was received, ms: under `rfc9111` the Date of a response without a valid
   * one (RFC 9110 section 6.6.1: a recipient records the time it was received).
   */
  received?: number | undefined;
}

/** Freshness lifetime in seconds (RFC 9111 section 4.2.1), with the policy applied. */
export function freshnessLifetime(policy: FreshnessPolicy, input: LifetimeInput): number {
  switch (policy.kind) {
    case 'none':
    case 'revalidate':
      return 0;
    case 'ttl':
      return Math.max(policy.ttl, policy.freshFloor ?? 0);
    default: {
      if (policy.kind === 'rfc9111' && input.res.noCache) return 0;
      let life: number | undefined = input.res.sMaxage ?? input.res.maxAge;
      const date = input.date ?? (policy.kind === 'rfc9111' ? input.received : undefined);
      if (life === undefined && input.expires !== undefined) {
        life = Math.max(0, Math.floor((input.expires - (date ?? input.expires)) / 1000));
      }
      if (
        life === undefined &&
        policy.kind === 'rfc9111' &&
        policy.heuristicFraction > 0 &&
        input.lastModified !== undefined &&
        input.date !== undefined
      ) {
        life = Math.min(86_400, Math.floor(((input.date - input.lastModified) / 1000) * policy.heuristicFraction));
      }
      life = Math.max(0, life ?? 0);
      if (policy.maxAgeCap !== undefined) life = Math.min(life, policy.maxAgeCap);
      return life > 0 && policy.freshFloor !== undefined ? Math.max(life, policy.freshFloor) : life;
    }
  }
}

/**
 * Stale windows, and whether stale serving is forbidden. Under `rfc9111`, must-revalidate,
 * proxy-revalidate, s-maxage (this is a shared cache) and no-cache forbid serving the response
 * stale (RFC 9111 sections 4.2.4, 5.2.2.2, 5.2.2.4, 5.2.2.8, 5.2.2.10): `mustRevalidate`. Such an
 * entry keeps its stale-if-error window only as the time it is kept for a conditional
 * revalidation, never to be served from (`decide`, `usableOnError`); it has no
 * stale-while-revalidate. The GitHub policies serve stale within the operator's windows whatever
 * the response says (docs/caching.md, "When the upstream fails").
 */
export function staleWindows(
  policy: FreshnessPolicy,
  res: Readonly<Directives>,
): { staleIfError: number; staleWhileRevalidate: number; mustRevalidate: boolean } {
  const mustRevalidate =
    policy.kind === 'rfc9111' &&
    (res.mustRevalidate === true || res.proxyRevalidate === true || res.sMaxage !== undefined || res.noCache === true);
  const staleIfError = res.staleIfError ?? policy.staleIfError;
  if (mustRevalidate) return { staleIfError, staleWhileRevalidate: 0, mustRevalidate };
  return { staleIfError, staleWhileRevalidate: res.staleWhileRevalidate ?? policy.staleWhileRevalidate, mustRevalidate };
}

/** RFC 9111 section 1.2.2: delta-seconds past 2^31 count as 2^31. */
const MAX_DELTA_SECONDS = 2_147_483_648;

/**
 * The Age a cache cannot trust counts as this: the response is stale on arrival. RFC 9111 section
 * 5.1 lets a cache use the first member of a list-based Age, or ignore an invalid one (a SHOULD);
 * a shared cache that ignored it would take a response of unknown age for a new one. The
 * conservative reading, which the HTTP cache conformance tests ask for, is to treat
 * such a response as stale: it is stored, and the next request revalidates it (docs/caching.md).
 */
export const UNTRUSTED_AGE = MAX_DELTA_SECONDS;

/**
 * The Age value of a response, in seconds, or undefined when it has none. A value that is not
 * exactly one non-negative integer (`old`, `-5`, `7200.0`, `1e4`, `3600;p=1`, an empty field) or a
 * list (`0, 0`, or two field lines) is UNTRUSTED_AGE.
 */
export function ageValue(header: string | readonly string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const text = typeof header === 'string' ? header : header.join(',');
  const members = text.split(',');
  const value = members[0]!.trim();
  if (members.length !== 1 || !/^\d+$/.test(value)) return UNTRUSTED_AGE;
  return Math.min(Number(value), MAX_DELTA_SECONDS);
}

/** RFC 9111 section 4.2.3: the age a response had on arrival. */
export function initialAge(ageHeader: number | undefined, date: number | undefined, requestTime: number, responseTime: number): number {
  const apparent = date === undefined ? 0 : Math.max(0, (responseTime - date) / 1000);
  const corrected = (ageHeader ?? 0) + (responseTime - requestTime) / 1000;
  return Math.max(apparent, corrected);
}

/** Current age in whole seconds. */
export function currentAge(entry: Pick<CacheEntry, 'initialAge' | 'storedAt'>, now: number): number {
  return Math.max(0, Math.floor(entry.initialAge + (now - entry.storedAt) / 1000));
}

export type Decision =
  /** Serve from cache without contacting the upstream. */
  | { kind: 'fresh'; age: number; ttl: number }
  /** Serve stale now (request max-stale or stale-while-revalidate); `background` asks for a revalidation. */
  | { kind: 'stale'; age: number; ttl: number; background: boolean }
  /** Contact the upstream (conditionally when the entry has validators) before answering. */
  | { kind: 'revalidate'; age: number; ttl: number; forced: boolean };

/** What to do with a stored entry for this request (RFC 9111 section 4 and 5.2.1). */
export function decide(
  entry: Pick<CacheEntry, 'initialAge' | 'storedAt' | 'lifetime' | 'staleWhileRevalidate' | 'mustRevalidate'>,
  req: Readonly<Directives>,
  now: number,
): Decision {
  const age = currentAge(entry, now);
  const ttl = entry.lifetime - age;
  if (req.noCache || req.maxAge === 0) return { kind: 'revalidate', age, ttl, forced: true };
  const tooOld = req.maxAge !== undefined && age > req.maxAge;
  const wantsFresher = req.minFresh !== undefined && ttl < req.minFresh;
  if (ttl > 0 && !tooOld && !wantsFresher) return { kind: 'fresh', age, ttl };
  if (tooOld || wantsFresher) return { kind: 'revalidate', age, ttl, forced: true };
  if (!entry.mustRevalidate) {
    if (req.maxStale !== undefined && -ttl <= req.maxStale) return { kind: 'stale', age, ttl, background: false };
    if (entry.staleWhileRevalidate > 0 && -ttl <= entry.staleWhileRevalidate) return { kind: 'stale', age, ttl, background: true };
  }
  return { kind: 'revalidate', age, ttl, forced: false };
}

/**
 * What to do with what the cache holds for a request, before any upstream exchange (RFC 9111
 * section 4 and 5.2.1): serve it fresh, serve it stale (and maybe revalidate in the background), go
 * upstream (conditionally when there is a stored entry), or answer 504 because the client asked for
 * only-if-cached.
 */
export type Plan =
  | { kind: 'fresh'; entry: CacheEntry; age: number; ttl: number }
  /** max-stale, or stale-while-revalidate (`background`: revalidate after answering). */
  | { kind: 'stale'; entry: CacheEntry; age: number; ttl: number; background: boolean }
  /** `stale`: the entry to revalidate (and to fall back on); `forced`: the client asked for it. */
  | { kind: 'fetch'; stale: CacheEntry | undefined; forced: boolean }
  | { kind: 'only-if-cached' };

const FETCH_NEW: Plan = { kind: 'fetch', stale: undefined, forced: false };
const ONLY_IF_CACHED: Plan = { kind: 'only-if-cached' };

/** `entry`: the stored entry usable for this request (Vary matched, not invalidated), if any. */
export function planFor(entry: CacheEntry | undefined, directives: Readonly<Directives>, now: number): Plan {
  if (entry === undefined) return directives.onlyIfCached ? ONLY_IF_CACHED : FETCH_NEW;
  const decision = decide(entry, directives, now);
  if (decision.kind === 'fresh') return { kind: 'fresh', entry, age: decision.age, ttl: decision.ttl };
  if (decision.kind === 'stale') return { kind: 'stale', entry, age: decision.age, ttl: decision.ttl, background: decision.background };
  if (directives.onlyIfCached) return ONLY_IF_CACHED;
  return { kind: 'fetch', stale: entry, forced: decision.forced };
}

/** Whether an entry may be served because the upstream failed (stale-if-error). */
export function usableOnError(
  entry: Pick<CacheEntry, 'initialAge' | 'storedAt' | 'lifetime' | 'staleIfError' | 'mustRevalidate'>,
  now: number,
): boolean {
  if (entry.mustRevalidate) return currentAge(entry, now) < entry.lifetime;
  return currentAge(entry, now) - entry.lifetime <= entry.staleIfError;
}

/**
 * How long a store may keep an entry: fresh time plus every stale window. An entry that may not be
 * served stale (`mustRevalidate`) is kept past freshness only when it has a validator, for the
 * conditional request that revalidates it (RFC 9111 section 4.3.1).
 */
export function retentionSeconds(
  entry: Pick<CacheEntry, 'lifetime' | 'staleIfError' | 'staleWhileRevalidate' | 'initialAge' | 'mustRevalidate' | 'etag' | 'lastModified'>,
): number {
  const revalidatable = entry.etag !== undefined || entry.lastModified !== undefined;
  const window = entry.mustRevalidate && !revalidatable ? 0 : Math.max(entry.staleIfError, entry.staleWhileRevalidate);
  return Math.max(1, Math.ceil(entry.lifetime - entry.initialAge + window));
}

/**
 * RFC 9111 section 3.2: a 304's header fields replace the stored ones of the same name, except the
 * names in `kept` (by default the representation framing, as the GitHub policies do; `rfc9111`
 * passes its own set, src/cache/rules/freshen.ts).
 */
export function mergeHeaders(
  stored: ReadonlyArray<[string, string]>,
  fresh: ReadonlyArray<[string, string]>,
  kept: ReadonlySet<string> = REPRESENTATION_FRAMING,
): Array<[string, string]> {
  const replaced = new Set<string>();
  for (const [name] of fresh) if (!kept.has(name)) replaced.add(name);
  const out: Array<[string, string]> = [];
  for (const header of stored) if (!replaced.has(header[0])) out.push(header);
  for (const header of fresh) if (replaced.has(header[0])) out.push(header);
  return out.slice(); // kept for the entry's life: no spare slots
}
