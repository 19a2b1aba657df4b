/**
 * The HTTP request pipeline of the fake. For an API request, in order:
 *   OPTIONS preflight → credentials (invalid, or a JWT GitHub would refuse: 401/404) → /rate_limit
 *   (free, every resource) → secondary limits (scripted, concurrency) → GraphQL without credentials (401)
 *   → POST /graphql (graphql.ts: its own costs and RATE_LIMITED answers)
 *   → primary quota of the path's resource exhausted (403) → API version (400)
 *   → GitHub Apps (app-routes.ts: App endpoints, App JWTs, installation-only paths)
 *   → method (non-GET/HEAD: 404, like GitHub) → route → conditional (304) → spend → headers.
 * Each answer spends, and its x-ratelimit-* describe, the budget of its path's resource (quota.ts),
 * for its credential: the client address, the token, the App (its JWT) or the installation (every
 * token of an installation shares one). With rate limits off (`rateLimits: false`, GitHub Enterprise
 * Server's default) /rate_limit is a 404 and no answer carries x-ratelimit-* (quota.ts: no window
 * runs out).
 * Control endpoints (/__fake/*) branch off first; then, under a base path (base-path.ts), a path
 * outside it is a 404 (but GraphQL, which is beside it: /api/graphql for /api/v3); then fault rules
 * (faults.ts) may break the request or corrupt its answer; then cyclist requests branch off. Any
 * exception answers 500 JSON; the process never crashes on a request.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { appRoute } from './app-routes.js';
import { appKey, installationKey } from './apps.js';
import { credentialLabel, type Credential, type Viewer } from './auth.js';
import { requestApiPath } from './base-path.js';
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
  RATE_LIMITING_OFF_BODY,
  RATE_LIMIT_DOCS_URL,
  SECONDARY_DOCS_URL,
  SERVER_ERROR_BODY,
  type RateView,
} from './headers.js';
import { anonymousKey, remaining, resourceOfPath, spend, tokenKey, type QuotaWindow } from './quota.js';
import { API_VERSIONS, DEFAULT_API_VERSION, type ApiVersion } from './render.js';
import type { ApiResult } from './route-context.js';
import { route } from './routes.js';
import { acceptsGzip, gzippedBody } from './compression.js';
import { answerGraphql, rateLimitedBody } from './graphql.js';
import { announce, starred } from './webhook-payloads.js';
import { GRAPHQL_AUTH_BODY } from './search.js';
import { CONCURRENCY_FAILURE, requestPoints, type SecondaryFailure } from './secondary.js';
import type { FakeState } from './state.js';

/** The stats path of requests outside the base path (stats count API paths, below the base path). */
export const OUTSIDE_BASE = '(outside the base path)';
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
    // The cyclist service stays at the root; the API is served below the base path, if any.
    const isCyclist = path === CYCLIST_PREFIX || path.startsWith(`${CYCLIST_PREFIX}/`);
    const apiPath = isCyclist ? path : requestApiPath(path, state.basePath);
    if (apiPath === null) {
      outsideBase(state, req, res);
      return;
    }
    const fault = state.faults.pick(apiPath);
    if (fault === null) {
      answer(state, req, res, { path: apiPath, query, isCyclist }, null);
      return;
    }
    if (isBodyFault(fault)) {
      // Answered as if unconditional, so that there is a body to cut.
      delete req.headers['if-none-match'];
      delete req.headers['if-modified-since'];
    }
    try {
      injectEarly(fault, req, res, { timers }, () =>
        answer(state, req, res, { path: apiPath, query, isCyclist }, isBodyFault(fault) ? fault : null),
      );
    } catch {
      internalError(res);
    }
  };

  /** The API or cyclist answer (corrupted on the wire when `fault` is a body fault). */
  const answer = (
    state: FakeState,
    req: IncomingMessage,
    res: ServerResponse,
    at: { path: string; query: string; isCyclist: boolean },
    fault: FaultRule | null,
  ): void => {
    const { path, query } = at;
    const reply = new Reply(state, res, timers, req.method === 'HEAD', fault);
    try {
      if (at.isCyclist) {
        const result = cyclist(state.world, req.method ?? 'GET', path);
        state.stats.record(path, result.status, credentialLabel(state.resolveCredential(req.headers.authorization)), false);
        reply.send(result.status, result.headers, result.body);
        return;
      }
      api(state, req, reply, path, query, baseOf(req) + state.basePath);
    } catch {
      if (!reply.done) {
        state.stats.record(path, 500, 'anonymous', false);
        reply.send(500, { 'content-type': JSON_TYPE, 'content-length': SERVER_ERROR_BODY.length }, SERVER_ERROR_BODY);
      } else {
        internalError(res);
      }
    }
  };

  /** A path outside the base path: a 404 (the API is not there), counted under OUTSIDE_BASE (stats count API paths). */
  const outsideBase = (state: FakeState, req: IncomingMessage, res: ServerResponse): void => {
    const reply = new Reply(state, res, timers, req.method === 'HEAD');
    state.stats.record(OUTSIDE_BASE, 404, credentialLabel(state.resolveCredential(req.headers.authorization)), false);
    reply.send(404, { 'content-type': JSON_TYPE, 'content-length': NOT_FOUND_BODY.length, server: 'github.com' }, NOT_FOUND_BODY);
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
  /** X-GitHub-Media-Type when not the plain JSON one (a custom media type). */
  mediaType?: string;
  viewer?: Viewer | null;
  /** The body is gzipped (the client accepts gzip). */
  contentEncoding?: 'gzip';
}

