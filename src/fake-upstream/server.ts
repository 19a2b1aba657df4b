/**
 * The HTTP request pipeline of the fake. For an API request, in order:
 *   OPTIONS preflight → credentials (invalid: 401) → /rate_limit (free, every resource)
 *   → secondary limits (scripted, concurrency) → GraphQL without credentials (401)
 *   → primary quota of the path's resource exhausted (403) → API version (400)
 *   → method (POST /graphql answers; other non-GET/HEAD: 404, like GitHub) → route → conditional (304)
 *   → spend → headers.
 * Each answer spends, and its x-ratelimit-* describe, the budget of its path's resource (quota.ts).
 * Control endpoints (/__fake/*) branch off first; then fault rules (faults.ts) may break the
 * request or corrupt its answer; then cyclist requests branch off. Any exception answers 500 JSON;
 * the process never crashes on a request.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Viewer } from './auth.js';
import { handleControl, CONTROL_PREFIX } from './control.js';
import { cyclist, CYCLIST_PREFIX } from './cyclist.js';
import { computeEtag, httpDate, isNotModified } from './etag.js';
import { injectEarly, isBodyFault, writeFaulted, type FaultRule } from './faults.js';
import {
  apiHeaders,
  BAD_CREDENTIALS_BODY,
  CACHE_PRIVATE,
  CACHE_PUBLIC,
  errorJson,
  JSON_TYPE,
  NOT_FOUND_BODY,
  nextRequestId,
  preflightHeaders,
  RATE_LIMIT_DOCS_URL,
  SECONDARY_DOCS_URL,
  SERVER_ERROR_BODY,
  type RateView,
} from './headers.js';
import { anonymousKey, remaining, resourceOfPath, spend, tokenKey, type QuotaWindow } from './quota.js';
import { API_VERSIONS, DEFAULT_API_VERSION, type ApiVersion } from './render.js';
import { route } from './routes.js';
import { GRAPHQL_AUTH_BODY } from './search.js';
import { CONCURRENCY_FAILURE, type SecondaryFailure } from './secondary.js';
import type { FakeState } from './state.js';

const HOST_RE = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
const VERSIONS = new Set<string>(API_VERSIONS);
const UNSUPPORTED_VERSION = (version: string): Buffer =>
  errorJson(
    `The version you specified in the "X-GitHub-Api-Version" request header, "${version.slice(0, 64)}", is not a supported ` +
      `version. The following versions are currently supported: ${[...API_VERSIONS]
        .reverse()
        .map((x, i) => `"${x}"${i === 0 ? ' (most recent)' : ''}`)
        .join(', ')}.`,
  );

/**
 * One response under way: writes once (after the configured latency) and keeps the in-flight
 * count. With a body fault (faults.ts), the answer is corrupted on the wire.
 */
class Reply {
  done = false;

  constructor(
    private readonly state: FakeState,
    private readonly res: ServerResponse,
    private readonly timers: Set<NodeJS.Timeout>,
    private readonly head: boolean,
    private readonly fault: FaultRule | null = null,
  ) {
    state.stats.begin();
  }

  send(status: number, headers: OutgoingHttpHeaders, body: Buffer | null): void {
    if (this.done) return;
    this.done = true;
    const write = (): void => {
      this.state.stats.end();
      try {
        if (this.fault !== null) {
          const noBody = this.head || status === 304 || status === 204;
          writeFaulted(this.fault, this.res, status, headers, noBody ? EMPTY : (body ?? EMPTY), { timers: this.timers });
          return;
        }
        this.res.writeHead(status, headers);
        this.res.end(this.head || status === 304 || status === 204 ? undefined : (body ?? undefined));
      } catch {
        this.res.destroy();
      }
    };
    const latency = this.state.config.latencyMs;
    if (latency > 0) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        write();
      }, latency);
      this.timers.add(timer);
    } else {
      write();
    }
  }
}

export interface Pipeline {
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** Timers of delayed responses (cleared on close). */
  timers: Set<NodeJS.Timeout>;
}

