/**
 * Pure: what one upstream exchange means for the cache. A 200 becomes a new entry (stored when
 * the policy allows), a 304 refreshes the stored entry (RFC 9111 section 4.3.4), a transient
 * failure keeps the stored entry as the fallback, a changed or vanished resource replaces or drops
 * it, and a body that contradicts its JSON Content-Type is a failure. The caller applies the
 * result to the cache (`Cache.apply`) and turns it into a reply.
 * Negative entries (a stored 404 or 410: `negativeLifetime`, `pathTags`) are at the end.
 */
import type { Readable } from 'node:stream';
import { parseHttpDate, headerValue, parseCacheControl, type Directives } from '../../http/headers/fields.js';
import { contentCodingOf } from '../../http/representation.js';
import { describesToken, responseHeadersForClient, isRateLimitHeader } from '../../http/headers/hop-by-hop.js';
import type { Unavailable, UpstreamFailure } from '../../http/errors.js';
import type { CheckedBody, Fetched, UpstreamHeaders } from '../../upstream/fetch.js';
import { fieldValue, type CacheEntry, type FetchedBy } from './entry.js';
import { varySelection } from './key.js';
import { freshens, KEPT_ON_304, type Validators } from './freshen.js';
import {
  ageValue,
  corruptBody,
  freshnessLifetime,
  initialAge,
  mergeHeaders,
  notStorableReason,
  staleWindows,
  type FreshnessPolicy,
} from './policy.js';
import type { CacheRequest } from './request.js';
import { parseSurrogateControl, withSurrogate } from './surrogate-control.js';
import { ownerTag, repoTag } from './tags.js';

/** What the upstream exchange produced: a fetch on a token (or without one), or no token to use. */
export type Got =
  | {
      kind: 'fetched';
      fetched: Fetched;
      token: string | undefined;
      fetchedBy: FetchedBy;
      /** The body decoded (src/upstream/fetch.ts): the body itself for identity, checked as it decoded for gzip, undefined for a coding the proxy does not decode. */
      decoded?: Buffer | CheckedBody | undefined;
    }
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

type Response = Extract<Fetched, { kind: 'response' }>;

/** What one exchange produced for the cache; shared by every request coalesced onto it. */
export type CacheResult =
  | {
      kind: 'entry';
      entry: CacheEntry;
      /** Upstream status of this exchange (304 when a stored entry was confirmed). */
      fwdStatus: number;
      /** Where the entry is to be stored; undefined when it may not be. */
      storeKey: string | undefined;
      /** A stored entry this answer replaces without being stored itself. */
      dropKey: string | undefined;
      /** The upstream answered with a transient failure (5xx, 429, rate-limited 403). */
      transient: boolean;
      token: string | undefined;
      /** The upstream rejected the request's credential (401, or a 403 without rate-limit meaning). */
      rejected?: Rejection | undefined;
    }
  /** Another replica fetched it (distributed single flight): what it stored in L2. */
  | { kind: 'followed'; entry: CacheEntry }
  | { kind: 'failed'; failure: UpstreamFailure; token: string | undefined; corrupt: boolean }
  /** Over the entry cap: the head read so far and the rest, for the request that started the flight. */
  | { kind: 'too-large'; status: number; headers: UpstreamHeaders; head: Buffer[]; rest: Readable; token: string | undefined }
  /** No pool token could take the request (every one spent, paused or dead; or no slot in time). */
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

/**
 * An upstream refusal of a credential: what it drops and what the cache remembers
 * so that no stale-serving path (max-stale, only-if-cached, stale-if-error) uses an older entry.
 *   key         the entry of this credential for this request (any 401, a 403 without rate-limit meaning)
 *   partition   every entry of this client credential, when the 401 says "Bad credentials" (GitHub's
 *               answer to an unknown or revoked token on every endpoint); undefined otherwise, and
 *               for the pool, whose tokens the pool itself judges
 */
export interface Rejection {
  readonly key: string;
  readonly partition: string | undefined;
}

/** How a stored header field becomes a pair: the cache's shared table (src/cache/store/header-intern.ts) or a pair of the entry's own. */
export type PairOf = (name: string, value: string) => [string, string];

