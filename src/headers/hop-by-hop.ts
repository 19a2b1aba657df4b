/**
 * Pure header hygiene between client and upstream (RFC 9110 section 7.6.1): hop-by-hop headers
 * and those named by Connection are not forwarded in either direction.
 */

export type HeaderValue = string | string[] | undefined;
export type HeaderMap = Record<string, HeaderValue>;

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Request headers the proxy sets itself rather than forwarding. */
const REQUEST_OWNED = new Set(['host', 'content-length', 'expect']);

function connectionTokens(value: HeaderValue): Set<string> | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(',') : value;
  const set = new Set<string>();
  for (const token of text.split(',')) {
    const name = token.trim().toLowerCase();
    if (name) set.add(name);
  }
  return set.size > 0 ? set : undefined;
}

function copyEndToEnd(src: HeaderMap, extraDrop: ReadonlySet<string> | undefined): Record<string, string | string[]> {
  const named = connectionTokens(src.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in src) {
    const value = src[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || extraDrop?.has(lower) || named?.has(lower)) continue;
    out[lower] = value;
  }
  return out;
}

/** Headers of a client request that may be sent upstream (Host and framing are the client library's job). */
export function requestHeadersForUpstream(src: HeaderMap): Record<string, string | string[]> {
  return copyEndToEnd(src, REQUEST_OWNED);
}

/** Headers of an upstream response that may be sent to the client. */
export function responseHeadersForClient(src: HeaderMap): Record<string, string | string[]> {
  return copyEndToEnd(src, undefined);
}
