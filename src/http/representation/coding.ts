/**
 * Pure: content codings. What a request's Accept-Encoding takes (RFC 9110 section 12.5.3): a coding
 * is accepted when the header names it, or `*` and not it, with a q-value above 0; no header means
 * identity only when the proxy may choose (it decodes gzip for such a client), but any coding when
 * it may not (`refusesCoding`: an entry it must not or cannot decode). And the coding a response's
 * Content-Encoding declares.
 */

function qualityOf(params: readonly string[]): number {
  for (const param of params) {
    const equals = param.indexOf('=');
    if (equals < 0 || param.slice(0, equals).trim().toLowerCase() !== 'q') continue;
    const quality = Number(param.slice(equals + 1).trim());
    return Number.isFinite(quality) ? quality : 0;
  }
  return 1;
}

/** The request accepts `coding` (lower-case, e.g. `gzip`). */
export function acceptsCoding(header: string | string[] | undefined, coding: string): boolean {
  if (header === undefined) return false;
  const text = Array.isArray(header) ? header.join(',') : header;
  let wildcard: number | undefined;
  for (const part of text.split(',')) {
    const [rawName = '', ...params] = part.split(';');
    const name = rawName.trim().toLowerCase();
    if (name === coding) return qualityOf(params) > 0;
    if (name === '*') wildcard = qualityOf(params);
  }
  return (wildcard ?? 0) > 0;
}

/** A list of bare codings (no parameters, so every q is 1; only spaces and tabs to trim). */
const BARE_CODINGS = /^[A-Za-z0-9*,!#$%&'+.^_`|~ \t-]*$/;
/** A bare list that names gzip or `*`. */
const NAMES_GZIP = /(?:^|,)[ \t]*(?:gzip|\*)[ \t]*(?:,|$)/i;

/**
 * The request accepts gzip. On the hit path, for the usual values (`gzip, deflate, br`: no
 * q-values) two regular-expression tests that allocate nothing; otherwise `acceptsCoding`.
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (typeof header === 'string' && BARE_CODINGS.test(header)) return NAMES_GZIP.test(header);
  return acceptsCoding(header, 'gzip');
}

/**
 * The request refuses a response in `coding` (what `contentCodingOf` gives: one coding, or a list
 * applied in order): it sent an Accept-Encoding that does not take every coding of it. A request
 * without Accept-Encoding takes any coding (RFC 9110 section 12.5.3), so only an explicit refusal
 * counts: `identity`, `gzip;q=0`, `*;q=0`, `br` alone, an empty value, or garbage. `x-gzip` is
 * `gzip` (RFC 9110 section 8.4.1.3).
 */
export function refusesCoding(header: string | string[] | undefined, coding: string): boolean {
  if (header === undefined) return false;
  for (const part of coding.split(',')) {
    const name = part.trim();
    if (name === '' || name === 'identity') continue;
    if (!(name === 'gzip' || name === 'x-gzip' ? acceptsGzip(header) : acceptsCoding(header, name))) return true;
  }
  return false;
}

/** The content coding a Content-Encoding value declares, lower-case; undefined for identity. */
export function contentCodingOf(value: string | string[] | undefined): string | undefined {
  const coding = (Array.isArray(value) ? value.join(', ') : value)?.trim().toLowerCase();
  return coding === undefined || coding === '' || coding === 'identity' ? undefined : coding;
}
