/**
 * One undici Pool per upstream (keep-alive, bounded connections, timeouts), a small second one
 * that retries go out on (so a retry never reuses the connection that just failed), the upstream's
 * retry state (retries.ts), and the mapping of client-library errors to the proxy's 502/504.
 */
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import type { UpstreamFailure } from '../http/errors.js';
import { basePrefixOf } from '../http/route.js';
import type { UpstreamConfig } from '../platform/config/schema.js';
import { NO_TRACING, type Tracing } from '../platform/trace/tracing.js';
import { Retries, type RetryObserver } from './retries.js';
import { transitOfError, type TransitReason } from './retry-rules.js';

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
    /** A retry: it goes out on the retry pool, never on the connection the failed attempt used. */
    retry?: boolean;
  }): Promise<Dispatcher.ResponseData>;
  /** Retries in transit of this upstream: the budget and the decision after each attempt. */
  readonly retries: Retries;
  close(): Promise<void>;
}

/** Retries are at most a tenth of the traffic (the budget): their pool is a fraction of the main one. */
const RETRY_POOL_SHARE = 8;

export function createUpstreamClient(cfg: UpstreamConfig, tracing: Tracing = NO_TRACING, onRetry?: RetryObserver): UpstreamClient {
  const url = new URL(cfg.url);
  const options = {
    pipelining: 1,
    connectTimeout: cfg.timeouts.connect_ms,
    headersTimeout: cfg.timeouts.headers_ms,
    bodyTimeout: cfg.timeouts.body_ms,
    keepAliveTimeout: 30_000,
  };
  const pool = new Pool(url.origin, { ...options, connections: cfg.connections });
  let retryPool: Pool | undefined;
  const retries = new Retries(cfg.retries, onRetry);
  return {
    name: cfg.name,
    origin: url.origin,
    basePath: url.pathname || '/',
    basePrefix: basePrefixOf(url.pathname || '/'),
    tracing,
    request: (opts) => {
      retries.sent();
      const on = opts.retry === true ? (retryPool ??= new Pool(url.origin, { ...options, connections: retryConnections(cfg) })) : pool;
      return on.request({ method: opts.method, path: opts.path, headers: opts.headers, body: opts.body, signal: opts.signal });
    },
    retries,
    close: async () => {
      await Promise.all([pool.close(), retryPool?.close()]);
    },
  };
}

const retryConnections = (cfg: UpstreamConfig): number => Math.max(2, Math.ceil(cfg.connections / RETRY_POOL_SHARE));

/** The code of an error thrown by undici (or its cause's), else "error". */
function errorCode(err: unknown): string {
  const errorLike = err as { code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof errorLike?.code === 'string') return errorLike.code;
  return typeof errorLike?.cause?.code === 'string' ? errorLike.cause.code : 'error';
}

/** The retry reason of an error thrown before the response head arrived (retry-rules.ts), or undefined. */
export const transitOfThrown = (err: unknown): TransitReason | undefined => transitOfError(errorCode(err));

/** Classifies an error thrown while talking to an upstream. */
export function classifyUpstreamError(err: unknown): UpstreamFailure {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return { status: 504, detail: (err as { code: string }).code };
  }
  const code = errorCode(err);
  if (code === 'ETIMEDOUT') return { status: 504, detail: code };
  return { status: 502, detail: code };
}