/** One call of the API as the fake sees it: who calls, in which API version, and how to answer. */
interface ApiCall {
  readonly method: string;
  readonly requestId: string;
  readonly cred: Credential;
  /** The token's viewer; null for no credential and for an App's JWT. */
  readonly viewer: Viewer | null;
  /** No credential at all (an App's JWT is a credential without a viewer). */
  readonly anonymous: boolean;
  readonly address: string;
  readonly versionHeader: string | undefined;
  readonly versionOk: boolean;
  readonly version: ApiVersion;
  /** Error and plain answers share this shape. */
  answer(status: number, body: Buffer, rate: RateView | null, spent: boolean, extra?: AnswerExtra): void;
}

function apiCall(state: FakeState, req: IncomingMessage, reply: Reply, path: string): ApiCall {
  const requestId = nextRequestId();
  const cred = state.resolveCredential(req.headers.authorization);
  const viewer: Viewer | null = cred.kind === 'token' ? cred.viewer : null;
  const label = credentialLabel(cred);
  const installation = viewer?.installation?.id;
  const versionHeader = header(req, 'x-github-api-version');
  const versionOk = versionHeader === undefined || versionHeader === '' || VERSIONS.has(versionHeader);
  const version: ApiVersion = versionOk && versionHeader ? (versionHeader as ApiVersion) : DEFAULT_API_VERSION;
  const answer = (status: number, body: Buffer, rate: RateView | null, spent: boolean, extra: AnswerExtra = {}): void => {
    state.stats.record(path, status, label, spent, installation);
    const headers = apiHeaders({
      status,
      contentType: extra.contentType === undefined ? JSON_TYPE : extra.contentType,
      contentLength: body.length,
      requestId,
      apiVersion: version,
      rate: state.config.rateLimits ? rate : null,
      viewer: extra.viewer === undefined ? viewer : extra.viewer,
      acceptedScopes: extra.acceptedScopes ?? '',
      cacheControl: extra.cacheControl ?? null,
      etag: extra.etag ?? null,
      lastModified: extra.lastModified ?? null,
      link: extra.link ?? null,
      retryAfter: extra.retryAfter ?? null,
      mediaType: extra.mediaType ?? null,
      contentEncoding: extra.contentEncoding ?? null,
    });
    if (extra.location !== undefined) headers.location = extra.location;
    reply.send(status, headers, body);
  };
  return {
    method: req.method ?? 'GET',
    requestId,
    cred,
    viewer,
    anonymous: cred.kind === 'anonymous',
    address: clientAddress(req),
    versionHeader,
    versionOk,
    version,
    answer,
  };
}

