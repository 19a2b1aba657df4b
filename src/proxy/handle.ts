/**
 * The orchestrating request handler. Read top to bottom, it is the request path:
 * target check -> route -> method gate -> forward upstream -> respond -> log and count.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../config/schema.js';
import { requestHeadersForUpstream, responseHeadersForClient } from '../headers/hop-by-hop.js';
import { redactQuery, type Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { classifyUpstreamError, createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import { errors } from './errors.js';
import { createPassThrough, type PassThrough } from './pass-through.js';
import { requestId } from './request-id.js';
import { createRouter, upstreamPath } from './route.js';
import { parseTarget } from './target.js';

export interface Handler {
  (req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

interface UpstreamRuntime {
  client: UpstreamClient;
  passThrough: PassThrough | undefined;
}

export function createHandler(config: Config, logger: Logger, metrics: Metrics): Handler {
  const router = createRouter(config.upstreams);
  const runtimes: UpstreamRuntime[] = config.upstreams.map((u) => ({
    client: createUpstreamClient(u),
    passThrough: u.pass_through ? createPassThrough(u) : undefined,
  }));

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const started = process.hrtime.bigint();
    const socket = req.socket;
    const bytesBefore = socket.bytesWritten;
    const id = requestId(req.headers['x-request-id']);
    res.setHeader('x-request-id', id);
    let upstreamName = '-';
    let upstreamStatus: number | undefined;

    res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.requests.inc({ upstream: upstreamName, method: req.method ?? '-', status: String(res.statusCode) });
      metrics.requestDuration.observe({ upstream: upstreamName }, seconds);
      logger.info(
        {
          reqId: id,
          method: req.method,
          path: redactQuery(req.url ?? ''),
          upstream: upstreamName,
          status: res.statusCode,
          upstreamStatus,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          bytes: socket.bytesWritten - bytesBefore,
          aborted: !res.writableFinished || undefined,
        },
        'request',
      );
    });

    const target = parseTarget(req.url);
    if (!target.ok) {
      drain(req);
      errors.badRequest(res, target.reason);
      return;
    }
    const route = router.match(target.pathname);
    if (route === undefined) {
      drain(req);
      errors.noRoute(res);
      return;
    }
    const upstream = route.upstream;
    const rt = runtimes[route.index]!;
    upstreamName = upstream.name;
    const path = upstreamPath(upstream, rt.client.basePath, target.pathname, target.search);
    const method = req.method;

    if (method !== 'GET' && method !== 'HEAD') {
      if (rt.passThrough === undefined) {
        drain(req);
        errors.methodNotAllowed(res, method ?? '?');
        return;
      }
      rt.passThrough.forward(req, res, path, id);
      return;
    }
    drain(req);

    const headers = requestHeadersForUpstream(req.headers);
    headers['x-request-id'] = id;
    const abort = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once('close', onClose);

    rt.client
      .request({ method, path, headers, signal: abort.signal })
      .then(async (up) => {
        upstreamStatus = up.statusCode;
        metrics.upstreamRequests.inc({ upstream: upstream.name, status: String(up.statusCode) });
        const out = responseHeadersForClient(up.headers);
        out['x-request-id'] = id;
        res.writeHead(up.statusCode, out);
        await pipeline(up.body, res);
      })
      .catch((err: unknown) => {
        if (abort.signal.aborted) return; // the client went away; nothing to answer
        if (upstreamStatus === undefined) {
          metrics.upstreamRequests.inc({ upstream: upstream.name, status: 'error' });
          const f = classifyUpstreamError(err);
          logger.warn({ reqId: id, upstream: upstream.name, err: f.detail }, 'upstream request failed');
          if (f.status === 504) errors.gatewayTimeout(res, upstream.name, f.detail);
          else errors.badGateway(res, upstream.name, f.detail);
        } else {
          // Headers already went out: the only honest signal left is to cut the connection.
          logger.warn({ reqId: id, upstream: upstream.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
          res.destroy();
        }
      });
  };

  handler.close = async (): Promise<void> => {
    for (const rt of runtimes) rt.passThrough?.close();
    await Promise.all(runtimes.map((rt) => rt.client.close()));
  };
  return handler;
}

/** GET and HEAD bodies are never forwarded; read and drop them so keep-alive keeps working. */
function drain(req: IncomingMessage): void {
  if (!req.complete) req.resume();
}
