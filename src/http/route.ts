/**
 * Pure routing: which upstream serves a request path, and which path is sent upstream.
 * The longest configured prefix wins; a prefix matches whole path segments only
 * ("/bicyclists" matches "/bicyclists" and "/bicyclists/x", never "/bicyclistsx").
 */
import type { UpstreamConfig } from '../platform/config/schema.js';

/** "" for "/", else the path without its trailing slash: what upstream paths are appended to. */
export function basePrefixOf(basePath: string): string {
  return basePath === '/' ? '' : basePath.replace(/\/$/, '');
}

export interface Route {
  readonly upstream: UpstreamConfig;
  /** Index of the upstream in config order (stable id for per-upstream resources). */
  readonly index: number;
}

export interface Router {
  match(pathname: string): Route | undefined;
}

export function createRouter(upstreams: readonly UpstreamConfig[]): Router {
  const routes = upstreams
    .map((upstream, index) => ({ upstream, index }))
    .sort((a, b) => b.upstream.prefix.length - a.upstream.prefix.length);
  return {
    match(pathname) {
      for (const route of routes) {
        const prefix = route.upstream.prefix;
        if (prefix === '/') return route;
        if (pathname.startsWith(prefix) && (pathname.length === prefix.length || pathname.charCodeAt(prefix.length) === 47) /* / */) {
          return route;
        }
      }
      return undefined;
    },
  };
}

/**
 * The path (with query) to request upstream: the upstream URL's own base path, then the client's
 * path with the prefix removed when `strip_prefix` is set.
 */
export function upstreamPath(upstream: UpstreamConfig, basePath: string, pathname: string, search: string): string {
  return basePrefixOf(basePath) + apiPathname(upstream, pathname) + search;
}

/**
 * The client's path as the upstream's API sees it below its base path: without the prefix when
 * `strip_prefix` is set. Route templates (metric labels) are matched against it, so
 * `/ghe/repos/o/r` on a `/ghe` route that strips its prefix is `/repos/{owner}/{repo}`.
 */
export function apiPathname(upstream: UpstreamConfig, pathname: string): string {
  if (!upstream.strip_prefix || upstream.prefix === '/') return pathname;
  const rest = pathname.slice(upstream.prefix.length);
  return rest === '' ? '/' : rest;
}

/** Where GitHub Enterprise Server serves its REST API: clients in Enterprise mode (gh with GH_HOST) put it in front of every path. */
export const ENTERPRISE_REST_BASE = '/api/v3';

/**
 * A client path in GitHub Enterprise Server's layout as the same request in github.com's:
 * `/api/v3/repos/o/r` is `/repos/o/r`, `/api/v3` is `/`, `/api/graphql` is `/graphql`; undefined
 * for any other path (and for `/api/v3//x`, which would not be a path once stripped).
 */
export function enterpriseForm(pathname: string): string | undefined {
  if (pathname === '/api/graphql') return '/graphql';
  if (pathname === ENTERPRISE_REST_BASE || pathname === `${ENTERPRISE_REST_BASE}/`) return '/';
  if (!pathname.startsWith(`${ENTERPRISE_REST_BASE}/`) || pathname.charCodeAt(ENTERPRISE_REST_BASE.length + 1) === 47 /* / */)
    return undefined;
  return pathname.slice(ENTERPRISE_REST_BASE.length);
}

/**
 * Whether an upstream also answers the Enterprise forms of its paths: a GitHub upstream (the token
 * pool, or api.github.com) on the root route. An upstream configured at `/api/v3` or `/api` wins
 * those paths by its longer prefix, and keeps them.
 */
export function servesEnterpriseForms(upstream: UpstreamConfig): boolean {
  if (upstream.prefix !== '/') return false;
  return upstream.token_pool || new URL(upstream.url).hostname.toLowerCase() === 'api.github.com';
}
