/**
 * What the proxy answers, as a value. Every step of the request path returns one of these, and
 * `answer()` (src/http/answer.ts) is the one place that writes it to the client. Each reply
 * carries what the access log and the metrics record about it.
 */
import type { Readable } from 'node:stream';
import type { CacheEntry } from '../cache/rules/entry.js';
import type { CacheOutcome } from './headers/cache-status.js';
import { responseHeadersForClient, type HeaderMap } from './headers/hop-by-hop.js';
import type { PoolHeaders } from '../pool/rules/pool-headers.js';

/** What the log line and the metrics record for a request. */
export interface Served {
  outcome: CacheOutcome | undefined;
  upstreamStatus: number | undefined;
  /** Name of the pool token used, if any (never its value). */
  token: string | undefined;
}

export type Reply = Served &
  (
    | {
        /** A stored response (or one just fetched), with its Cache-Status and current Age. */
        kind: 'entry';
        entry: CacheEntry;
        cacheStatus: string;
        age: number;
        /** [name, value, ...] appended to the stored headers (the pool's rate-limit headers). */
        extra: readonly string[] | undefined;
      }
    | {
        /** An upstream answer passed on as it comes: headers, what was read so far, then the rest. */
        kind: 'stream';
        status: number;
        headers: Record<string, string | string[]>;
        head: readonly Buffer[];
        rest: Readable | undefined;
        /** The body was fetched for a HEAD request's sake (a GET): only the headers go out. */
        headersOnly: boolean;
        onBodyError(err: unknown): void;
      }
    | {
        /** A complete answer the proxy composed itself (GET /rate_limit for pool consumers). */
        kind: 'body';
        status: number;
        headers: Record<string, string>;
        body: Buffer;
      }
    | {
        /** An error in GitHub's shape: {"message": ..., "documentation_url": ...}. */
        kind: 'error';
        status: number;
        message: string;
        headers: Record<string, string> | undefined;
      }
  );

export type ErrorReply = Extract<Reply, { kind: 'error' }>;

/** Nothing happened upstream and nothing was cached: the Served of the proxy's own answers. */
export const NOT_SERVED: Served = { outcome: undefined, upstreamStatus: undefined, token: undefined };

export type StreamReply = Extract<Reply, { kind: 'stream' }>;

export interface Streamed {
  status: number;
  /** The upstream's response headers: the end-to-end ones go to the client. */
  upstreamHeaders: HeaderMap;
  /** Cache-Status, when the upstream is a caching one. */
  cacheStatus: string | undefined;
  /** The pool's headers replace the token's x-ratelimit-* (pool consumers only). */
  pool: PoolHeaders | undefined;
  token: string | undefined;
  head: readonly Buffer[];
  rest: Readable | undefined;
  headersOnly: boolean;
  onBodyError(err: unknown): void;
}

/** An upstream answer passed on to the client as it comes (outcome: bypass). */
export function streamReply(streamed: Streamed): StreamReply {
  const headers = responseHeadersForClient(streamed.upstreamHeaders);
  if (streamed.cacheStatus !== undefined) headers['cache-status'] = streamed.cacheStatus;
  streamed.pool?.apply(headers, streamed.token);
  const { status, head, rest, headersOnly, onBodyError, token } = streamed;
  return { kind: 'stream', status, headers, head, rest, headersOnly, onBodyError, outcome: 'bypass', upstreamStatus: status, token };
}
