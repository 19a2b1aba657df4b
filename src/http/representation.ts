/**
 * Pure: a representation as one client receives it. Content codings (what Accept-Encoding takes,
 * what Content-Encoding declares); the upstream's addresses in Link, Location and JSON bodies
 * rewritten to the proxy's public base, so that clients following `rel="next"`, a redirect or a
 * record's `url` stay on the proxy. URLs on any other origin are left as they are.
 *
 * The proxy base is config `public_url`; else, with `trust_forwarded`, X-Forwarded-Host/-Proto;
 * else the request's own Host. A Host is the client's own view of the proxy, and the rewrite is
 * done per response at serve time and never stored, so a client can only change its own answer
 * (docs/caching.md, "Link and Location").
 */
import type { IncomingHttpHeaders } from 'node:http';

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

/* Link and Location headers. */
export interface LinkRewrite {
  /** Upstream origin plus base path, without trailing slash, e.g. "https://api.github.com". */
  upstreamBase: string;
  /** Proxy public base plus the route prefix when it is stripped, without trailing slash. */
  proxyBase: string;
}

/** Whether `url` is the upstream base itself or a URL under it (never a look-alike host). */
function underUpstream(url: string, upstreamBase: string): boolean {
  if (!url.startsWith(upstreamBase)) return false;
  const next = url.charAt(upstreamBase.length);
  return next === '' || next === '/' || next === '?' || next === '#';
}

export function rewriteLink(value: string, rewrite: LinkRewrite): string {
  if (value.indexOf(rewrite.upstreamBase) === -1) return value;
  return value.replace(/<([^>]*)>/g, (whole, url: string) => {
    if (underUpstream(url, rewrite.upstreamBase)) return `<${rewrite.proxyBase}${url.slice(rewrite.upstreamBase.length)}>`;
    return whole;
  });
}

/** Statuses whose Location names a resource to go to: redirects, and 201 Created. */
export function rewritesLocation(status: number): boolean {
  return status === 201 || (status >= 300 && status < 400);
}

/**
 * A Location that points at the upstream, pointed at the proxy. Relative references and other
 * origins are left alone (a relative one already resolves against the proxy).
 */
export function rewriteLocation(value: string, rewrite: LinkRewrite): string {
  const url = value.trim();
  if (!underUpstream(url, rewrite.upstreamBase)) return value;
  return rewrite.proxyBase + url.slice(rewrite.upstreamBase.length);
}

const HOST_RE = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/;

/** A host[:port] fit to put in a URL: letters, digits, dots and dashes (or an IPv6 literal), a port up to 65535. */
export function isPlainHost(host: string | undefined): host is string {
  if (host === undefined || host.length === 0 || host.length > 261) return false;
  const match = HOST_RE.exec(host);
  if (match === null) return false;
  return match[1] === undefined || Number(match[1]) <= 65535;
}

const first = (value: string | undefined): string | undefined => value?.split(',')[0]?.trim();

/**
 * The proxy's public base URL for this request: config `public_url`; else, when forwarded headers
 * are trusted, X-Forwarded-Proto/-Host (falling back to Host); else the request's own Host over
 * the listener's scheme (`https` with listen.tls). An invalid host gives undefined (no rewrite).
 */
export function publicBase(
  publicUrl: string | null,
  trustForwarded: boolean,
  header: (name: string) => string | undefined,
  scheme: 'http' | 'https' = 'http',
): string | undefined {
  if (publicUrl !== null) return publicUrl.replace(/\/+$/, '');
  const host = (trustForwarded ? first(header('x-forwarded-host')) : undefined) ?? header('host')?.trim();
  if (!isPlainHost(host)) return undefined;
  const proto = trustForwarded ? first(header('x-forwarded-proto'))?.toLowerCase() : undefined;
  return `${proto === 'https' || proto === 'http' ? proto : scheme}://${host}`;
}

/** The base that upstream paths are appended to on the proxy: the public base, plus the route prefix when it is stripped. */
export function withRoutePrefix(base: string, stripPrefix: boolean, prefix: string): string {
  return base + (stripPrefix && prefix !== '/' ? prefix : '');
}

/*
 * API addresses inside JSON bodies. GitHub's records carry the API's own URLs
 * (`url`, `repos_url`, `owner.url`, ...), and clients such as PyGithub navigate by them: a string
 * value that starts with the upstream's API base is pointed at the proxy's public base instead, so
 * that the client stays on the proxy. Nothing else changes: other hosts, web addresses
 * (`html_url` on github.com), object keys, and text that merely quotes a URL inside a string.
 *
 * It works on the bytes, without parsing: in JSON text a `"` that is not escaped and is followed by
 * `h` can only open a string (a closing quote is followed by `,` `:` `}` `]` or space), and a string
 * followed by `:` is a key. The result is valid JSON whenever the input is.
 */
const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const COLON = 0x3a;

/** Bytes that may follow the base in a URL under it (never a look-alike host such as api.github.com.evil): / ? # " { */
const AFTER_BASE = new Uint8Array(256);
for (const char of '/?#"{') AFTER_BASE[char.charCodeAt(0)] = 1;
/** JSON's whitespace. */
const JSON_SPACE = new Uint8Array(256);
for (const byte of [0x20, 0x09, 0x0a, 0x0d]) JSON_SPACE[byte] = 1;

