/**
 * Pass-through for methods the cache does not handle (POST, PATCH, ...), only on upstreams
 * configured with `pass_through: true`. Uses http-proxy-3; request and response bodies stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { UpstreamConfig } from '../config/schema.js';
import { responseHeadersForClient } from '../headers/hop-by-hop.js';
import { classifyUpstreamError } from '../upstream/client.js';
import { writeError } from './answer.js';
import { errors } from './errors.js';

export interface PassThrough {
  /** `pathname` is the client's path (the cache's view); `path` is what goes upstream. */
  forward(req: IncomingMessage, res: ServerResponse, pathname: string, path: string, requestId: string): void;
  close(): void;
}

/**
 * `onResponse` hears the status of every passed-through response, so the cache can invalidate
 * the path after a successful unsafe method (RFC 9111 section 4.4).
 */
export function createPassThrough(
  cfg: UpstreamConfig,
  onResponse?: (cfg: UpstreamConfig, pathname: string, status: number) => void,
): PassThrough {
  const target = new URL(cfg.url);
  const proxy: ProxyServer = createProxyServer({
    target: target.origin,
    changeOrigin: true,
    xfwd: false,
    proxyTimeout: cfg.timeouts.headers_ms,
  });
  const onError = (err: Error, _req: IncomingMessage, res: ServerResponse | import('node:net').Socket): void => {
    if (!('writeHead' in res)) {
      res.destroy();
      return;
    }
    writeError(res, errors.upstreamFailed(cfg.name, classifyUpstreamError(err)));
  };
  proxy.on('error', onError);
  proxy.on('proxyRes', (proxyRes, req) => {
    // Hop-by-hop fields belong to the upstream leg. Its "connection: close" (http-proxy asks for
    // it on agent-less requests) used to close the client's connection after every answer.
    const kept = responseHeadersForClient(proxyRes.headers);
    for (const name of Object.keys(proxyRes.headers)) if (!(name in kept)) delete proxyRes.headers[name];
    if (onResponse === undefined) return;
    const pathname = (req as IncomingMessage & { etagerePathname?: string }).etagerePathname;
    if (pathname !== undefined) onResponse(cfg, pathname, proxyRes.statusCode ?? 0);
  });
  return {
    forward(req, res, pathname, path, requestId) {
      (req as IncomingMessage & { etagerePathname?: string }).etagerePathname = pathname;
      // The target has no path of its own here: `path` already holds the upstream base path.
      req.url = path;
      req.headers['x-request-id'] = requestId;
      delete req.headers['proxy-authorization'];
      proxy.web(req, res, {});
    },
    close() {
      proxy.close();
    },
  };
}
