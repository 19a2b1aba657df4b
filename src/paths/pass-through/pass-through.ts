/**
 * Pass-through for methods the cache does not handle (POST, PATCH, ...), only on upstreams
 * configured with `pass_through: true`. Uses http-proxy-3; request and response bodies stream.
 * Link, and the Location of a redirect or a 201, are rewritten to the proxy like on the cached
 * path (answer.ts), so a client that follows them stays on the proxy.
 *
 * Upstream connections are kept alive and reused, at most `connections` of them as for the
 * upstream's undici pool: without an agent, http-proxy-3 asks for `Connection: close` and each
 * write pays a new TCP (and TLS) handshake. A socket carries no request state: each request's
 * headers are its own, and a client's hop-by-hop headers never reach the upstream.
 */
import { Agent as HttpAgent, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import { dropHopByHop, responseHeadersForClient } from '../../http/headers/hop-by-hop.js';
import {
  publicBase,
  rewriteLink,
  rewriteLocation,
  rewritesLocation,
  withRoutePrefix,
  type LinkSettings,
} from '../../http/representation.js';
import { invalidatedPaths, invalidates, type PathMapping } from '../../cache/rules/invalidation.js';
import { headerValue } from '../../http/headers/fields.js';
import { basePrefixOf } from '../../http/route.js';
import { classifyUpstreamError } from '../../upstream/fetch.js';
import { writeError } from '../../http/answer.js';
import { errors } from '../../http/errors.js';
import type { PassThrough } from '../context.js';
import { ATTR, NO_TRACING, pathOnly, upstreamSpanName, type SpanHandle, type Tracing } from '../../platform/trace/tracing.js';

export type { PassThrough };

const NO_PUBLIC_URL: LinkSettings = { publicUrl: null, trustForwarded: false };

/** A reader of the request's headers (first value) for `publicBase`. */
function headerOf(req: IncomingMessage): (name: string) => string | undefined {
  return (name) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
}

/** Idle upstream sockets live as long as the undici pool's (an upstream's Keep-Alive hint, less a second, when shorter). */
const KEEP_ALIVE_MS = 30_000;

/** The keep-alive agent of an upstream's pass-through: its scheme's, `connections` sockets at most, the last freed reused first. */
function keepAliveAgent(target: URL, connections: number): HttpAgent {
  const options = {
    keepAlive: true,
    maxSockets: connections,
    maxFreeSockets: connections,
    timeout: KEEP_ALIVE_MS,
    scheduling: 'lifo' as const,
  };
  return target.protocol === 'https:' ? new HttpsAgent(options) : new HttpAgent(options);
}

/** Rewrites the Link and Location of a passed-through answer that point at the upstream (`upstreamBase`). */
function rewriteForClient(
  cfg: UpstreamConfig,
  links: LinkSettings,
  upstreamBase: string,
  req: IncomingMessage,
  proxyRes: IncomingMessage,
): void {
  const { link, location } = proxyRes.headers;
  const locationToo = location !== undefined && rewritesLocation(proxyRes.statusCode ?? 0);
  if (link === undefined && !locationToo) return;
  const base = publicBase(links.publicUrl, links.trustForwarded, headerOf(req), links.https === true ? 'https' : 'http');
  if (base === undefined) return;
  const rewrite = { upstreamBase, proxyBase: withRoutePrefix(base, cfg.strip_prefix, cfg.prefix) };
  if (link !== undefined)
    proxyRes.headers.link = Array.isArray(link) ? link.map((value) => rewriteLink(value, rewrite)) : rewriteLink(link, rewrite);
  if (locationToo) proxyRes.headers.location = rewriteLocation(location, rewrite);
}

/** The client paths an answer to a passed-through request invalidates (RFC 9111 section 4.4: src/cache/rules/invalidation.ts). */
function invalidatedBy(
  links: LinkSettings,
  mapping: Omit<PathMapping, 'publicBase'>,
  req: IncomingMessage & { etagerePathname?: string },
  proxyRes: IncomingMessage,
): string[] {
  const pathname = req.etagerePathname;
  if (pathname === undefined || !invalidates(req.method ?? '', proxyRes.statusCode ?? 0)) return [];
  const { location, 'content-location': contentLocation } = proxyRes.headers;
  return invalidatedPaths(
    { pathname, upstreamPath: req.url ?? pathname, location, contentLocation: headerValue(contentLocation) },
    { ...mapping, publicBase: publicBase(links.publicUrl, links.trustForwarded, headerOf(req), links.https === true ? 'https' : 'http') },
  );
}

/**
 * `onResponse` hears, for every passed-through answer that invalidates (a 2xx or 3xx to a method
 * other than GET, HEAD, OPTIONS and TRACE), each client path it invalidates: the request's own, and
 * those its `Location` and `Content-Location` name on the same origin (RFC 9111 section 4.4).
 */
export function createPassThrough(
  cfg: UpstreamConfig,
  onResponse?: (cfg: UpstreamConfig, pathname: string, status: number) => void,
  links: LinkSettings = NO_PUBLIC_URL,
  tracing: Tracing = NO_TRACING,
): PassThrough {
  const target = new URL(cfg.url);
  const basePrefix = basePrefixOf(target.pathname || '/');
  const upstreamBase = target.origin + basePrefix;
  const mapping = { upstreamOrigin: target.origin, basePrefix, strippedPrefix: cfg.strip_prefix && cfg.prefix !== '/' ? cfg.prefix : '' };
  const agent = keepAliveAgent(target, cfg.connections);
  const proxy: ProxyServer = createProxyServer({
    target: target.origin,
    changeOrigin: true,
    xfwd: false,
    proxyTimeout: cfg.timeouts.headers_ms,
    agent,
  });
  const onError = (err: Error, _req: IncomingMessage, res: ServerResponse | import('node:net').Socket): void => {
    if (!('writeHead' in res)) {
      res.destroy();
      return;
    }
    writeError(res, errors.upstreamFailed(cfg, classifyUpstreamError(err)));
  };
  proxy.on('error', onError);
  proxy.on('proxyRes', (proxyRes, req) => {
    // Hop-by-hop fields belong to the upstream leg: an upstream's "connection: close" must not
    // close the client's connection after its answer.
    const kept = responseHeadersForClient(proxyRes.headers);
    for (const name of Object.keys(proxyRes.headers)) if (!(name in kept)) delete proxyRes.headers[name];
    // What the answer invalidates is read from the upstream's own Location, before it is rewritten.
    if (onResponse !== undefined)
      for (const path of invalidatedBy(links, mapping, req, proxyRes)) onResponse(cfg, path, proxyRes.statusCode ?? 0);
    rewriteForClient(cfg, links, upstreamBase, req, proxyRes);
  });
  /** The upstream request as a client span, its id sent as the `traceparent` (the client's own is replaced). */
  const traced = (req: IncomingMessage, res: ServerResponse, path: string, parent: SpanHandle | undefined): void => {
    const method = req.method ?? '-';
    const attributes = {
      [ATTR.method]: method,
      [ATTR.serverAddress]: target.hostname,
      [ATTR.urlPath]: pathOnly(path),
      [ATTR.upstream]: cfg.name,
    };
    const span = tracing.start(upstreamSpanName(method), parent, attributes, true);
    tracing.inject(req.headers, span);
    res.once('close', () => {
      span.set(ATTR.status, res.statusCode);
      if (res.statusCode >= 500) span.fail(`status ${res.statusCode}`);
      span.end();
    });
  };
  return {
    forward(req, res, pathname, path, requestId, span, body) {
      (req as IncomingMessage & { etagerePathname?: string }).etagerePathname = pathname;
      // The target has no path of its own here: `path` already holds the upstream base path.
      req.url = path;
      req.headers['x-request-id'] = requestId;
      // http-proxy-3 sends this header map as it is: the client's hop-by-hop headers (its
      // `Connection: close` would close the pooled upstream socket) and Connection go first.
      // A request that waits on 100-continue has its headers sent upstream before its body: a
      // client that leaves in between would leave a reused connection's upstream half a request.
      // It goes on a connection of its own, closed after it.
      const reuse = req.headers.expect === undefined;
      dropHopByHop(req.headers);
      delete req.headers.connection;
      if (tracing.on) traced(req, res, path, span);
      proxy.web(req, res, { ...(reuse ? {} : { agent: false }), ...(body === undefined ? {} : { buffer: body }) });
    },
    close() {
      proxy.close();
      agent.destroy();
    },
  };
}
