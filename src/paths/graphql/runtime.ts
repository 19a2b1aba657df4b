/**
 * One upstream's GraphQL runtime (`graphql: true`), built once with the upstream: where its
 * endpoint is (src/http/route.ts), the pass-through that carries what the proxy does
 * not read (a call without a credential, a client's body over the read cap: http-proxy-3, whatever
 * `pass_through` says), and how long its query answers are cached (`graphql_cache_seconds`; 0: off).
 */
import type { UpstreamConfig } from '../../platform/config/schema.js';
import type { PassThrough } from '../context.js';
import { graphqlEndpoint, graphqlRequestPath, withoutQuery } from '../../http/route.js';

export interface GraphqlRuntime {
  /** Whether a request is a GraphQL call this runtime takes: POST on `<route>/graphql`. */
  serves(method: string | undefined, path: string): boolean;
  /** The upstream path (and query) a GraphQL request goes to (`/api/graphql` on Enterprise Server). */
  upstreamPath(path: string): string;
  readonly passThrough: PassThrough;
  /** How long a query's answer is kept (`graphql_cache_seconds`); 0: not cached. */
  readonly ttlSeconds: number;
  close(): void;
}

/** `passThrough` carries the calls the proxy does not read (the pass-through path's forwarder, whatever `pass_through` says). */
export function createGraphqlRuntime(cfg: UpstreamConfig, basePath: string, passThrough: PassThrough): GraphqlRuntime {
  const requestPath = graphqlRequestPath(basePath);
  const endpoint = graphqlEndpoint(basePath);
  return {
    serves: (method, path) => method === 'POST' && withoutQuery(path) === requestPath,
    upstreamPath: (path) => endpoint + path.slice(withoutQuery(path).length),
    passThrough,
    ttlSeconds: cfg.graphql_cache_seconds,
    close: () => passThrough.close(),
  };
}
