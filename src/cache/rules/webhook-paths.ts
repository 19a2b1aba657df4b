/**
 * Pure: between the API's paths (below the API root, what webhook scopes name: `/repos/o/r`) and
 * the client's paths on one upstream's route (what the cache's keys hold). A route that strips its
 * prefix serves `/repos/o/r` at `<prefix>/repos/o/r`; any other route (the prefix `/`, or a prefix
 * the upstream also sees) serves it at `/repos/o/r`. The upstream URL's own base path (Enterprise
 * Server's `/api/v3`) is below both and appears in neither.
 */
import type { UpstreamConfig } from '../../platform/config/schema.js';

type Route = Pick<UpstreamConfig, 'prefix' | 'strip_prefix'>;

const stripping = (route: Route): boolean => route.strip_prefix && route.prefix !== '/';

/** The client's path for an API path on this route. */
export function clientPathOf(route: Route, apiPath: string): string {
  if (!stripping(route)) return apiPath;
  return apiPath === '/' ? route.prefix : route.prefix + apiPath;
}

/** The API path of a client's path on this route (the path itself when the route strips nothing). */
export function apiPathOf(route: Route, clientPath: string): string {
  if (!stripping(route)) return clientPath;
  const rest = clientPath.slice(route.prefix.length);
  return rest === '' ? '/' : rest;
}
