/**
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
