/**
 * What the proxy answers, as a value. Every step of the request path returns one of these, and
 * `answer()` (src/http/answer.ts) is the one place that writes it to the client. Each reply
 * carries what the access log and the metrics record about it.
 */
import type { Readable } from 'node:stream';
import type { CacheOutcome } from './headers/fields.js';
import { responseHeadersForClient, type HeaderMap } from './headers/hop-by-hop.js';

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
        /** A stored response (or one just fetched) in this client's form, with its Cache-Status and current Age. */
        kind: 'form';
        form: Representation;
        cacheStatus: string;
        age: number;
        /** [name, value, ...] appended to the form's headers (the pool's rate-limit headers). */
        extra: readonly string[] | undefined;
        /** A GET with one byte range may be served a part of it (the rfc9111 policy: RFC 9110 section 14). */
        ranges: boolean;
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

/**
 * A stored response as one client gets it (its coding, its Link and Location, its body URLs),
 * resolved before `answer()` and kept for the next client that gets the same form
 * (src/cache/store/entry-form.ts).
 */
export interface Representation {
  readonly status: number;
  /** [name, value, ...] ending with content-length (none when `decode`). */
  readonly headers: string[];
  readonly body: Buffer;
  /** `body` is gzip, decoded as it goes out (chunked). */
  readonly decode: boolean;
  /** The stored validators, which a conditional request is compared with. */
  readonly etag: string | undefined;
  readonly lastModified: string | undefined;
  /** answer()'s header list for this form (answer.ts, `outgoingList`): none until the form is first sent. */
  outgoing: Outgoing | undefined;
  /** Its head as one block (header-block.ts): undefined until first sent, null when it has none. */
  block?: Block | null | undefined;
}

/** A form's status line and fields, checked once (header-block.ts); `length` is its Content-Length. */
export interface Block {
  readonly head: string;
  readonly length: number;
  /** The last `extra` list seen and its fields as text (the pool's headers change about once a second). */
  extra: readonly string[] | undefined;
  extraText: string;
}

/** `headers`, the `extra` list last seen, then slots for the fields of each request. */
export interface Outgoing {
  readonly extra: readonly string[] | undefined;
  readonly list: string[];
}

/**
 * Rewrites the headers of a streamed answer: the pool's x-ratelimit-* in place of the token's, for
 * pool consumers (src/pool/rules/report.ts).
 */
export interface StreamHeaders {
  apply(out: Record<string, string | string[] | undefined>, token: string | undefined): void;
}

/** Nothing happened upstream and nothing was cached: the Served of the proxy's own answers. */
export const NOT_SERVED: Served = { outcome: undefined, upstreamStatus: undefined, token: undefined };

export type StreamReply = Extract<Reply, { kind: 'stream' }>;

export type FormReply = Extract<Reply, { kind: 'form' }>;

export interface Streamed {
  status: number;
  /** The upstream's response headers: the end-to-end ones go to the client. */
  upstreamHeaders: HeaderMap;
  /** Cache-Status, when the upstream is a caching one. */
  cacheStatus: string | undefined;
  /** The pool's headers replace the token's x-ratelimit-* (pool consumers only). */
  pool: StreamHeaders | undefined;
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
