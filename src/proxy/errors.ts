/**
 * Every error response the proxy itself produces, in GitHub's shape:
 * {"message": "...", "documentation_url": "..."}. One place declares them all.
 */
import type { ServerResponse } from 'node:http';

export const DOCUMENTATION_URL = 'https://github.com/etagere-proxy/etagere#errors';

export function errorBody(message: string): Buffer {
  return Buffer.from(JSON.stringify({ message, documentation_url: DOCUMENTATION_URL }));
}

/** Writes a JSON error unless headers were already sent (then the connection is cut instead). */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers?: Record<string, string>,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(message);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  res.end(body);
}

const badGateway = (res: ServerResponse, upstream: string, detail: string): void =>
  sendError(res, 502, `Bad Gateway: upstream "${upstream}" failed (${detail})`);
const gatewayTimeout = (res: ServerResponse, upstream: string, detail: string): void =>
  sendError(res, 504, `Gateway Timeout: upstream "${upstream}" did not answer in time (${detail})`);

export const errors = {
  badRequest: (res: ServerResponse, reason: string) => sendError(res, 400, `Bad request: ${reason}`),
  noRoute: (res: ServerResponse) => sendError(res, 404, 'Not Found: no upstream is configured for this path'),
  methodNotAllowed: (res: ServerResponse, method: string) =>
    sendError(res, 405, `Method ${method} is not allowed: this upstream is read-only through the proxy`, {
      allow: 'GET, HEAD',
    }),
  badGateway,
  gatewayTimeout,
  /** 504 for a timeout, else 502, from a classified upstream failure. */
  upstreamFailed: (res: ServerResponse, upstream: string, failure: { status: 502 | 504; detail: string }) =>
    failure.status === 504 ? gatewayTimeout(res, upstream, failure.detail) : badGateway(res, upstream, failure.detail),
  /** No pool token can take the request: 429 when every token is spent or paused, else 503. */
  poolUnavailable: (res: ServerResponse, reason: 'exhausted' | 'dead' | 'busy', retryAfterSeconds: number, headers: Record<string, string>) => {
    const h = { ...headers, 'retry-after': String(retryAfterSeconds) };
    if (reason === 'exhausted') {
      sendError(res, 429, `API rate limit exceeded: every token in the proxy's pool is spent or paused; retry after ${retryAfterSeconds} s`, h);
    } else if (reason === 'dead') {
      sendError(res, 503, 'Service Unavailable: the upstream rejected every token in the proxy\'s pool (401); the operator must replace them', h);
    } else {
      sendError(res, 503, 'Service Unavailable: every pool token is busy; retry shortly', h);
    }
  },
  /** Consumer access control: the request carried no known consumer key. */
  consumerKeyRequired: (res: ServerResponse) =>
    sendError(res, 401, 'Requires a consumer key: send X-Etagere-Key, or the key as the user of Basic credentials', {
      'www-authenticate': 'Basic realm="etagere"',
    }),
  /** An Expect other than 100-continue (RFC 9110 section 10.1.1). */
  expectationFailed: (res: ServerResponse) =>
    sendError(res, 417, 'Expectation Failed: the only expectation supported is "100-continue"'),
  shuttingDown: (res: ServerResponse) =>
    sendError(res, 503, 'Service Unavailable: the proxy is shutting down', { connection: 'close', 'retry-after': '1' }),
} as const;