/** Whose budget a request spends: the client address, the App, the installation (all its tokens) or the token. */
function quotaKeyOf(cred: Credential, address: string): string {
  if (cred.kind === 'app') return appKey(cred.app.id);
  if (cred.kind !== 'token') return anonymousKey(address);
  const installation = cred.viewer.installation;
  return installation !== undefined ? installationKey(installation.id) : tokenKey(cred.viewer.token.token);
}

/** The 403 of a spent primary quota, worded as GitHub words it for the caller. */
function rateLimitedMessage(state: FakeState, call: ApiCall): string {
  const { cred, address } = call;
  if (cred.kind === 'app') return `API rate limit exceeded for app ID ${cred.app.id}.`;
  if (cred.kind !== 'token') {
    return `API rate limit exceeded for ${address}. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)`;
  }
  const installation = cred.viewer.installation;
  if (installation !== undefined) return `API rate limit exceeded for installation ID ${installation.id}.`;
  return `API rate limit exceeded for user ID ${state.world.account(cred.viewer.login)?.id ?? 0}.`;
}

function api(state: FakeState, req: IncomingMessage, reply: Reply, path: string, query: string, base: string): void {
  const call = apiCall(state, req, reply, path);
  const { method, requestId, cred, viewer, anonymous, address, versionHeader, versionOk, version, answer } = call;

  if (method === 'OPTIONS') {
    state.stats.record(path, 204, credentialLabel(cred), false);
    reply.send(204, preflightHeaders(requestId), null);
    return;
  }

  // Unknown or malformed credentials, and JWTs GitHub refuses: 401 (404 for an unknown App),
  // counted against the caller's anonymous quota.
  if (cred.kind === 'invalid' || cred.kind === 'refused') {
    const window = state.quotas.window(anonymousKey(address), true);
    const spent = spend(window);
    if (cred.kind === 'refused') answer(cred.status, errorJson(cred.message), window, spent, { viewer: null });
    else answer(401, BAD_CREDENTIALS_BODY, window, spent, { viewer: null });
    return;
  }

  const quotaKey = quotaKeyOf(cred, address);

  // GET /rate_limit: free, and exempt from secondary limits.
  if (path === '/rate_limit' && (method === 'GET' || method === 'HEAD')) {
    if (!versionOk) {
      answer(400, UNSUPPORTED_VERSION(versionHeader ?? ''), null, false);
      return;
    }
    if (!state.config.rateLimits) {
      answer(404, RATE_LIMITING_OFF_BODY, null, false);
      return;
    }
    // Version 2026-03-10 dropped the deprecated top-level `rate` (as on GitHub).
    const doc = state.quotas.document(quotaKey, anonymous, version === DEFAULT_API_VERSION);
    answer(200, Buffer.from(JSON.stringify(doc)), state.quotas.peek(quotaKey, anonymous), false, { cacheControl: 'no-cache' });
    return;
  }
  const budget = resourceOfPath(path);
  const isGraphql = path === '/graphql' && method === 'POST';

  // Secondary limits: a real concurrency cap (optional), scripted failures, then points (optional; a 304 spends them too).
  const failure: SecondaryFailure | null =
    state.config.enforceConcurrency > 0 && state.stats.inFlight > state.config.enforceConcurrency
      ? CONCURRENCY_FAILURE
      : (state.secondary.check(
          (selector) => (cred.kind === 'app' ? selector === credentialLabel(cred) : state.credentials.matches(viewer, selector)),
          isGraphql,
        ) ?? pointsFailure(state, quotaKey, method, isGraphql));
  if (failure !== null) {
    const window = state.quotas.window(quotaKey, anonymous, budget);
    const message =
      'You have exceeded a secondary rate limit. Please wait a few minutes before you try again. ' +
      `If you reach out to GitHub Support for help, please include the request ID ${requestId}.`;
    // GraphQL's secondary limits may also come as a 200 with a RATE_LIMITED error (graphql.ts).
    const body = failure.status === 200 ? rateLimitedBody(message) : errorJson(message, SECONDARY_DOCS_URL);
    answer(failure.status, body, window, false, { retryAfter: failure.retryAfter });
    return;
  }

  if (budget === 'graphql' && anonymous) {
    answer(401, GRAPHQL_AUTH_BODY, null, false);
    return;
  }

  const window = state.quotas.window(quotaKey, anonymous, budget);
  if (isGraphql) {
    // Its own costs and RATE_LIMITED answers; a star sends the webhooks of a star (webhook-payloads.ts).
    answerGraphql(state.world, req, call, window, base, (repo, login) =>
      announce(state.webhooks, starred(state.world, repo, state.webhooks.apiBase(), login)),
    );
    return;
  }
  if (remaining(window) <= 0) {
    answer(403, errorJson(rateLimitedMessage(state, call), RATE_LIMIT_DOCS_URL), window, false);
    return;
  }

  if (!versionOk) {
    const spent = spend(window);
    answer(400, UNSUPPORTED_VERSION(versionHeader ?? ''), window, spent);
    return;
  }

  const forApps = appRoute({ state, cred, method, path, query, base, version, nowMs: Date.now() });
  if (forApps !== undefined) {
    if (method !== 'GET' && method !== 'HEAD') req.resume();
    respond(req, call, window, forApps, state.config.noTransform);
    return;
  }

  if (method !== 'GET' && method !== 'HEAD') {
    // GitHub answers an unsupported method with 404, not 405.
    const spent = spend(window);
    answer(404, NOT_FOUND_BODY, window, spent);
    return;
  }
  const result = route({ state, world: state.world, viewer, base, version, path, query, accept: header(req, 'accept') ?? '' });
  respond(req, call, window, result, state.config.noTransform);
}

