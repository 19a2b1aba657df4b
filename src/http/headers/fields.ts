/**
 * Pure readers of standard HTTP fields (RFC 9110, 9111, 9211): header values as Node or undici hand
 * them over, the framing fields, JSON media types, HTTP-dates, conditional requests, Cache-Control
 * directives and Cache-Status values.
 */
import type { CacheOutcome } from '../../platform/metrics/quota-windows.js';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** One header value: a list is joined with ", " (RFC 9110 section 5.3). */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A reader of one header by lower-case name, over a header record. */
export function headerReader(headers: Headers): (name: string) => string | undefined {
  return (name) => headerValue(headers[name]);
}

/**
 * Representation-framing headers: a 304 does not overwrite them in the stored response (RFC 9111
 * section 3.2), and the proxy leaves them out of the 304s it sends (RFC 9110 section 15.4.5).
 */
export const REPRESENTATION_FRAMING = new Set(['content-length', 'content-encoding', 'transfer-encoding', 'content-range', 'content-type']);

/*
 * Pure: whether a Content-Type promises a JSON body, for the checks and rewrites that read bodies
 * (corrupt JSON in src/cache/rules/policy.ts, API addresses in src/http/representation).
 *
 * `application/json` and every `+json` type do (`application/vnd.github+json`,
 * `application/problem+json`), except GitHub's custom media types with a parameter
 * (`application/vnd.github.raw+json`, `application/vnd.github.v3.html+json`): GitHub answers such a
 * request with the media type it was asked for, whatever the body is. Under the raw media type the
 * body is the file's own bytes, which must be neither refused for not parsing nor rewritten.
 */
