/**
 * Pure: where GitHub's GraphQL endpoint is, under an upstream's base path. On GitHub.com the REST
 * base is `/` and GraphQL is `POST /graphql`; on GitHub Enterprise Server the REST base is
 * `/api/v3` and GraphQL is `POST /api/graphql` (one level up, not `/api/v3/graphql`).
 *
 * Clients ask the proxy for `<route>/graphql` (Octokit with the proxy as its base URL does), which
 * routing turns into `<base>/graphql`; that path is sent to `graphqlEndpoint(base)`.
 */
import { basePrefixOf } from './route.js';

const ENTERPRISE_REST = /\/v3$/;

/** The GraphQL endpoint's upstream path for a REST base path: `/graphql`, `/api/graphql` under `/api/v3`. */
export function graphqlEndpoint(basePath: string): string {
  const prefix = basePrefixOf(basePath);
  return `${prefix.replace(ENTERPRISE_REST, '')}/graphql`;
}

/** The upstream path (without its query) a client's `<route>/graphql` becomes: `<base>/graphql`. */
export function graphqlRequestPath(basePath: string): string {
  return `${basePrefixOf(basePath)}/graphql`;
}

/** `path` without its query string. */
export function withoutQuery(path: string): string {
  const query = path.indexOf('?');
  return query === -1 ? path : path.slice(0, query);
}