export function createPipeline(getState: () => FakeState, fallbackBase: () => string): Pipeline {
  const timers = new Set<NodeJS.Timeout>();
  const bases = new Map<string, string>();

  const baseOf = (req: IncomingMessage): string => {
    const host = req.headers.host;
    if (host === undefined) return fallbackBase();
    const hit = bases.get(host);
    if (hit !== undefined) return hit;
    if (!HOST_RE.test(host)) return fallbackBase();
    const base = `http://${host}`;
    if (bases.size > 1000) bases.clear();
    bases.set(host, base);
    return base;
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const state = getState();
    const url = req.url ?? '/';
    const queryStart = url.indexOf('?');
    const path = queryStart < 0 ? url : url.slice(0, queryStart);
    const query = queryStart < 0 ? '' : url.slice(queryStart + 1);

    if (path === CONTROL_PREFIX || path.startsWith(`${CONTROL_PREFIX}/`)) {
      handleControl(state, req, res, path).catch(() => internalError(res));
      return;
    }
    const fault = state.faults.pick(path);
    if (fault === null) {
      answer(state, req, res, path, query, null);
      return;
    }
    if (isBodyFault(fault)) {
      // Answered as if unconditional, so that there is a body to cut.
      delete req.headers['if-none-match'];
      delete req.headers['if-modified-since'];
    }
    try {
      injectEarly(fault, req, res, { timers }, () => answer(state, req, res, path, query, isBodyFault(fault) ? fault : null));
    } catch {
      internalError(res);
    }
  };

  /** The API or cyclist answer (corrupted on the wire when `fault` is a body fault). */
  const answer = (
    state: FakeState,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: string,
    fault: FaultRule | null,
  ): void => {
    const reply = new Reply(state, res, timers, req.method === 'HEAD', fault);
    try {
      if (path === CYCLIST_PREFIX || path.startsWith(`${CYCLIST_PREFIX}/`)) {
        const result = cyclist(state.world, req.method ?? 'GET', path);
        const cred = state.credentials.resolve(req.headers.authorization);
        state.stats.record(path, result.status, cred.kind === 'token' ? cred.viewer.token.login : cred.kind, false);
        reply.send(result.status, result.headers, result.body);
        return;
      }
      api(state, req, reply, path, query, baseOf(req));
    } catch {
      if (!reply.done) {
        state.stats.record(path, 500, 'anonymous', false);
        reply.send(500, { 'content-type': JSON_TYPE, 'content-length': SERVER_ERROR_BODY.length }, SERVER_ERROR_BODY);
      } else {
        internalError(res);
      }
    }
  };

  return { handle, timers };
}