const ownPair: PairOf = (name, value) => [name, value];

/** `pairOf`: the cache's header table, so entries share their common fields (else each has its own pairs). */
export function classify(got: Got, stale: CacheEntry | undefined, req: CacheRequest, pairOf: PairOf = ownPair): CacheResult {
  if (got.kind === 'unavailable') return got;
  const { fetched, token, fetchedBy, decoded } = got;
  if (fetched.kind === 'failed') return { kind: 'failed', failure: fetched.failure, token, corrupt: false };
  if (fetched.kind === 'too-large')
    return { kind: 'too-large', status: fetched.status, headers: fetched.headers, head: fetched.head, rest: fetched.rest, token };
  const key = req.keys.store(token);
  if (fetched.status === 304 && stale !== undefined) {
    if (!freshens(req.policy.kind, stale, validatorsOf(fetched.headers))) {
      return { kind: 'failed', failure: { status: 502, detail: '304 for another representation' }, token, corrupt: false };
    }
    const entry = refreshed(req, stale, fetched, fetchedBy, pairOf);
    return { kind: 'entry', entry, fwdStatus: 304, storeKey: key, dropKey: undefined, transient: false, token };
  }
  const plain = decoded ?? (contentCodingOf(fetched.headers['content-encoding']) === undefined ? fetched.body : undefined);
  if (plain !== undefined && corruptBody(fetched.status, headerValue(fetched.headers['content-type']), plain)) {
    return { kind: 'failed', failure: { status: 502, detail: 'invalid JSON body' }, token, corrupt: true };
  }
  const vary = varySelection(headerValue(fetched.headers.vary), (name) => req.header(name), req.policy.kind === 'rfc9111');
  const res = responseDirectives(req, fetched.headers['cache-control'], fetched.headers['surrogate-control']);
  const decodedSize = plain === undefined ? fetched.body.length : Buffer.isBuffer(plain) ? plain.length : plain.size;
  const entry = entryFrom(req, fetched, res, fetchedBy, vary ?? null, decodedSize, pairOf);
  const reason =
    fetched.status === 304
      ? 'unsolicited-304'
      : notStorableReason(req.policy, {
          status: fetched.status,
          method: req.method,
          req: req.directives,
          res,
          authorized: req.credential !== 'anonymous',
          hasValidator: entry.etag !== undefined || entry.lastModified !== undefined,
          hasExpires: fetched.headers.expires !== undefined,
          hasSetCookie: fetched.headers['set-cookie'] !== undefined,
          varyStar: vary === undefined,
        });
  const transient = isTransient(fetched.status, fetched.headers);
  // A 404 or 410 the GitHub policies keep for a while (below).
  const negative = reason === 'status' ? negativeLifetime(req.policy, fetched.status, req.method) : undefined;
  if (negative !== undefined)
    return {
      kind: 'entry',
      entry: asNegative(entry, negative),
      fwdStatus: fetched.status,
      storeKey: key,
      dropKey: undefined,
      transient,
      token,
    };
  // A failure with explicit freshness (`rfc9111`) is stored, but never in place of a stored entry:
  // that entry stays the stale-if-error fallback.
  if (reason === null && !(transient && stale !== undefined))
    return { kind: 'entry', entry, fwdStatus: fetched.status, storeKey: key, dropKey: undefined, transient: false, token };
  // A changed or vanished resource replaces the old entry even when the new answer is not
  // storable; a transient failure never evicts it; a rejected credential loses its entry.
  const rejected = rejection(req, key, fetched, transient, plain ?? fetched.body);
  const replaces = stale !== undefined && !transient && (fetched.status < 400 || fetched.status === 404 || fetched.status === 410);
  const dropKey = replaces || rejected !== undefined ? key : undefined;
  return { kind: 'entry', entry, fwdStatus: fetched.status, storeKey: undefined, dropKey, transient, token, rejected };
}

/** The response directives the cache acts on: Cache-Control, and Surrogate-Control under `rfc9111`. */
function responseDirectives(
  req: CacheRequest,
  cacheControl: string | string[] | undefined,
  surrogateControl: string | string[] | undefined,
): Readonly<Directives> {
  const res = parseCacheControl(cacheControl);
  return req.policy.kind === 'rfc9111' ? withSurrogate(res, parseSurrogateControl(surrogateControl)) : res;
}

