/**
 * Pure: GitHub's rate-limit resources. Each token has a separate budget per resource, named by
 * `x-ratelimit-resource` and listed by GET /rate_limit's `resources`: spending or pausing one
 * never says anything about another. A request's resource follows from its upstream path below
 * the base path: `/search/code` is `code_search`, any other `/search/*` is `search`, `/graphql` is
 * `graphql` (on Enterprise Server, whose REST base is `/api/v3`, GraphQL's `/api/graphql` too:
 * src/http/route.ts), and the rest is `core`. The other resources are learnt and reported,
 * never reserved.
 *
 * Only the names below are accepted from the upstream: an unknown name is ignored, so a hostile
 * answer can neither grow the pool's state nor add metric labels.
 */
import { graphqlEndpoint, basePrefixOf } from '../../http/route.js';

/** In GET /rate_limit's order; the fake GitHub has its own list, kept equal by test/unit/token-resources.test.ts. */
export const RESOURCES = [
  'core',
  'search',
  'code_search',
  'graphql',
  'integration_manifest',
  'dependency_snapshots',
  'code_scanning_upload',
  'actions_runner_registration',
  'source_import',
  'audit_log',
] as const;

export type Resource = (typeof RESOURCES)[number];

const KNOWN: ReadonlySet<string> = new Set(RESOURCES);

/** A resource name as the upstream sent it, if it is one of GitHub's (case and spaces ignored). */
export function resourceNamed(name: string | undefined): Resource | undefined {
  if (name === undefined) return undefined;
  const normal = name.trim().toLowerCase();
  return KNOWN.has(normal) ? (normal as Resource) : undefined;
}

/** Whether `path` has `segment` at `at`, followed by its end, a query or (when `deeper`) a slash. */
function segmentAt(path: string, at: number, segment: string, deeper: boolean): boolean {
  if (!path.startsWith(segment, at)) return false;
  const next = path.charCodeAt(at + segment.length);
  return Number.isNaN(next) || next === 0x3f /* ? */ || (deeper && next === 0x2f); /* / */
}

/**
 * The GraphQL endpoint of a base path when it is not `<base>/graphql` (Enterprise Server), else
 * undefined. Worked out per call: only a path outside its base (that endpoint, or nothing) gets here.
 */
function endpointOutside(basePath: string, prefix: string): string | undefined {
  const endpoint = graphqlEndpoint(basePath);
  return endpoint === `${prefix}/graphql` ? undefined : endpoint;
}

/**
 * The resource of an upstream path (with or without its query) under the upstream's base path
 * (`/` or e.g. `/api/v3`). Allocates nothing for a root base path: it runs on every pooled hit.
 */
export function resourceOf(path: string, basePath = '/'): Resource {
  const prefix = basePath === '/' ? '' : basePrefixOf(basePath);
  if (prefix !== '' && !path.startsWith(prefix)) {
    const endpoint = endpointOutside(basePath, prefix);
    if (endpoint !== undefined && segmentAt(path, 0, endpoint, false)) return 'graphql';
  }
  const at = prefix !== '' && path.startsWith(prefix) ? prefix.length : 0;
  if (segmentAt(path, at, '/graphql', false)) return 'graphql';
  if (!segmentAt(path, at, '/search', true)) return 'core';
  return segmentAt(path, at, '/search/code', true) ? 'code_search' : 'search';
}