function internalError(res: ServerResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  try {
    res.writeHead(500, { 'content-type': JSON_TYPE, 'content-length': SERVER_ERROR_BODY.length });
    res.end(SERVER_ERROR_BODY);
  } catch {
    res.destroy();
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function clientAddress(req: IncomingMessage): string {
  const address = req.socket.remoteAddress ?? 'unknown';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/** Extra header values of one answer of the API (the rest follow from the call). */
interface AnswerExtra {
  contentType?: string | null;
  retryAfter?: number | null;
  acceptedScopes?: string;
  cacheControl?: string | null;
  etag?: string | null;
  lastModified?: string | null;
  link?: string | null;
  location?: string;
  viewer?: Viewer | null;
}

/** One call of the API as the fake sees it: who calls, in which API version, and how to answer. */
interface ApiCall {
  readonly method: string;
  readonly requestId: string;
  readonly cred: ReturnType<FakeState['credentials']['resolve']>;
  readonly viewer: Viewer | null;
  readonly address: string;
  readonly versionHeader: string | undefined;
  readonly versionOk: boolean;
  readonly version: ApiVersion;
  /** Error and plain answers share this shape. */
  answer(status: number, body: Buffer, rate: RateView | null, spent: boolean, extra?: AnswerExtra): void;
}

function apiCall(state: FakeState, req: IncomingMessage, reply: Reply, path: string): ApiCall {
  const requestId = nextRequestId();
  const cred = state.credentials.resolve(req.headers.authorization);
  const viewer: Viewer | null = cred.kind === 'token' ? cred.viewer : null;
  const label = viewer !== null ? viewer.token.login : cred.kind;
  const versionHeader = header(req, 'x-github-api-version');
  const versionOk = versionHeader === undefined || versionHeader === '' || VERSIONS.has(versionHeader);
  const version: ApiVersion = versionOk && versionHeader ? (versionHeader as ApiVersion) : DEFAULT_API_VERSION;
  const answer = (status: number, body: Buffer, rate: RateView | null, spent: boolean, extra: AnswerExtra = {}): void => {
    state.stats.record(path, status, label, spent);
    const headers = apiHeaders({
      status,
      contentType: extra.contentType === undefined ? JSON_TYPE : extra.contentType,
      contentLength: body.length,
      requestId,
      apiVersion: version,
      rate,
      viewer: extra.viewer === undefined ? viewer : extra.viewer,
      acceptedScopes: extra.acceptedScopes ?? '',
      cacheControl: extra.cacheControl ?? null,
      etag: extra.etag ?? null,
      lastModified: extra.lastModified ?? null,
      link: extra.link ?? null,
      retryAfter: extra.retryAfter ?? null,
    });
    if (extra.location !== undefined) headers.location = extra.location;
    reply.send(status, headers, body);
  };
  return { method: req.method ?? 'GET', requestId, cred, viewer, address: clientAddress(req), versionHeader, versionOk, version, answer };
}

function api(state: FakeState, req: IncomingMessage, reply: Reply, path: string, query: string, base: string): void {
  const call = apiCall(state, req, reply, path);
  const { method, requestId, cred, viewer, address, versionHeader, versionOk, version, answer } = call;

  if (method === 'OPTIONS') {
    state.stats.record(path, 204, viewer !== null ? viewer.token.login : cred.kind, false);
    reply.send(204, preflightHeaders(requestId), null);
    return;
  }

  // Unknown or malformed credentials: 401, counted against the caller's anonymous quota.
  if (cred.kind === 'invalid') {
    const window = state.quotas.window(anonymousKey(address), true);
    const spent = spend(window);
    answer(401, BAD_CREDENTIALS_BODY, window, spent, { viewer: null });
    return;
  }

  const anonymous = viewer === null;
  const quotaKey = anonymous ? anonymousKey(address) : tokenKey(viewer.token.token);

  // GET /rate_limit: free, and exempt from secondary limits.
  if (path === '/rate_limit' && (method === 'GET' || method === 'HEAD')) {
    if (!versionOk) {
      answer(400, UNSUPPORTED_VERSION(versionHeader ?? ''), null, false);
      return;
    }
    // Version 2026-03-10 dropped the deprecated top-level `rate` (as on GitHub).
    const doc = state.quotas.document(quotaKey, anonymous, version === DEFAULT_API_VERSION);
    answer(200, Buffer.from(JSON.stringify(doc)), state.quotas.peek(quotaKey, anonymous), false, { cacheControl: 'no-cache' });
    return;
  }
  const budget = resourceOfPath(path);

  // Secondary limits: a real concurrency cap (optional) and scripted failures.
  const failure: SecondaryFailure | null =
    state.config.enforceConcurrency > 0 && state.stats.inFlight > state.config.enforceConcurrency
      ? CONCURRENCY_FAILURE
      : state.secondary.check((selector) => state.credentials.matches(viewer, selector));
  if (failure !== null) {
    const window = state.quotas.window(quotaKey, anonymous, budget);
    const body = errorJson(
      'You have exceeded a secondary rate limit. Please wait a few minutes before you try again. ' +
        `If you reach out to GitHub Support for help, please include the request ID ${requestId}.`,
      SECONDARY_DOCS_URL,
    );
    answer(failure.status, body, window, false, { retryAfter: failure.retryAfter });
    return;
  }

  if (budget === 'graphql' && anonymous) {
    answer(401, GRAPHQL_AUTH_BODY, null, false);
    return;
  }

  const window = state.quotas.window(quotaKey, anonymous, budget);
  if (remaining(window) <= 0) {
    const who = anonymous ? address : `user ID ${state.world.account(viewer.login)?.id ?? 0}`;
    const message = anonymous
      ? `API rate limit exceeded for ${who}. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)`
      : `API rate limit exceeded for ${who}.`;
    answer(403, errorJson(message, RATE_LIMIT_DOCS_URL), window, false);
    return;
  }

  if (!versionOk) {
    const spent = spend(window);
    answer(400, UNSUPPORTED_VERSION(versionHeader ?? ''), window, spent);
    return;
  }

  if (path === '/graphql' && method === 'POST') {
    // One point per request, whatever the query (the fake does not compute query costs).
    req.resume();
    const spent = spend(window);
    const body = Buffer.from(JSON.stringify({ data: { viewer: { login: viewer!.token.login } } }));
    answer(200, body, window, spent, { cacheControl: CACHE_PRIVATE });
    return;
  }
  if (method !== 'GET' && method !== 'HEAD') {
    // GitHub answers an unsupported method with 404, not 405.
    const spent = spend(window);
    answer(404, NOT_FOUND_BODY, window, spent);
    return;
  }
  resource(state, req, call, window, { path, query, base });
}

/** A GET or HEAD of a resource, once the call has passed every limit: 200, or a free 304 when the client holds it. */
function resource(
  state: FakeState,
  req: IncomingMessage,
  call: ApiCall,
  window: QuotaWindow,
  at: { path: string; query: string; base: string },
): void {
  const { cred, viewer, version, answer } = call;
  const anonymous = viewer === null;
  const result = route({ state, world: state.world, viewer, base: at.base, version, path: at.path, query: at.query });
  const rendered = result.rendered;
  if (rendered === null) {
    const spent = spend(window);
    const { contentType, acceptedScopes, cacheControl, link, location } = result;
    answer(result.status, result.body, window, spent, {
      contentType,
      acceptedScopes,
      cacheControl: cacheControl ?? null,
      link: link ?? null,
      location,
    });
    return;
  }

  const etag = computeEtag(rendered.hash, header(req, 'accept') ?? '', cred.kind === 'token' ? cred.authorization : '', version);
  const notModified = isNotModified(header(req, 'if-none-match'), header(req, 'if-modified-since'), etag, rendered.lastModified);
  // A 304 to a request with valid credentials is free; an anonymous one costs like any request.
  const spent = notModified && !anonymous ? false : spend(window);
  const validators = {
    acceptedScopes: result.acceptedScopes,
    cacheControl: anonymous ? CACHE_PUBLIC : CACHE_PRIVATE,
    etag,
    lastModified: httpDate(rendered.lastModified),
  };
  if (notModified) {
    answer(304, EMPTY, window, spent, { ...validators, contentType: null });
  } else {
    answer(200, result.body, window, spent, { ...validators, contentType: result.contentType, link: rendered.link });
  }
}

const EMPTY = Buffer.alloc(0);
