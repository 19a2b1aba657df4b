/**
 * One undici Pool per upstream (keep-alive, bounded connections, timeouts), and the mapping
 * of client-library errors to the proxy's 502/504.
 */
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import type { UpstreamFailure } from '../http/errors.js';
import { basePrefixOf } from '../http/route.js';
import type { UpstreamConfig } from '../platform/config/schema.js';
import { NO_TRACING, type Tracing } from '../platform/trace/tracing.js';

export interface UpstreamClient {
  readonly name: string;
  readonly origin: string;
  /** Path component of the upstream URL ("/" or e.g. "/api/v3"). */
  readonly basePath: string;
  /** The base path as a prefix for upstream paths: "" for "/", else without a trailing slash ("/api/v3"). */
  readonly basePrefix: string;
  /** The process's tracing: each request is a client span, its `traceparent` the proxy's (fetch.ts). */
  readonly tracing: Tracing;
  request(opts: {
    /** POST only for GraphQL calls (src/paths/graphql/exchange.ts). */
    method: 'GET' | 'HEAD' | 'POST';
    path: string;
    headers: Record<string, string | string[]>;
    body?: Buffer;
    signal?: AbortSignal;
  }): Promise<Dispatcher.ResponseData>;
  close(): Promise<void>;
}

export function createUpstreamClient(cfg: UpstreamConfig, tracing: Tracing = NO_TRACING): UpstreamClient {
  const url = new URL(cfg.url);
  const pool = new Pool(url.origin, {
    connections: cfg.connections,
    pipelining: 1,
    connectTimeout: cfg.timeouts.connect_ms,
    headersTimeout: cfg.timeouts.headers_ms,
    bodyTimeout: cfg.timeouts.body_ms,
    keepAliveTimeout: 30_000,
  });
  return {
    name: cfg.name,
    origin: url.origin,
    basePath: url.pathname || '/',
    basePrefix: basePrefixOf(url.pathname || '/'),
    tracing,
    request: (opts) =>
      pool.request({
        method: opts.method,
        path: opts.path,
        headers: opts.headers,
        body: opts.body,
        signal: opts.signal,
      }),
    close: () => pool.close(),
  };
}

/** Classifies an error thrown while talking to an upstream. */
export function classifyUpstreamError(err: unknown): UpstreamFailure {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return { status: 504, detail: (err as { code: string }).code };
  }
  const errorLike = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code =
    typeof errorLike?.code === 'string' ? errorLike.code : typeof errorLike?.cause?.code === 'string' ? errorLike.cause.code : 'error';
  if (code === 'ETIMEDOUT') return { status: 504, detail: code };
  return { status: 502, detail: code };
}
