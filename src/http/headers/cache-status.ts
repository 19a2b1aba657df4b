/**
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

import type { CacheOutcome } from '../../platform/metrics/quota-saved.js';

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