/** The validators a response carries. */
function validatorsOf(headers: UpstreamHeaders): Validators {
  return { etag: headerValue(headers.etag), lastModified: headerValue(headers['last-modified']) };
}

/**
 * A 304 to the cache's conditional request that does not select the stored response (under
 * `rfc9111`, src/cache/rules/freshen.ts): the cache asks again, unconditionally (RFC 9111 section 4.3.4).
 */
export function unselected304(got: Got, stale: CacheEntry | undefined, req: CacheRequest): boolean {
  if (stale === undefined || got.kind !== 'fetched' || got.fetched.kind !== 'response' || got.fetched.status !== 304) return false;
  return !freshens(req.policy.kind, stale, validatorsOf(got.fetched.headers));
}

/** GitHub's message for an unknown or revoked token, on every endpoint. */
const BAD_CREDENTIALS = /"message"\s*:\s*"Bad credentials"/;

function rejection(
  req: CacheRequest,
  key: string,
  fetched: Response,
  transient: boolean,
  body: Buffer | CheckedBody,
): Rejection | undefined {
  if (req.credential === 'anonymous') return undefined;
  if (fetched.status !== 401 && (fetched.status !== 403 || transient)) return undefined;
  const start = (Buffer.isBuffer(body) ? body : body.head).subarray(0, 1024);
  const badCredentials = req.credential === 'client' && fetched.status === 401 && BAD_CREDENTIALS.test(start.toString('utf8'));
  return { key, partition: badCredentials ? req.keys.partition : undefined };
}

/** Upstream statuses after which a stored entry is still the best answer (stale-if-error). */
function isTransient(status: number, headers: UpstreamHeaders): boolean {
  if (status >= 500) return true;
  if (status === 429) return true;
  return status === 403 && (headerValue(headers['x-ratelimit-remaining']) === '0' || headers['retry-after'] !== undefined);
}

/**
 * Stored headers: end-to-end, no framing, no Age (computed at serve time), lower-case. A response
 * fetched with a pool token keeps no x-ratelimit-* (consumers see the pool's, added at serve time)
 * and nothing that describes the token (its scopes, its expiry). Fields common to many responses
 * are shared pairs when `pairOf` is the cache's header table.
 */
export function storedHeaders(upstream: UpstreamHeaders, pooled: boolean, pairOf: PairOf = ownPair): Array<[string, string]> {
  const headers = responseHeadersForClient(upstream);
  const out: Array<[string, string]> = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || name === 'content-length' || name === 'age') continue;
    if (pooled && (isRateLimitHeader(name) || describesToken(name))) continue;
    if (Array.isArray(value)) for (const item of value) out.push(pairOf(name, item));
    else out.push(pairOf(name, value));
  }
  // Kept for the entry's life: a list of its exact length (pushing leaves spare slots).
  return out.slice();
}

function parseDate(value: string | string[] | undefined): number | undefined {
  const text = headerValue(value);
  return text === undefined ? undefined : parseHttpDate(text);
}

/** RFC 9111 section 5.3: an Expires that is not a valid HTTP-date ("0" among them) is a time in the past. */
function parseExpires(value: string | undefined): number | undefined {
  return value === undefined ? undefined : (parseDate(value) ?? 0);
}

/**
 * Freshness of a response whose stored headers are `headers`, received as `response` (RFC 9111 4.2):
 * the same derivation for a new entry and for one a 304 refreshed.
 */
function freshness(req: CacheRequest, headers: ReadonlyArray<[string, string]>, res: Readonly<Directives>, response: Response) {
  const age = ageValue(response.headers.age);
  return {
    storedAt: response.responseTime,
    initialAge: initialAge(age, parseDate(response.headers.date), response.requestTime, response.responseTime),
    // To the millisecond: `Date` has whole seconds, too coarse to order the answer after a stale mark.
    currentAt: response.requestTime - (age ?? 0) * 1000,
    lifetime: freshnessLifetime(req.policy, {
      res,
      date: parseDate(fieldValue(headers, 'date')),
      expires: parseExpires(fieldValue(headers, 'expires')),
      lastModified: parseDate(fieldValue(headers, 'last-modified')),
      received: response.responseTime,
    }),
    ...staleWindows(req.policy, res),
  };
}