/**
 * The answer to a call that has passed every limit: 200, or a free 304 when the client holds it; other results as they are.
 * `noTransform`: its Cache-Control forbids intermediaries to change the coding (`noTransform` of the runtime config).
 */
function respond(req: IncomingMessage, call: ApiCall, window: QuotaWindow, result: ApiResult, noTransform: boolean): void {
  const { cred, anonymous, version, answer } = call;
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

  const authorization = cred.kind === 'token' || cred.kind === 'app' ? cred.authorization : '';
  const etag = computeEtag(rendered.hash, header(req, 'accept') ?? '', authorization, version);
  const notModified = isNotModified(header(req, 'if-none-match'), header(req, 'if-modified-since'), etag, rendered.lastModified);
  // A 304 to a request with valid credentials is free; an anonymous one costs like any request.
  const spent = notModified && !anonymous ? false : spend(window);
  const validators = {
    acceptedScopes: result.acceptedScopes,
    cacheControl: (anonymous ? CACHE_PUBLIC : CACHE_PRIVATE) + (noTransform ? ', no-transform' : ''),
    etag,
    lastModified: httpDate(rendered.lastModified),
  };
  if (notModified) {
    answer(304, EMPTY, window, spent, { ...validators, contentType: null });
  } else {
    const gzip = acceptsGzip(req.headers['accept-encoding']);
    answer(200, gzip ? gzippedBody(rendered, result.body) : result.body, window, spent, {
      ...validators,
      ...(gzip ? { contentEncoding: 'gzip' as const } : {}),
      contentType: result.contentType,
      link: rendered.link,
      mediaType: result.mediaType,
    });
  }
}

const EMPTY = Buffer.alloc(0);

/** The points limit's answer to a request of this credential (quota key), when enforced and spent. */
function pointsFailure(state: FakeState, credential: string, method: string, graphql: boolean): SecondaryFailure | null {
  const { config } = state;
  if (!config.enforcePoints) return null;
  const kind = graphql ? 'graphql' : 'rest';
  const limit = graphql ? config.graphqlPointsPerMinute : config.pointsPerMinute;
  // A GraphQL call is counted as a query (1 point): the body is not parsed yet (GitHub counts a mutation 5).
  return state.secondary.spendPoints(credential, kind, graphql ? requestPoints('GET') : requestPoints(method), limit, Date.now());
}
