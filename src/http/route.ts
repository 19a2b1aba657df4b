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