/** Builds an entry from a fresh upstream response (status, headers, body, freshness). */
function entryFrom(
  req: CacheRequest,
  response: Response,
  res: Readonly<Directives>,
  fetchedBy: FetchedBy,
  vary: Record<string, string> | null,
  decodedSize: number,
  pairOf: PairOf,
): CacheEntry {
  const headers = storedHeaders(response.headers, req.credential === 'pool', pairOf);
  return {
    status: response.status,
    headers,
    body: response.body,
    decodedSize,
    etag: fieldValue(headers, 'etag'),
    lastModified: fieldValue(headers, 'last-modified'),
    ...freshness(req, headers, res, response),
    fetchedBy,
    vary,
  };
}

/** A 304 confirmed `stored`: merge its headers and restart the freshness clock (RFC 9111 4.3.4). */
function refreshed(req: CacheRequest, stored: CacheEntry, response: Response, fetchedBy: FetchedBy, pairOf: PairOf): CacheEntry {
  const kept = req.policy.kind === 'rfc9111' ? KEPT_ON_304 : undefined;
  const headers = mergeHeaders(stored.headers, storedHeaders(response.headers, req.credential === 'pool', pairOf), kept);
  return {
    ...stored,
    fetchedBy,
    headers,
    etag: fieldValue(headers, 'etag') ?? stored.etag,
    lastModified: fieldValue(headers, 'last-modified') ?? stored.lastModified,
    ...freshness(
      req,
      headers,
      responseDirectives(req, fieldValue(headers, 'cache-control'), fieldValue(headers, 'surrogate-control')),
      response,
    ),
  };
}

/*
 * Negative entries. Under the GitHub policies (`max-age`, `revalidate`, `ttl`) a 404 or 410
 * answer to a GET is stored in its credential partition for `upstreams[].cache.negative_seconds`
 * (0: never): every authenticated 404 costs a unit of quota, and clients poll for things that do
 * not exist yet. It is never served stale (no stale-if-error, no stale-while-revalidate, no
 * max-stale) and never refreshed ahead. Under `rfc9111` the RFC's rules decide, as for any status.
 *
 * A negative entry is filed (src/cache/store/tags.ts) under the repository and owner of its path,
 * so that a webhook delivery that could create it purges it (webhook-tags.ts); a 200 for its key
 * replaces it.
 */
export function isNegativeStatus(status: number): boolean {
  return status === 404 || status === 410;
}

/** How long a negative answer is fresh, seconds; undefined when it is not stored as one. */
export function negativeLifetime(policy: FreshnessPolicy, status: number, method: 'GET' | 'HEAD'): number | undefined {
  if (!isNegativeStatus(status) || method !== 'GET') return undefined;
  if (policy.kind === 'rfc9111' || policy.kind === 'none') return undefined;
  const seconds = policy.negativeSeconds ?? 0;
  return seconds > 0 ? seconds : undefined;
}

/** The entry as a negative one: fresh for `seconds`, never served stale. */
export function asNegative(entry: CacheEntry, seconds: number): CacheEntry {
  return { ...entry, lifetime: seconds, staleIfError: 0, staleWhileRevalidate: 0, mustRevalidate: true };
}

/**
 * The tags of an API path's negative entry: `/repos/<owner>/<name>/...` is the repository and its
 * owner; `/users/<login>...`, `/orgs/<login>...` the account. Other paths have none (they expire).
 */
export function pathTags(apiPath: string): string[] {
  const [, first, owner, name] = apiPath.split('/', 4);
  const tags: Array<string | undefined> = [];
  const decoded = (text: string | undefined): string | undefined => {
    if (text === undefined) return undefined;
    try {
      return decodeURIComponent(text);
    } catch {
      return undefined;
    }
  };
  if (first === 'repos') tags.push(repoTag(decoded(owner), decoded(name)), ownerTag(decoded(owner)));
  else if (first === 'users' || first === 'orgs') tags.push(ownerTag(decoded(owner)));
  return tags.filter((tag): tag is string => tag !== undefined);
}
