/**
 * The fake under a base path, as GitHub Enterprise Server serves its REST API (`/api/v3/...`).
 * With a base path, every API path is answered below it, the addresses in bodies and `Link`
 * headers carry it (the server hands the router `http://host/api/v3` as its base URL), and a
 * path outside it is a 404. The control endpoints (`/__fake/*`) and the cyclist service stay at
 * the root: they are the fake's own, not GitHub's.
 *
 * GraphQL: GHES serves it beside the REST base, at `/api/graphql` when the REST API is at
 * `/api/v3`, and not at `/api/v3/graphql` (docs.github.com, "Forming calls with GraphQL" for
 * Enterprise Server: `http(s)://HOSTNAME/api/graphql`). `requestApiPath` maps the one to the fake's
 * `/graphql` and leaves the other outside the API.
 */

/** A base path: segments of letters, digits, `.`, `_`, `~` and `-`, e.g. `/api/v3`. */
const BASE_PATH_RE = /^(?:\/[A-Za-z0-9._~-]+)+$/;
/** Paths that belong to the fake itself and may not be taken by the API's base path. */
const RESERVED = ['/__fake', '/bicyclists'];

export class BasePathError extends Error {}

/**
 * A base path as given (`/api/v3`, `/api/v3/`, `api/v3`, `/` or empty) in the form the server uses:
 * `""` for none, else a leading slash and no trailing one. Throws a BasePathError on anything else.
 */
export function normaliseBasePath(value: string): string {
  const trimmed = value.trim().replace(/\/+$/, '');
  if (trimmed === '') return '';
  const path = trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
  if (path.length > 200 || !BASE_PATH_RE.test(path) || path.split('/').some((part) => part === '.' || part === '..')) {
    throw new BasePathError('the base path must be /segment[/segment...] of letters, digits, ".", "_", "~" or "-", e.g. /api/v3');
  }
  if (RESERVED.some((reserved) => path === reserved || path.startsWith(`${reserved}/`))) {
    throw new BasePathError(`the base path may not start with ${RESERVED.join(' or ')} (the fake's own paths)`);
  }
  return path;
}

/** The API path of a request path: the part below the base path, or null when it is outside it. */
export function apiPathOf(path: string, basePath: string): string | null {
  if (basePath === '') return path;
  if (path === basePath) return '/';
  return path.startsWith(`${basePath}/`) ? path.slice(basePath.length) : null;
}

/**
 * The API path of a request path under `basePath`, as the fake answers it: the path below the base
 * path, or `/graphql` for GHES's GraphQL endpoint beside it (`graphqlPathFor`); null outside the
 * API, which takes in `<base>/graphql` (GHES has no GraphQL there).
 */
export function requestApiPath(path: string, basePath: string): string | null {
  if (basePath === '') return path;
  if (path === graphqlPathFor(basePath)) return '/graphql';
  const below = apiPathOf(path, basePath);
  return below === '/graphql' ? null : below;
}

/** Where GHES serves GraphQL for a REST base path: `/api/graphql` beside `/api/v3`; `/graphql` without a base path. */
export function graphqlPathFor(basePath: string): string {
  if (basePath === '') return '/graphql';
  const parent = basePath.slice(0, basePath.lastIndexOf('/'));
  return `${parent}/graphql`;
}
