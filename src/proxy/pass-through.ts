/**
 * Pass-through for methods the cache does not handle (POST, PATCH, ...), only on upstreams
 * configured with `pass_through: true`. Uses http-proxy-3; request and response bodies stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { UpstreamConfig } from '../config/schema.js';
import { classifyUpstreamError } from '../upstream/client.js';
import { errors } from './errors.js';

export interface PassThrough {
  forward(req: IncomingMessage, res: ServerResponse, path: string, requestId: string): void;
  close(): void;
}

export function createPassThrough(cfg: UpstreamConfig): PassThrough {
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
    const f = classifyUpstreamError(err);
    if (f.status === 504) errors.gatewayTimeout(res, cfg.name, f.detail);
    else errors.badGateway(res, cfg.name, f.detail);
  };
  proxy.on('error', onError);
  return {
    forward(req, res, path, requestId) {
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
