/**
 * Pure header hygiene between client and upstream (RFC 9110 section 7.6.1): hop-by-hop headers
 * and those named by Connection are not forwarded in either direction.
 *
 * A GET or HEAD loses them before anything reads its headers (`dropHopByHop`, in the handler), so
 * the cache key is built from exactly the headers the upstream receives: a header named in
 * Connection is neither sent nor part of the key. A request on a pool token
 * forwards only POOL_FORWARDED: the pool's credential never travels with headers the upstream
 * would read as the client's (method overrides, X-Original-URL, Forwarded, X-Forwarded-*, Cookie).
 */
import { CONDITIONAL_HEADERS } from './fields.js';

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

/**
 * The request headers a pooled GET or HEAD forwards: what GitHub reads on a read request (its CORS
 * preflight lists the request headers it takes: Authorization, If-*, Accept-Encoding, X-GitHub-OTP,
 * X-Requested-With, User-Agent, X-GitHub-Api-Version) plus Accept and Range. Left out: Authorization
 * (the pool sets its own), X-GitHub-OTP (two-factor codes for Basic credentials, meaningless with a
 * pool token), X-Requested-With and Cookie (browser sessions), Content-Type (no body), Time-Zone
 * (it only dates commits that a write creates) and Accept-Language (GitHub's REST API is not localised).
 */
export const POOL_FORWARDED: ReadonlySet<string> = new Set([
  'accept',
  'accept-encoding',
  'user-agent',
  'x-github-api-version',
  ...CONDITIONAL_HEADERS,
  'range',
]);

/**
 * The request headers a pooled GraphQL call forwards (src/paths/graphql/exchange.ts): what selects the
 * answer (Accept, GraphQL-Features for GitHub's schema previews, X-GitHub-Api-Version) and
 * User-Agent. The body's type is the proxy's to set; validators, Range and Accept-Encoding mean
 * nothing on a POST whose answer the proxy reads.
 */
export const POOL_GRAPHQL_FORWARDED: ReadonlySet<string> = new Set(['accept', 'user-agent', 'x-github-api-version', 'graphql-features']);

/**
 * Headers of a pooled request the proxy reads itself and never forwards (framing, cache
 * directives, Link rewriting, the request id).
 */
const PROXY_READ = new Set(['host', 'connection', 'cache-control', 'pragma', 'x-forwarded-host', 'x-forwarded-proto', 'x-request-id']);

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

function copyEndToEnd(
  src: HeaderMap,
  extraDrop: ReadonlySet<string> | undefined,
  only: ReadonlySet<string> | undefined,
): Record<string, string | string[]> {
  const named = connectionTokens(src.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in src) {
    const value = src[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || extraDrop?.has(lower) || named?.has(lower)) continue;
    if (only !== undefined && !only.has(lower)) continue;
    out[lower] = value;
  }
  return out;
}

/**
 * Headers of a client request that may be sent upstream (Host and framing are the client library's
 * job). `pooled`: the request goes on a pool token, and only POOL_FORWARDED headers go with it.
 */
export function requestHeadersForUpstream(src: HeaderMap, pooled = false): Record<string, string | string[]> {
  return copyEndToEnd(src, REQUEST_OWNED, pooled ? POOL_FORWARDED : undefined);
}

/** The headers of a pooled GraphQL call that go upstream (POOL_GRAPHQL_FORWARDED, minus what Connection names). */
export function graphqlHeadersForUpstream(src: HeaderMap): Record<string, string | string[]> {
  return copyEndToEnd(src, REQUEST_OWNED, POOL_GRAPHQL_FORWARDED);
}

/**
 * Removes, in place, a client request's hop-by-hop headers and every header its Connection names
 * (Host stays: the request target was checked against it; Connection stays, see below). What is
 * left is what the cache key and the upstream request are both built from. `headers` is Node's
 * request header map (lower-case names).
 */
export function dropHopByHop(headers: HeaderMap): void {
  const connection = headers.connection;
  if (connection !== undefined && connection !== 'keep-alive' && connection !== 'close') {
    for (const name of connectionTokens(connection) ?? []) if (name !== 'host' && headers[name] !== undefined) delete headers[name];
  }
  // Connection itself stays (it selects nothing, and is never forwarded): deleting it would cost
  // every request a slower header map.
  for (const name of HOP_BY_HOP) if (name !== 'connection' && headers[name] !== undefined) delete headers[name];
}

/**
 * How a header is taken out of a request's header map. `delete` removes the property: needed where
 * the map itself goes upstream (http-proxy-3 copies it whole). `blank` sets it to undefined, for a
 * GET or HEAD, whose upstream headers are always a copy that skips undefined values
 * (`requestHeadersForUpstream`, `graphqlHeadersForUpstream`) and whose readers take undefined as
 * absent: deleting a property that is not the map's last turns Node's header map into a dictionary
 * (about 1 µs a request, and every later read slower).
 */
export type HeaderRemoval = 'delete' | 'blank';

/** Takes `name` out of `headers` as `how` says. */
export function removeHeader(headers: HeaderMap, name: string, how: HeaderRemoval): void {
  if (how === 'delete') delete headers[name];
  else headers[name] = undefined;
}

/**
 * Removes, in place, from a pooled request's headers everything that is neither forwarded
 * (POOL_FORWARDED) nor read by the proxy itself, so that no dropped header selects a cache entry.
 */
export function keepPoolHeaders(headers: HeaderMap, how: HeaderRemoval = 'delete'): void {
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (!POOL_FORWARDED.has(lower) && !PROXY_READ.has(lower) && headers[name] !== undefined) removeHeader(headers, name, how);
  }
}

/** Headers of an upstream response that may be sent to the client. */
export function responseHeadersForClient(src: HeaderMap): Record<string, string | string[]> {
  return copyEndToEnd(src, undefined, undefined);
}

/**
 * Response headers that describe the credential rather than the resource: a pool token's scopes
 * and expiry. Pool consumers never see them (X-Accepted-OAuth-Scopes describes the endpoint and stays).
 */
const TOKEN_DESCRIBING = new Set(['x-oauth-scopes', 'github-authentication-token-expiration']);

export function describesToken(name: string): boolean {
  return TOKEN_DESCRIBING.has(name.toLowerCase());
}

/** Whether a response header is one of the upstream's rate-limit numbers (x-ratelimit-*). */
export function isRateLimitHeader(name: string): boolean {
  return name.startsWith('x-ratelimit-');
}
