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
}

const EMPTY: Readonly<Directives> = Object.freeze({});

function seconds(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const v = value.startsWith('"') && value.endsWith('"') && value.length >= 2 ? value.slice(1, -1) : value;
  if (!/^\d+$/.test(v)) return undefined;
  // RFC 9111 section 1.2.2: values too large are treated as 2^31 seconds.
  return Math.min(Number(v), 2_147_483_648);
}

export function parseCacheControl(header: string | string[] | undefined): Readonly<Directives> {
  if (header === undefined) return EMPTY;
  const text = Array.isArray(header) ? header.join(',') : header;
  if (text.length === 0) return EMPTY;
  const d: Directives = {};
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    const value = eq === -1 ? undefined : part.slice(eq + 1).trim();
    switch (name) {
      case 'max-age': {
        const s = seconds(value);
        if (s !== undefined) d.maxAge = s;
        break;
      }
      case 's-maxage': {
        const s = seconds(value);
        if (s !== undefined) d.sMaxage = s;
        break;
      }
      case 'max-stale': {
        if (value === undefined) d.maxStale = Infinity;
        else {
          const s = seconds(value);
          if (s !== undefined) d.maxStale = s;
        }
        break;
      }
      case 'min-fresh': {
        const s = seconds(value);
        if (s !== undefined) d.minFresh = s;
        break;
      }
      case 'stale-if-error': {
        const s = seconds(value);
        if (s !== undefined) d.staleIfError = s;
        break;
      }
      case 'stale-while-revalidate': {
        const s = seconds(value);
        if (s !== undefined) d.staleWhileRevalidate = s;
        break;
      }
      case 'no-store':
        d.noStore = true;
        break;
      case 'no-cache':
        d.noCache = true;
        break;
      case 'private':
        d.private = true;
        break;
      case 'public':
        d.public = true;
        break;
      case 'must-revalidate':
        d.mustRevalidate = true;
        break;
      case 'proxy-revalidate':
        d.proxyRevalidate = true;
        break;
      case 'only-if-cached':
        d.onlyIfCached = true;
        break;
      default:
        break;
    }
  }
  return d;
}

/** Request directives, with HTTP/1.0 `Pragma: no-cache` honoured when Cache-Control is absent. */
export function requestDirectives(cacheControl: string | string[] | undefined, pragma: string | string[] | undefined): Readonly<Directives> {
  if (cacheControl === undefined && pragma !== undefined) {
    const p = Array.isArray(pragma) ? pragma.join(',') : pragma;
    if (/(^|,)\s*no-cache\s*(,|$)/i.test(p)) return { noCache: true };
  }
  return parseCacheControl(cacheControl);
}
