/**
 * Pure Link- and Location-header rewriting: URLs that point at the upstream are rewritten to the
 * proxy's public base URL so that clients following rel="next" or a redirect stay on the proxy.
 * URLs on any other origin are left as they are.
 *
 * The proxy base is config `public_url`; else, with `trust_forwarded`, X-Forwarded-Host/-Proto;
 * else the request's own Host. A Host is the client's own view of the proxy, and the rewrite is
 * done per response at serve time and never stored, so a client can only change its own answer
 * (docs/caching.md, "Link and Location").
 */

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