const JSON_TYPE = /^application\/(?:[a-z0-9!#$&^_.-]+\+)?json$/;
/** application/vnd.github[.vN].PARAM+json, where PARAM is not itself a version (`vnd.github.v3+json` is plain JSON). */
const GITHUB_PARAM_TYPE = /^application\/vnd\.github(?:\.v\d+)?\.(?!v\d+\+json$)[a-z0-9_-]+\+json$/;

export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semicolon = contentType.indexOf(';');
  const type = (semicolon < 0 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  return JSON_TYPE.test(type) && !GITHUB_PARAM_TYPE.test(type);
}

/*
 * Pure: reading an HTTP-date (RFC 9110 section 5.6.7), strictly. A recipient accepts the three
 * formats: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
 * (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), always in UTC.
 * Names are matched case-insensitively and a zone other than GMT makes the date invalid (RFC 9111
 * section 4.2). Anything else (`0`, `99999`, an ISO date, which `Date.parse` would take for a year
 * or local time) is not a date: undefined.
 */
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, 'i');
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`, 'i');

/** Milliseconds since the epoch, when the parts make a real instant (no 31 February, no hour 24). */
function instant(year: number, month: string, day: number, hour: number, minute: number, second: number): number | undefined {
  const monthIndex = MONTHS.indexOf(month.toLowerCase());
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  const time = Date.UTC(year, monthIndex, day, hour, minute, Math.min(second, 59));
  const check = new Date(time);
  return check.getUTCFullYear() === year && check.getUTCMonth() === monthIndex && check.getUTCDate() === day ? time : undefined;
}

/**
 * RFC 9110 section 5.6.7: a two-digit year "that appears to be more than 50 years in the future" is
 * the most recent year in the past with the same last two digits.
 */
function fullYear(twoDigits: number, now: number): number {
  const thisYear = new Date(now).getUTCFullYear();
  let year = Math.floor(thisYear / 100) * 100 + twoDigits;
  if (year > thisYear + 50) year -= 100;
  return year;
}

/** An HTTP-date as ms since the epoch, or undefined when `value` is not one. `now` places RFC 850's two-digit years. */
export function parseHttpDate(value: string, now: number = Date.now()): number | undefined {
  const text = value.trim();
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) return instant(Number(match[3]), match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]));
  match = RFC850.exec(text);
  if (match !== null) {
    const year = fullYear(Number(match[3]), now);
    return instant(year, match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]));
  }
  match = ASCTIME.exec(text);
  if (match !== null)
    return instant(Number(match[6]), match[1]!, Number(match[2]!.trim()), Number(match[3]), Number(match[4]), Number(match[5]));
  return undefined;
}

/*
 * Pure evaluation of a client's conditional request against the representation being served
 * (RFC 9110 section 13): If-None-Match with weak comparison, else If-Modified-Since. Dates are read
 * strictly (parseHttpDate): an If-Modified-Since that is not an HTTP-date is ignored (section 13.1.3).
 */
/** The request's preconditions (RFC 9110 section 13.1): what makes a request conditional. */
export const CONDITIONAL_HEADERS = ['if-none-match', 'if-modified-since', 'if-match', 'if-unmodified-since', 'if-range'] as const;

function opaque(tag: string): string {
  const trimmed = tag.trim();
  return trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed;
}

/** True when If-None-Match lists the ETag (weak comparison) or is "*". */
export function etagMatches(ifNoneMatch: string, etag: string | undefined): boolean {
  if (etag === undefined) return false;
  const want = opaque(etag);
  for (const candidate of ifNoneMatch.split(',')) {
    const tag = candidate.trim();
    if (tag === '*' || (tag.length > 0 && opaque(tag) === want)) return true;
  }
  return false;
}

/** Whether the client's own validators say it already has this representation (answer 304). */
export function clientHasCurrent(
  ifNoneMatch: string | undefined,
  ifModifiedSince: string | undefined,
  etag: string | undefined,
  lastModified: string | undefined,
): boolean {
  if (ifNoneMatch !== undefined) return etagMatches(ifNoneMatch, etag);
  if (ifModifiedSince === undefined || lastModified === undefined) return false;
  const since = parseHttpDate(ifModifiedSince);
  const modified = parseHttpDate(lastModified);
  return since !== undefined && modified !== undefined && modified <= since;
}

/*
 * Pure Cache-Control parsing (RFC 9111 section 5.2, RFC 5861 extensions).
 * Unknown directives are ignored; malformed numbers make a directive absent.
 */
export interface Directives {
  maxAge?: number;
  sMaxage?: number;
  maxStale?: number; // Infinity when "max-stale" has no value
  minFresh?: number;
  staleIfError?: number;
  staleWhileRevalidate?: number;
  noStore?: true;
  noCache?: true;
  private?: true;
  public?: true;
  mustRevalidate?: true;
  proxyRevalidate?: true;
  onlyIfCached?: true;
  /** No intermediary may change the content or its coding (RFC 9111 section 5.2.2.6). */
  noTransform?: true;
  /** Store only when the status's caching rules are understood (RFC 9111 section 5.2.2.3). */
  mustUnderstand?: true;
}

const EMPTY: Readonly<Directives> = Object.freeze({});

function seconds(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const unquoted = value.startsWith('"') && value.endsWith('"') && value.length >= 2 ? value.slice(1, -1) : value;
  if (!/^\d+$/.test(unquoted)) return undefined;
  // RFC 9111 section 1.2.2: values too large are treated as 2^31 seconds.
  return Math.min(Number(unquoted), 2_147_483_648);
}

/** Directives with a delta-seconds argument, and the field each sets. */
const NUMERIC = new Map<string, 'maxAge' | 'sMaxage' | 'minFresh' | 'staleIfError' | 'staleWhileRevalidate'>([
  ['max-age', 'maxAge'],
  ['s-maxage', 'sMaxage'],
  ['min-fresh', 'minFresh'],
  ['stale-if-error', 'staleIfError'],
  ['stale-while-revalidate', 'staleWhileRevalidate'],
]);

/** Directives without an argument, and the flag each sets. */
type Flag =
  'noStore' | 'noCache' | 'private' | 'public' | 'mustRevalidate' | 'proxyRevalidate' | 'onlyIfCached' | 'noTransform' | 'mustUnderstand';
const FLAGS = new Map<string, Flag>([
  ['no-store', 'noStore'],
  ['no-cache', 'noCache'],
  ['private', 'private'],
  ['public', 'public'],
  ['must-revalidate', 'mustRevalidate'],
  ['proxy-revalidate', 'proxyRevalidate'],
  ['only-if-cached', 'onlyIfCached'],
  ['no-transform', 'noTransform'],
  ['must-understand', 'mustUnderstand'],
]);

export function parseCacheControl(header: string | string[] | undefined): Readonly<Directives> {
  if (header === undefined) return EMPTY;
  const text = Array.isArray(header) ? header.join(',') : header;
  if (text.length === 0) return EMPTY;
  const directives: Directives = {};
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    const value = eq === -1 ? undefined : part.slice(eq + 1).trim();
    const numeric = NUMERIC.get(name);
    if (numeric !== undefined) {
      const secs = seconds(value);
      if (secs !== undefined) directives[numeric] = secs;
    } else if (name === 'max-stale') {
      // "max-stale" without a value accepts any staleness.
      const secs = value === undefined ? Infinity : seconds(value);
      if (secs !== undefined) directives.maxStale = secs;
    } else {
      const flag = FLAGS.get(name);
      if (flag !== undefined) directives[flag] = true;
    }
  }
  return directives;
}

/** Request directives, with HTTP/1.0 `Pragma: no-cache` honoured when Cache-Control is absent. */
export function requestDirectives(
  cacheControl: string | string[] | undefined,
  pragma: string | string[] | undefined,
): Readonly<Directives> {
  if (cacheControl === undefined && pragma !== undefined) {
    const pragmaText = Array.isArray(pragma) ? pragma.join(',') : pragma;
    if (/(^|,)\s*no-cache\s*(,|$)/i.test(pragmaText)) return { noCache: true };
  }
  return parseCacheControl(cacheControl);
}

/*
 * Pure RFC 9211 Cache-Status values. The cache is named "etagere".
 *   hit; ttl=42                         served from cache, fresh
 *   fwd=miss; fwd-status=200; stored     fetched and stored
 *   fwd=stale; fwd-status=304            revalidated, unchanged
 *   fwd=request; fwd-status=304          the client forced a revalidation (no-cache)
 *   fwd=stale; fwd-status=502; detail=stale-if-error   upstream failed, stale entry served
 *   hit; ttl=-3; detail=stale-while-revalidate         stale served, refreshed in background
 *   fwd=bypass                           not a cacheable request (method, Range, policy none)
 *   fwd=vary-miss; fwd-status=200; detail=coding   a stored entry in a coding the client refused (no-transform): forwarded
 *   fwd=miss; detail=only-if-cached      504: nothing usable stored
 *   fwd=miss; detail=ENOTFOUND           502 or 504 the proxy made: the upstream failed (failureDetail)
 *   hit; ttl=42; key="gql:..."           a GraphQL answer names its key (a SHA-256: nothing of the query or credential)
 */
export type { CacheOutcome };

export interface CacheStatusInput {
  hit?: boolean;
  fwd?: 'miss' | 'stale' | 'request' | 'bypass' | 'uri-miss' | 'vary-miss';
  fwdStatus?: number;
  ttl?: number;
  stored?: boolean;
  collapsed?: boolean;
  detail?: string;
  /** The cache key (RFC 9211 `key`): GraphQL answers name theirs, for `etagere cache inspect --graphql`. */
  key?: string;
}

export function cacheStatus(input: CacheStatusInput): string {
  let value = 'etagere';
  if (input.hit) value += '; hit';
  if (input.fwd !== undefined) value += `; fwd=${input.fwd}`;
  if (input.fwdStatus !== undefined) value += `; fwd-status=${input.fwdStatus}`;
  if (input.ttl !== undefined) value += `; ttl=${Math.trunc(input.ttl)}`;
  if (input.stored) value += '; stored';
  if (input.collapsed) value += '; collapsed';
  if (input.detail !== undefined) value += `; detail=${input.detail}`;
  if (input.key !== undefined) value += `; key="${input.key}"`;
  return value;
}

/** An upstream failure's detail (ENOTFOUND, UND_ERR_HEADERS_TIMEOUT, "truncated body") as an RFC 9211 token. */
export function failureDetail(detail: string): string {
  return detail.replace(/[^A-Za-z0-9_.-]+/g, '-') || 'error';
}

/** The Cache-Status of a 502 or 504 the proxy makes for a failed upstream request. */
export function failureStatus(fwd: NonNullable<CacheStatusInput['fwd']>, detail: string): Record<string, string> {
  return { 'cache-status': cacheStatus({ fwd, detail: failureDetail(detail) }) };
}
