/** The per-request state the handler threads through the request path. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CacheOutcome } from '../headers/cache-status.js';
import type { UpstreamRuntime } from './upstreams.js';

export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly id: string;
  readonly upstream: UpstreamRuntime;
  readonly pathname: string;
  readonly search: string;
  /** Path and query as sent upstream. */
  readonly path: string;
  readonly method: 'GET' | 'HEAD';
  /** Filled in along the way, for the log line and metrics. */
  outcome: CacheOutcome | undefined;
  upstreamStatus: number | undefined;
}
