/**
 * Streaming forward of a GET or HEAD that the cache does not handle (policy none, Range
 * requests): status, end-to-end headers and body bytes go to the client as the upstream sends
 * them. `streamTo` also carries the cached path's bodies over the entry cap (src/proxy/cached.ts).
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { requestHeadersForUpstream, responseHeadersForClient } from '../headers/hop-by-hop.js';
import { cacheStatus } from '../headers/cache-status.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { classifyUpstreamError } from '../upstream/client.js';
import { errors } from './errors.js';
import { rewriteLinkHeaders, type LinkSettings } from './respond.js';
import type { Exchange } from './exchange.js';
import { fetchPooled, type PoolContext } from './pooled-fetch.js';

const BYPASS = cacheStatus({ fwd: 'bypass' });

/** Bodies of pooled streamed answers are read up to this size before they go out (to spot limit errors). */
const POOLED_HEAD_BYTES = 64 * 1024;

export function forward(x: Exchange, links: LinkSettings, logger: Logger, metrics: Metrics, poolCtx?: PoolContext): void {
  const { req, res, upstream } = x;
  const headers = requestHeadersForUpstream(req.headers);
  headers['x-request-id'] = x.id;
  if (x.cred.kind === 'pool' && poolCtx !== undefined) {
    forwardPooled(x, headers, links, logger, metrics, poolCtx);
    return;
  }
  // No AbortSignal per request (measurably costly): if the client leaves, `streamTo` destroys the
  // upstream body; an upstream that has not answered yet is bounded by the configured timeouts.
  let clientGone = false;
  res.once('close', () => {
    if (!res.writableFinished) clientGone = true;
  });
  x.outcome ??= 'bypass';
  const sentAt = Date.now();
  upstream.client
    .request({ method: x.method, path: x.path, headers })
    .then((up) => {
      if (clientGone) {
        up.body.on('error', () => undefined); // destroying an undici body emits an abort error
        up.body.destroy();
        return;
      }
      x.upstreamStatus = up.statusCode;
      metrics.countUpstream(upstream.cfg.name, x.route, up.statusCode, (Date.now() - sentAt) / 1000);
      const out = responseHeadersForClient(up.headers);
      out['x-request-id'] = x.id;
      rewriteLinkHeaders(x, out, links);
      if (upstream.cfg.cache.policy !== 'none') out['cache-status'] = BYPASS;
      res.writeHead(up.statusCode, out);
      streamTo(up.body, res, (err) => {
        // Headers already went out: the only honest signal left is to cut the connection.
        logger.warn({ reqId: x.id, upstream: upstream.cfg.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
      });
    })
    .catch((err: unknown) => {
      if (clientGone) return; // the client went away; nothing to answer
      const f = classifyUpstreamError(err);
      metrics.countUpstream(upstream.cfg.name, x.route, 'error');
      x.outcome = 'error';
      logger.warn({ reqId: x.id, upstream: upstream.cfg.name, err: f.detail }, 'upstream request failed');
      errors.upstreamFailed(res, upstream.cfg.name, f);
    });
}

/**
 * Pipes an upstream body to the client. Plain `pipe` rather than stream.pipeline, whose per-call
 * AbortController and DOMException showed in profiles. An upstream error cuts the client
 * connection (never a silent short body); a client that leaves destroys the upstream body, and
 * so does one that left before the body was handed over (its 'close' has been and gone: an
 * unread body would hold its upstream connection for good, since undici's body timeout does
 * not run while the body is paused).
 */
export function streamTo(body: Readable, res: ServerResponse, onUpstreamError: (err: unknown) => void): void {
  body.on('error', (err) => {
    if (res.destroyed || res.writableFinished) return; // we destroyed it because the client left
    onUpstreamError(err);
    res.destroy();
  });
  if (res.destroyed) {
    body.destroy();
    return;
  }
  res.once('close', () => {
    if (!res.writableFinished) body.destroy();
  });
  body.pipe(res);
}

/**
 * The streaming forward for a pool consumer: the answer is looked at before it goes out (up to
 * POOLED_HEAD_BYTES), so that a token's 401 or rate limit is retried on another token and the
 * upstream's per-token x-ratelimit-* are replaced by the pool's.
 */
function forwardPooled(
  x: Exchange,
  headers: Record<string, string | string[]>,
  links: LinkSettings,
  logger: Logger,
  metrics: Metrics,
  poolCtx: PoolContext,
): void {
  const { res, upstream } = x;
  x.outcome ??= 'bypass';
  fetchPooled(upstream.client, { method: x.method, path: x.path, headers }, POOLED_HEAD_BYTES, poolCtx.pool).then(
    (p) => {
      if (p.kind === 'unavailable') {
        x.outcome = 'error';
        errors.poolUnavailable(res, p.reason, p.retryAfterSeconds, { ...poolCtx.headers.record(), 'x-request-id': x.id });
        return;
      }
      const { f } = p;
      x.token = p.token;
      if (f.kind === 'failed') {
        metrics.countUpstream(upstream.cfg.name, x.route, 'error');
        x.outcome = 'error';
        logger.warn({ reqId: x.id, upstream: upstream.cfg.name, err: f.failure.detail }, 'upstream request failed');
        errors.upstreamFailed(res, upstream.cfg.name, f.failure);
        return;
      }
      metrics.countUpstream(upstream.cfg.name, x.route, f.status, f.kind === 'response' ? (f.responseTime - f.requestTime) / 1000 : undefined);
      x.upstreamStatus = f.status;
      if (res.destroyed) {
        if (f.kind === 'too-large') f.rest.destroy();
        return;
      }
      const out = responseHeadersForClient(f.headers);
      out['x-request-id'] = x.id;
      poolCtx.headers.apply(out, p.token);
      rewriteLinkHeaders(x, out, links);
      if (upstream.cfg.cache.policy !== 'none') out['cache-status'] = BYPASS;
      if (f.kind === 'response') {
        res.writeHead(f.status, out);
        res.end(f.body);
        return;
      }
      res.writeHead(f.status, out);
      for (const chunk of f.head) res.write(chunk);
      streamTo(f.rest, res, (err) => {
        logger.warn({ reqId: x.id, upstream: upstream.cfg.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
      });
    },
    (err: unknown) => {
      logger.error({ reqId: x.id, err: (err as Error).message }, 'pooled forward failed');
      x.outcome = 'error';
      errors.badGateway(res, upstream.cfg.name, 'internal error');
    },
  );
}
