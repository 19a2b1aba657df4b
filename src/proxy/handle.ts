/**
 * The orchestrating request handler. Read top to bottom, it is the request path:
 *   target check -> route -> method gate (pass-through or 405) -> cached path (GET/HEAD)
 *   or streaming forward (policy none) -> log and count when the response closes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config, UpstreamConfig } from '../config/schema.js';
import { createAccessLog } from '../log/access.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { createHttpCache, type HttpCache } from './cached.js';
import { errors } from './errors.js';
import type { Exchange } from './exchange.js';
import { forward } from './forward.js';
import { requestId } from './request-id.js';
import { createRouter, upstreamPath } from './route.js';
import { parseTarget } from './target.js';
import { createUpstreamRuntime } from './upstreams.js';

export interface Handler {
  (req: IncomingMessage, res: ServerResponse): void;
  readonly cache: HttpCache;
  close(): Promise<void>;
}

export function createHandler(config: Config, logger: Logger, metrics: Metrics): Handler {
  const router = createRouter(config.upstreams);
  const access = createAccessLog(logger);
  const cache = createHttpCache(config, logger, metrics);
  const onUnsafeResponse = (cfg: UpstreamConfig, pathname: string, status: number): void => {
    // RFC 9111 section 4.4: a non-error response to an unsafe method invalidates the target URI.
    if (status >= 200 && status < 400) cache.invalidatePath(cfg.name, pathname);
  };
  const runtimes = config.upstreams.map((u) => createUpstreamRuntime(u, onUnsafeResponse));

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const started = process.hrtime.bigint();
    const socket = req.socket;
    const bytesBefore = socket.bytesWritten;
    const id = requestId(req.headers['x-request-id']);
    let x: Exchange | undefined;

    res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const upstreamName = x?.upstream.cfg.name ?? '-';
      metrics.observeRequest(upstreamName, req.method ?? '-', res.statusCode, x?.outcome, seconds);
      access({
        reqId: id,
        method: req.method ?? '-',
        path: req.url ?? '',
        upstream: upstreamName,
        status: res.statusCode,
        cache: x?.outcome,
        upstreamStatus: x?.upstreamStatus,
        durationMs: Math.round(seconds * 1e6) / 1e3,
        bytes: socket.bytesWritten - bytesBefore,
        aborted: !res.writableFinished,
      });
    });

    const target = parseTarget(req.url);
    if (target.ok === false) {
      drain(req);
      res.setHeader('x-request-id', id);
      errors.badRequest(res, target.reason);
      return;
    }
    const route = router.match(target.pathname);
    if (route === undefined) {
      drain(req);
      res.setHeader('x-request-id', id);
      errors.noRoute(res);
      return;
    }
    const upstream = runtimes[route.index]!;
    const path = upstreamPath(upstream.cfg, upstream.client.basePath, target.pathname, target.search);
    const method = req.method;

    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('x-request-id', id);
      if (upstream.passThrough === undefined) {
        drain(req);
        errors.methodNotAllowed(res, method ?? '?');
        return;
      }
      upstream.passThrough.forward(req, res, target.pathname, path, id);
      return;
    }
    drain(req);

    x = { req, res, id, upstream, pathname: target.pathname, search: target.search, path, method, outcome: undefined, upstreamStatus: undefined };
    if (upstream.cfg.cache.policy === 'none') {
      forward(x, cache.links, logger, metrics);
      return;
    }
    cache.serve(x);
  };

  return Object.assign(handler, {
    cache,
    close: async (): Promise<void> => {
      for (const rt of runtimes) rt.passThrough?.close();
      await Promise.all(runtimes.map((rt) => rt.client.close()));
    },
  });
}

/** GET and HEAD bodies are never forwarded; read and drop them so keep-alive keeps working. */
function drain(req: IncomingMessage): void {
  if (!req.complete) req.resume();
}
