/**
 * One upstream's GraphQL runtime (`graphql: true`), built once with the upstream: where its
 * endpoint is (src/http/graphql-endpoint.ts), the pass-through that carries requests with a client's own
 * credential (http-proxy-3, whatever `pass_through` says), and the short-lived answer cache of
 * pooled queries (`graphql_cache_seconds`; off at 0).
 */
import { LRUCache } from 'lru-cache';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import type { PassThrough } from '../context.js';
import { graphqlEndpoint, graphqlRequestPath, withoutQuery } from '../../http/graphql-endpoint.js';

/** Byte bound of one upstream's GraphQL answer cache. */
export const GRAPHQL_CACHE_MAX_BYTES = 32 * 1024 * 1024;

/** A cached answer to a pooled query: what the client gets again, and the token that fetched it. */
export interface GraphqlAnswer {
  /** Content-Type and the like: the pool's x-ratelimit-* are added when it is served. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly token: string | undefined;
  /** Epoch ms when it was stored (for Age and the Cache-Status ttl). */
  readonly storedAt: number;
}

export interface GraphqlCache {
  readonly ttlSeconds: number;
  get(key: string): GraphqlAnswer | undefined;
  set(key: string, answer: GraphqlAnswer): void;
}

export interface GraphqlRuntime {
  /** Whether a request is a GraphQL call this runtime takes: POST on `<route>/graphql`. */
  serves(method: string | undefined, path: string): boolean;
  /** The upstream path (and query) a GraphQL request goes to (`/api/graphql` on Enterprise Server). */
  upstreamPath(path: string): string;
  readonly passThrough: PassThrough;
  /** Present when `graphql_cache_seconds` > 0. */
  readonly cache: GraphqlCache | undefined;
  close(): void;
}

function answerSize(key: string, answer: GraphqlAnswer): number {
  let size = key.length + answer.body.length + 64;
  for (const [name, value] of Object.entries(answer.headers)) size += name.length + value.length;
  return size;
}

function createCache(ttlSeconds: number, maxEntryBytes: number): GraphqlCache {
  const lru = new LRUCache<string, GraphqlAnswer>({
    maxSize: GRAPHQL_CACHE_MAX_BYTES,
    maxEntrySize: Math.min(maxEntryBytes, GRAPHQL_CACHE_MAX_BYTES),
    sizeCalculation: (answer, key) => answerSize(key, answer),
    ttl: ttlSeconds * 1000,
    ttlAutopurge: false,
    allowStale: false,
    updateAgeOnGet: false,
  });
  return {
    ttlSeconds,
    get: (key) => lru.get(key),
    set: (key, answer) => {
      lru.set(key, answer);
    },
  };
}

/** `passThrough` carries the calls made with a client's own credential (the pass-through path's forwarder, whatever `pass_through` says). */
export function createGraphqlRuntime(
  cfg: UpstreamConfig,
  basePath: string,
  passThrough: PassThrough,
  maxEntryBytes: number,
): GraphqlRuntime {
  const requestPath = graphqlRequestPath(basePath);
  const endpoint = graphqlEndpoint(basePath);
  return {
    serves: (method, path) => method === 'POST' && withoutQuery(path) === requestPath,
    upstreamPath: (path) => endpoint + path.slice(withoutQuery(path).length),
    passThrough,
    cache: cfg.graphql_cache_seconds > 0 ? createCache(cfg.graphql_cache_seconds, maxEntryBytes) : undefined,
    close: () => passThrough.close(),
  };
}
