/**
 * Response headers of the code-hosting API, with GitHub's real vendor names, and the error
 * bodies. One place declares every header the fake sends.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Viewer } from './auth.js';
import { JSON_MEDIA } from './media-type.js';

export const DOCS_URL = 'https://docs.github.com/rest';
export const RATE_LIMIT_DOCS_URL = 'https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting';
export const SECONDARY_DOCS_URL = 'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits';

export const JSON_TYPE = 'application/json; charset=utf-8';
export const TEXT_TYPE = 'text/plain; charset=utf-8';
export const VARY = 'Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, X-Requested-With';
export const CACHE_PUBLIC = 'public, max-age=60, s-maxage=60';
export const CACHE_PRIVATE = 'private, max-age=60, s-maxage=60';
export const EXPOSE_HEADERS =
  'ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, ' +
  'X-RateLimit-Resource, X-RateLimit-Reset, X-OAuth-Scopes, X-Accepted-OAuth-Scopes, X-Poll-Interval, ' +
  'X-GitHub-Media-Type, X-GitHub-SSO, X-GitHub-Request-Id, Deprecation, Sunset';

/** The rate-limit state shown in headers. */
export interface RateView {
  limit: number;
  used: number;
  reset: number;
  /** The rate-limit resource (x-ratelimit-resource); core when not given. */
  resource?: string;
}

export interface ApiHeaderInput {
  status: number;
  /** null for 304 (no content-type, no content-length). */
  contentType: string | null;
  contentLength: number;
  requestId: string;
  apiVersion: string;
  rate: RateView | null;
  viewer: Viewer | null;
  acceptedScopes: string;
  cacheControl: string | null;
  etag: string | null;
  lastModified: string | null;
  link: string | null;
  retryAfter: number | null;
  /** X-GitHub-Media-Type of a custom media type (`github.v3; param=raw`); null: the JSON one. */
  mediaType?: string | null;
  /** Content-Encoding of the body (`gzip`); null or absent: identity. */
  contentEncoding?: string | null;
}

export function apiHeaders(input: ApiHeaderInput): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { server: 'github.com' };
  if (input.contentType !== null) out['content-type'] = input.contentType;
  if (input.contentEncoding !== undefined && input.contentEncoding !== null) out['content-encoding'] = input.contentEncoding;
  if (input.cacheControl !== null) out['cache-control'] = input.cacheControl;
  out.vary = VARY;
  if (input.etag !== null) out.etag = input.etag;
  if (input.lastModified !== null) out['last-modified'] = input.lastModified;
  // Installation tokens have permissions, not OAuth scopes: GitHub sends no scope headers for them.
  if (input.viewer !== null && input.viewer.installation === undefined) {
    out['x-oauth-scopes'] = input.viewer.scopesHeader;
    out['x-accepted-oauth-scopes'] = input.acceptedScopes;
  }
  out['x-github-media-type'] = input.mediaType ?? JSON_MEDIA;
  out['x-github-api-version-selected'] = input.apiVersion;
  if (input.link !== null) out.link = input.link;
  if (input.rate !== null) {
    out['x-ratelimit-limit'] = String(input.rate.limit);
    out['x-ratelimit-remaining'] = String(input.rate.limit - input.rate.used);
    out['x-ratelimit-reset'] = String(input.rate.reset);
    out['x-ratelimit-used'] = String(input.rate.used);
    out['x-ratelimit-resource'] = input.rate.resource ?? 'core';
  }
  if (input.retryAfter !== null) out['retry-after'] = String(input.retryAfter);
  out['access-control-expose-headers'] = EXPOSE_HEADERS;
  out['access-control-allow-origin'] = '*';
  out['strict-transport-security'] = 'max-age=31536000; includeSubdomains; preload';
  out['x-frame-options'] = 'deny';
  out['x-content-type-options'] = 'nosniff';
  out['x-xss-protection'] = '1; mode=block';
  out['referrer-policy'] = 'origin-when-cross-origin, strict-origin-when-cross-origin';
  out['content-security-policy'] = "default-src 'none'";
  if (input.status !== 304) {
    out['accept-ranges'] = 'bytes';
    out['content-length'] = input.contentLength;
  }
  out['x-github-request-id'] = input.requestId;
  return out;
}

/** CORS preflight answer (OPTIONS), as GitHub sends it. */
export function preflightHeaders(requestId: string): OutgoingHttpHeaders {
  return {
    server: 'github.com',
    'access-control-allow-origin': '*',
    'access-control-allow-headers':
      'Authorization, Content-Type, If-Match, If-Modified-Since, If-None-Match, If-Unmodified-Since, Accept-Encoding, ' +
      'X-GitHub-OTP, X-Requested-With, User-Agent, X-GitHub-Api-Version',
    'access-control-allow-methods': 'GET, POST, PATCH, PUT, DELETE',
    'access-control-max-age': '86400',
    'access-control-expose-headers': EXPOSE_HEADERS,
    vary: VARY,
    'content-length': 0,
    'x-github-request-id': requestId,
  };
}

/** GitHub-shaped error body. */
export function errorJson(message: string, documentationUrl = DOCS_URL): Buffer {
  return Buffer.from(JSON.stringify({ message, documentation_url: documentationUrl }));
}

export const NOT_FOUND_BODY = errorJson('Not Found');
export const BAD_CREDENTIALS_BODY = errorJson('Bad credentials');
export const REQUIRES_AUTH_BODY = errorJson('Requires authentication');
/** GitHub Enterprise Server's answer to GET /rate_limit with rate limiting off (404). */
export const RATE_LIMITING_OFF_BODY = errorJson(
  'Rate limiting is not enabled.',
  'https://docs.github.com/enterprise-server@latest/rest/rate-limit/rate-limit',
);
/** What GitHub answers on App-only endpoints to any credential that is not an App's JWT. */
export const JWT_REQUIRED_BODY = errorJson(
  'A JSON web token could not be decoded',
  'https://docs.github.com/rest/apps/apps#get-the-authenticated-app',
);
export const SERVER_ERROR_BODY = errorJson('Server Error');

/** Opaque request ids shaped like GitHub's (`XXXX:XXXX:...`). */
const ID_PREFIX = randomBytes(4).toString('hex').toUpperCase();
let idCounter = 0;
export function nextRequestId(): string {
  idCounter = (idCounter + 1) >>> 0;
  return `${ID_PREFIX.slice(0, 4)}:${ID_PREFIX.slice(4)}:${idCounter.toString(16).toUpperCase()}:${((Date.now() / 1000) | 0)
    .toString(16)
    .toUpperCase()}`;
}
