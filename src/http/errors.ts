/**
 * Every error response the proxy itself produces, in GitHub's shape:
 * {"message": "...", "documentation_url": "..."}. One place declares them all; each is a reply
 * value that `answer()` (or `writeError` outside a routed request) writes.
 */
import { NOT_SERVED, type ErrorReply, type Served } from './reply.js';

/**
 * Why the pool has no token for a request, as the answer names it.
 * exhausted: every token is spent or paused (answer 429 with Retry-After, or serve stale);
 * dead: every token was rejected by the upstream (503: the operator must replace them);
 * busy: no slot freed up within the queue timeout, or the queue is full (503);
 * share, max_per_hour, max_concurrency: this consumer is over its share or a cap of its own, while others go on.
 */
/** paced: every token has spent its secondary-limit points for now (the pool's pacing). */
export type Unavailable = 'exhausted' | 'dead' | 'busy' | 'paced' | ConsumerRefusal;

/**
 * The consumer, not the pool, is held back (fair share, consumer keys on): share: it spent its
 * share and what it may borrow (the rest is other consumers' reserves); max_per_hour: its own
 * hourly cap (both 429); max_concurrency: no slot of its own freed up in time (503).
 */
export type ConsumerRefusal = 'share' | 'max_per_hour' | 'max_concurrency' | 'points';

/** What went wrong talking to an upstream, as the proxy answers it (src/upstream/fetch.ts classifies errors). */
export interface UpstreamFailure {
  status: 502 | 504;
  detail: string;
}

export const DOCUMENTATION_URL = 'https://github.com/etagere-proxy/etagere#errors';

export function errorBody(message: string): Buffer {
  return Buffer.from(JSON.stringify({ message, documentation_url: DOCUMENTATION_URL }));
}

function error(status: number, message: string, headers?: Record<string, string>, served: Served = NOT_SERVED): ErrorReply {
  return { kind: 'error', status, message, headers, ...served };
}

/** An upstream as errors name it: its name, or its config (then its host is named too). */
export type UpstreamLabel = string | { readonly name: string; readonly url: string };

/**
 * `"github" (api.github.com)`: the configured name and the URL's host (with its port). Only the
 * host: never the URL's credentials, path or query.
 */
export function describeUpstream(upstream: UpstreamLabel): string {
  if (typeof upstream === 'string') return `"${upstream}"`;
  let host: string;
  try {
    host = new URL(upstream.url).host;
  } catch {
    return `"${upstream.name}"`;
  }
  return host.length > 0 ? `"${upstream.name}" (${host})` : `"${upstream.name}"`;
}

/** `headers`: what every answer of this upstream carries, Cache-Status on a caching one. */
const badGateway = (upstream: UpstreamLabel, detail: string, served?: Served, headers?: Record<string, string>): ErrorReply =>
  error(502, `Bad Gateway: upstream ${describeUpstream(upstream)} failed (${detail})`, headers, served);
const gatewayTimeout = (upstream: UpstreamLabel, detail: string, served?: Served, headers?: Record<string, string>): ErrorReply =>
  error(504, `Gateway Timeout: upstream ${describeUpstream(upstream)} did not answer in time (${detail})`, headers, served);

/** The outcome of a request that failed after it reached the cache or the upstream. */
const FAILED: Served = { outcome: 'error', upstreamStatus: undefined, token: undefined };

/**
 * One consumer held back (consumer keys on) while the pool still serves the others: 429 when it
 * spent its share and all it may borrow (the rest of the window's quota is other consumers'
 * reserves) or reached its max_per_hour; 503 when no slot of its own (max_concurrency) freed up
 * in time. The message names no consumer and no figure of another consumer.
 */
function consumerHeldBack(reason: ConsumerRefusal, retryAfterSeconds: number, headers: Record<string, string>): ErrorReply {
  if (reason === 'max_concurrency')
    return error(
      503,
      "Service Unavailable: this consumer key has reached its max_concurrency of requests in flight on the proxy's token pool; retry shortly",
      headers,
      FAILED,
    );
  const why =
    reason === 'share'
      ? "this consumer key has spent its fair share of the proxy's token pool for this window, and what is left is held for other consumers' reserves"
      : reason === 'points'
        ? "the secondary rate limit points the proxy's pool tokens have left for now are owed to other consumers"
        : "this consumer key has reached its max_per_hour cap of upstream requests on the proxy's token pool";
  return error(429, `API rate limit exceeded for this consumer: ${why}; retry after ${retryAfterSeconds} s`, headers, FAILED);
}

