/**
 * Pure request-target checks. The proxy only accepts origin-form targets ("/path?query") whose
 * path cannot climb out of the upstream's prefix: no dot segments (also percent-encoded, or with
 * a ";" parameter), no encoded slashes or backslashes, no NUL. Anything else is a 400 before
 * routing, as is a missing or repeated Host. Also the path's normal form, where a client's
 * spellings of one resource meet, and the request's id (X-Request-Id).
 */
import { randomBytes } from 'node:crypto';

export type Target =
  | { ok: true; pathname: string; search: string }
  /** `close`: the connection cannot be trusted past this request (its framing is unknown). */
  | { ok: false; reason: string; close?: true };

const MAX_TARGET = 8192;

export function parseTarget(url: string | undefined): Target {
  if (url === undefined || url.length === 0) return { ok: false, reason: 'empty request target' };
  if (url.length > MAX_TARGET) return { ok: false, reason: 'request target too long' };
  if (url.charCodeAt(0) !== 47 /* / */ || url.startsWith('//')) {
    return { ok: false, reason: 'request target must be a path starting with a single "/"' };
  }
  const queryStart = url.indexOf('?');
  const hash = url.indexOf('#');
  if (hash !== -1) return { ok: false, reason: 'request target must not contain a fragment' };
  const pathname = queryStart === -1 ? url : url.slice(0, queryStart);
  const search = queryStart === -1 ? '' : url.slice(queryStart);
  // Fast path: nothing that could hide a dot segment, an encoded separator or a control byte.
  if (!/[%.\\\x00-\x1f\x7f]/.test(pathname)) return { ok: true, pathname, search };
  if (/[\\\x00-\x1f\x7f]/.test(pathname)) return { ok: false, reason: 'invalid character in path' };
  if (/%(2f|5c|00)/i.test(pathname)) return { ok: false, reason: 'encoded "/", "\\" or NUL in path' };
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return { ok: false, reason: 'malformed percent-encoding in path' };
  }
  for (const seg of decoded.split('/')) {
    // "..;x" is ".." to upstreams that honour path parameters (Tomcat, Spring and the like).
    const semi = seg.indexOf(';');
    const name = semi === -1 ? seg : seg.slice(0, semi);
    if (name === '.' || name === '..') return { ok: false, reason: 'dot segments are not allowed in path' };
  }
  return { ok: true, pathname, search };
}

/**
 * Host = uri-host [ ":" port ] (RFC 9110 section 7.2): an IP-literal in brackets, or a reg-name /
 * IPv4 (unreserved, sub-delims, percent-encoded); empty is allowed (a target without authority).
 */
const HOST_VALUE = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)(?::[0-9]{0,5})?$/;

/**
 * RFC 9112 section 3.2: a request with more than one Host, with an invalid Host value, or an
 * HTTP/1.1 request without one, is a 400. Node keeps only the first Host of several, so the raw
 * header list is counted.
 */
export function checkHost(rawHeaders: readonly string[], http11: boolean): Target | undefined {
  let hosts = 0;
  let value = '';
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      hosts++;
      value = rawHeaders[i + 1] ?? '';
    }
  }
  if (hosts > 1) return { ok: false, reason: 'more than one Host header' };
  if (hosts === 0 && http11) return { ok: false, reason: 'an HTTP/1.1 request needs a Host header' };
  if (hosts === 1 && !HOST_VALUE.test(value)) return { ok: false, reason: 'invalid Host header' };
  return undefined;
}

/**
 * RFC 9112 section 6.3: a request whose Transfer-Encoding does not end in chunked has no
 * knowable length: a 400, and the connection is closed. (Node hands such a request over before
 * it fails on the body, and would read whatever follows as its body.)
 */
export function checkFraming(transferEncoding: string | undefined): Target | undefined {
  if (transferEncoding === undefined || /(?:^|,)[ \t]*chunked[ \t]*$/i.test(transferEncoding)) return undefined;
  return { ok: false, reason: 'Transfer-Encoding must end with chunked', close: true };
}

/*
 * The normal form of a request path, where the spellings a client may use for one GitHub
 * resource meet. Cache path scopes (src/cache/rules/stale-marks.ts) and consumer scopes
 * (src/pool/rules/allow.ts) compare paths in it:
 *
 *   - lower case (GitHub's owner and repository names are case-insensitive);
 *   - percent-escapes of characters that need none decoded (`hello%2Dworld` is `hello-world`);
 *   - no trailing slash (`/repos/o/r/` is `/repos/o/r`).
 */
/** A path in normal form (see above). */
export function normalPath(pathname: string): string {
  let path = pathname;
  if (path.includes('%')) path = decodeUnreserved(path);
  path = path.toLowerCase();
  while (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  return path.length === 0 ? '/' : path;
}

/** Decodes the percent-escapes of unreserved characters only (RFC 3986 section 2.3); others stay as they are. */
function decodeUnreserved(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (escape: string, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return /^[A-Za-z0-9\-._~]$/.test(char) ? char : escape.toUpperCase();
  });
}

/* X-Request-Id: the client's own when it is a sane token, else a cheap unique one. */
const SANE = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export type RequestIds = (fromClient: string | string[] | undefined) => string;

/**
 * The request ids of one app: a random prefix of its own and a counter, so ids do not collide
 * across apps, workers and replicas.
 */
export function createRequestIds(): RequestIds {
  const prefix = randomBytes(6).toString('hex');
  let counter = 0;
  return (fromClient) => {
    if (typeof fromClient === 'string' && SANE.test(fromClient)) return fromClient;
    counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
    return `${prefix}-${counter.toString(36)}`;
  };
}
