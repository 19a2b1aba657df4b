/**
 * Pure Link-header rewriting: URLs that point at the upstream are rewritten to the proxy's public
 * base URL so that clients following rel="next" stay on the proxy. URLs on any other origin are
 * left as they are; the proxy base comes from config (or a trusted forwarded header), never from
 * an untrusted request.
 */

export interface LinkRewrite {
  /** Upstream origin plus base path, without trailing slash, e.g. "https://api.github.com". */
  upstreamBase: string;
  /** Proxy public base plus the route prefix when it is stripped, without trailing slash. */
  proxyBase: string;
}

export function rewriteLink(value: string, rewrite: LinkRewrite): string {
  if (value.indexOf(rewrite.upstreamBase) === -1) return value;
  return value.replace(/<([^>]*)>/g, (whole, url: string) => {
    if (url === rewrite.upstreamBase || url.startsWith(`${rewrite.upstreamBase}/`) || url.startsWith(`${rewrite.upstreamBase}?`)) {
      return `<${rewrite.proxyBase}${url.slice(rewrite.upstreamBase.length)}>`;
    }
    return whole;
  });
}

const HOST_RE = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

/**
 * The proxy's public base URL for this request: config `public_url`, else (only when forwarded
 * headers are trusted) X-Forwarded-Proto/-Host or Host, validated; else undefined (no rewrite).
 */
export function publicBase(
  publicUrl: string | null,
  trustForwarded: boolean,
  header: (name: string) => string | undefined,
): string | undefined {
  if (publicUrl !== null) return publicUrl.replace(/\/+$/, '');
  if (!trustForwarded) return undefined;
  const host = (header('x-forwarded-host') ?? header('host'))?.split(',')[0]?.trim();
  if (host === undefined || !HOST_RE.test(host)) return undefined;
  const proto = header('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
  return `${proto === 'https' ? 'https' : 'http'}://${host}`;
}