export const errors = {
  badRequest: (reason: string) => error(400, `Bad request: ${reason}`),
  noRoute: () => error(404, 'Not Found: no upstream is configured for this path'),
  methodNotAllowed: (method: string) =>
    error(405, `Method ${method} is not allowed: this upstream is read-only through the proxy`, { allow: 'GET, HEAD' }),
  badGateway,
  gatewayTimeout,
  /** 504 for a timeout, else 502, from a classified upstream failure. */
  upstreamFailed: (upstream: UpstreamLabel, failure: UpstreamFailure, served: Served = FAILED, headers?: Record<string, string>) =>
    failure.status === 504
      ? gatewayTimeout(upstream, failure.detail, served, headers)
      : badGateway(upstream, failure.detail, served, headers),
  /** The request path itself threw: a bug, answered as a 502 rather than a hung request. */
  internal: (upstream: UpstreamLabel, headers?: Record<string, string>) => badGateway(upstream, 'internal error', FAILED, headers),
  /**
   * No pool token can take the request: 429 when every token is spent or paused, or when this
   * consumer is over its fair share or its hourly cap (the others go on); else 503.
   */
  poolUnavailable: (reason: Unavailable, retryAfterSeconds: number, headers: Record<string, string>) => {
    const withRetryAfter = { ...headers, 'retry-after': String(retryAfterSeconds) };
    if (reason === 'share' || reason === 'max_per_hour' || reason === 'max_concurrency' || reason === 'points')
      return consumerHeldBack(reason, retryAfterSeconds, withRetryAfter);
    if (reason === 'exhausted') {
      return error(
        429,
        `API rate limit exceeded: every token in the proxy's pool is spent or paused; retry after ${retryAfterSeconds} s`,
        withRetryAfter,
        FAILED,
      );
    }
    if (reason === 'paced') {
      return error(
        429,
        `API rate limit exceeded: every token in the proxy's pool has spent its secondary rate limit points for now; retry after ${retryAfterSeconds} s`,
        withRetryAfter,
        FAILED,
      );
    }
    if (reason === 'dead') {
      return error(
        503,
        "Service Unavailable: the proxy's pool has no token the upstream accepts (each was rejected with 401, or no GitHub App installation token could be minted); the operator must replace them",
        withRetryAfter,
        FAILED,
      );
    }
    return error(503, 'Service Unavailable: every pool token is busy; retry shortly', withRetryAfter, FAILED);
  },
  /** only-if-cached (RFC 9111 section 5.2.1.7) and nothing usable is stored. */
  onlyIfCached: (cacheStatus: string) =>
    error(
      504,
      'Gateway Timeout: only-if-cached was requested and no usable response is stored',
      { 'cache-status': cacheStatus },
      {
        outcome: 'miss',
        upstreamStatus: undefined,
        token: undefined,
      },
    ),
  /** Consumer access control: the request carried no known consumer key. */
  consumerKeyRequired: () =>
    error(401, 'Requires a consumer key: send it as X-Etagere-Key, or in Authorization (token, Bearer, or Basic credentials)', {
      'www-authenticate': 'Basic realm="etagere"',
    }),
  /** Consumer access control: X-Etagere-Key held a value that is no key of this proxy. */
  consumerKeyUnknown: () =>
    error(401, 'Unknown consumer key: the X-Etagere-Key sent is not a key of this proxy', { 'www-authenticate': 'Basic realm="etagere"' }),
  /** Consumer access control: Authorization held neither a consumer key, nor a token of a configured issuer, nor a GitHub credential. */
  credentialNotForwarded: () =>
    error(401, 'Bad credentials: Authorization holds no consumer key of this proxy and no GitHub token; it was not sent upstream', {
      'www-authenticate': 'Basic realm="etagere"',
    }),
  /** A scoped consumer (src/pool/rules/allow.ts) asked for a method and path no rule of its scope allows. */
  scopeRefused: (consumer: string, method: string) =>
    error(403, `Forbidden: no rule of consumer "${consumer}"'s allow list allows ${method} on this path`),
  /** An OIDC consumer whose token's claim would fill a scope glob with a value it may not have (`*`, `..`, an extra `/`). */
  claimRefused: (consumer: string, claim: string) =>
    error(403, `Forbidden: claim "${claim}" of consumer "${consumer}" has a value not allowed in its scope`),
  /** An OIDC token that failed a check (src/pool/consumers/oidc.ts says which); the token itself is never named. */
  tokenRefused: (check: string) =>
    error(401, `Bad consumer token: ${check}`, { 'www-authenticate': 'Bearer realm="etagere", error="invalid_token"' }),
  /** A pooled consumer's GraphQL call the proxy will not send (src/paths/graphql/operation.ts says why): 400 or 403. */
  graphqlRefused: (status: 400 | 403, message: string) => error(status, message),
  /** A GraphQL request body over the proxy's limit (src/paths/graphql/limits.ts). */
  payloadTooLarge: (maxBytes: number) =>
    error(413, `Payload Too Large: a GraphQL request body on the token pool may be at most ${maxBytes} bytes`, { connection: 'close' }),
  /** An Expect other than 100-continue (RFC 9110 section 10.1.1). */
  expectationFailed: () => error(417, 'Expectation Failed: the only expectation supported is "100-continue"'),
  shuttingDown: () => error(503, 'Service Unavailable: the proxy is shutting down', { connection: 'close', 'retry-after': '1' }),
  /** The webhook receiver (src/paths/webhooks/receiver.ts): only POST. */
  webhookMethod: (method: string) => error(405, `Method ${method} is not allowed: the webhook receiver takes POST`, { allow: 'POST' }),
  /** A delivery whose X-Hub-Signature-256 is missing or does not match the webhook's secret. */
  webhookSignature: () => error(401, 'Bad signature: X-Hub-Signature-256 is missing or does not match the webhook secret'),
  /** A delivery body over webhooks.max_body_bytes (GitHub caps payloads at 25 MB). */
  webhookTooLarge: (maxBytes: number) =>
    error(413, `Payload Too Large: a webhook delivery may be at most ${maxBytes} bytes`, { connection: 'close' }),
  /** A delivery whose read slot went to a later one (each may be up to the body cap). */
  webhookBusy: () =>
    error(503, 'Service Unavailable: too many webhook deliveries at once; retry shortly', { 'retry-after': '1', connection: 'close' }),
  /** A delivery whose body did not arrive in time (webhooks.read_timeout_ms), or too slowly. */
  webhookTooSlow: (deadlineMs: number, minBytesPerSecond: number) =>
    error(
      408,
      `Request Timeout: a webhook delivery must arrive whole within ${deadlineMs} ms, at ${minBytesPerSecond} bytes a second at least after the first second`,
      { connection: 'close' },
    ),
} as const;
