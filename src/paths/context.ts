/**
 * What the handler knows about one client request once it is routed: read-only for the whole
 * request path. What happened to the request (cache outcome, upstream status, token) is not
 * written here: each step returns it, and `answer()` hands it back for the log and metrics.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Credential } from '../pool/consumers/credential.js';
import type { UpstreamRuntime } from './upstreams.js';
import type { SpanHandle } from '../platform/trace/tracing.js';
import type { HeadBlocks } from '../http/header-block.js';

export interface RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly id: string;
  readonly upstream: UpstreamRuntime;
  readonly pathname: string;
  readonly search: string;
  /** Path and query as sent upstream. */
  readonly path: string;
  readonly method: 'GET' | 'HEAD';
  /** Route template of the path, for metric labels (never the raw path). */
  readonly route: string;
  /** Whose credential goes upstream (client, pool token, none). */
  readonly cred: Credential;
  /** The span the request's own spans descend from (its server span), when tracing is on. */
  readonly span?: SpanHandle | undefined;
  /** Heads written as one block per form (src/http/header-block.ts), when its self-test passed. */
  readonly heads?: HeadBlocks | undefined;
}

/**
 * A request as the paths answer it: its request and response, id, upstream and method, which is
 * what `answer()` takes (src/http/answer.ts) and more. A routed GET or HEAD (`RequestContext`) is
 * one; so is a GraphQL POST (src/paths/graphql/exchange.ts).
 */
export type AnswerContext = Pick<RequestContext, 'req' | 'res' | 'id' | 'upstream' | 'heads'> & { readonly method: string };

/** A request streamed to the upstream as it is (http-proxy-3): the pass-through path, and GraphQL with a client's own credential. */
export interface PassThrough {
  /**
   * `pathname` is the client's path (the cache's view); `path` is what goes upstream. `body`: the
   * request body to send in place of `req`'s own (GraphQL: what was read of it, then the rest).
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    pathname: string,
    path: string,
    requestId: string,
    span?: SpanHandle,
    body?: Readable,
  ): void;
  close(): void;
}
