/** The per-request state the handler threads through the request path. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CacheOutcome } from '../headers/cache-status.js';
import type { Credential } from './credential.js';
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
  /** Route template of the path, for metric labels (never the raw path). */
  readonly route: string;
  /** Whose credential goes upstream (client, pool token, none). */
  readonly cred: Credential;
  /** Filled in along the way, for the log line and metrics. */
  outcome: CacheOutcome | undefined;
  upstreamStatus: number | undefined;
  /** Name of the pool token used, if any (never its value). */
  token: string | undefined;
}