/** The needle searched for: an opening quote and the base. */
function needleOf(upstreamBase: string): Buffer {
  return Buffer.from(`"${upstreamBase}`);
}

/** Whether the quote at `at` is escaped (an odd number of backslashes before it). */
function escaped(body: Buffer, at: number): boolean {
  let count = 0;
  for (let index = at - 1; index >= 0 && body[index] === BACKSLASH; index--) count++;
  return count % 2 === 1;
}

/** Whether the string opening at `at` is an object key (its closing quote is followed by a colon). */
function isKey(body: Buffer, at: number): boolean {
  let close = body.indexOf(QUOTE, at + 1);
  while (close !== -1 && escaped(body, close)) close = body.indexOf(QUOTE, close + 1);
  if (close === -1) return false;
  let index = close + 1;
  while (index < body.length && JSON_SPACE[body[index]!] === 1) index++;
  return body[index] === COLON;
}

/** Whether the match of the needle at `at` opens a string value under the base. */
function opensValue(body: Buffer, at: number, needleLength: number): boolean {
  const next = body[at + needleLength];
  return next !== undefined && AFTER_BASE[next] === 1 && !escaped(body, at) && !isKey(body, at);
}

/** Offsets of the string values in `body` that start with the base (each the offset of its opening quote). */
function valuesUnder(body: Buffer, needle: Buffer): number[] {
  const found: number[] = [];
  for (let at = body.indexOf(needle); at !== -1; at = body.indexOf(needle, at + needle.length)) {
    if (opensValue(body, at, needle.length)) found.push(at);
  }
  return found;
}

/** Whether a body holds any string value to rewrite (decides once per entry whether rewriting applies). */
export function hasUrlsUnder(body: Buffer, upstreamBase: string): boolean {
  const needle = needleOf(upstreamBase);
  for (let at = body.indexOf(needle); at !== -1; at = body.indexOf(needle, at + needle.length)) {
    if (opensValue(body, at, needle.length)) return true;
  }
  return false;
}

/**
 * The body with every string value under `upstreamBase` moved to `proxyBase`, or undefined when
 * there is none. `proxyBase` is written JSON-escaped, so no base can break out of its string. The
 * result has an allocation of its own (it is memoized: src/platform/bytes.ts says why).
 */
export function rewriteBodyUrls(body: Buffer, upstreamBase: string, proxyBase: string): Buffer | undefined {
  if (upstreamBase === proxyBase) return undefined;
  const needle = needleOf(upstreamBase);
  const offsets = valuesUnder(body, needle);
  if (offsets.length === 0) return undefined;
  const replacement = Buffer.from(`"${JSON.stringify(proxyBase).slice(1, -1)}`);
  const out = Buffer.allocUnsafeSlow(body.length + offsets.length * (replacement.length - needle.length));
  let from = 0;
  let to = 0;
  for (const at of offsets) {
    to += body.copy(out, to, from, at);
    to += replacement.copy(out, to);
    from = at + needle.length;
  }
  body.copy(out, to, from);
  return out;
}

/** A strong ETag made weak: a body the proxy changed is no longer byte-identical to the upstream's. */
export function weakened(etag: string): string {
  const tag = etag.trim();
  return tag.startsWith('W/') ? tag : `W/${tag}`;
}

/*
 * Where one upstream's addresses point for a client: Link, Location and (with rewrite_body_urls)
 * the API addresses in JSON bodies are rewritten from the upstream's base to the proxy's public
 * base for this request. One instance per upstream, built with its runtime.
 */
export interface LinkSettings {
  publicUrl: string | null;
  trustForwarded: boolean;
  /** The listener serves HTTPS (listen.tls): a base built from Host is https://. */
  https?: boolean;
}

export class PublicAddresses {
  /**
   * The last proxy base and what it was built from (`public_url`, else the Host value): clients
   * mostly send one Host, so a request compares one string instead of validating it and building a
   * URL. Not used with trust_forwarded (the base then depends on more than one header).
   */
  private from: string | undefined = undefined;
  private base: string | undefined = undefined;

  /**
   * `upstreamBase`: the upstream's URL (origin + base path, no trailing slash) as it appears in
   * Link headers and bodies; `bodies`: JSON bodies have their API addresses rewritten too.
   */
  constructor(
    readonly links: LinkSettings,
    readonly upstreamBase: string,
    private readonly route: { readonly stripPrefix: boolean; readonly prefix: string },
    readonly bodies: boolean,
  ) {}

  /** The proxy base URL that Link, Location and body addresses should point at for this request, or undefined (no rewrite). */
  proxyBase(headers: IncomingHttpHeaders): string | undefined {
    const { publicUrl, trustForwarded } = this.links;
    const from = publicUrl ?? (trustForwarded ? undefined : (headers.host ?? ''));
    if (from !== undefined && from === this.from) return this.base;
    const found = publicBase(
      publicUrl,
      trustForwarded,
      (name) => {
        const value = headers[name];
        return Array.isArray(value) ? value[0] : value;
      },
      this.links.https === true ? 'https' : 'http',
    );
    const base = found === undefined ? undefined : withRoutePrefix(found, this.route.stripPrefix, this.route.prefix);
    if (from !== undefined) {
      this.from = from;
      this.base = base;
    }
    return base;
  }
}
