/**
 * The request handler. Read top to bottom, it is the request path:
 *   target check -> webhook receiver (src/paths/webhooks/) -> route -> GraphQL (src/paths/graphql/) -> method gate (pass-through or 405)
 *   -> end-to-end headers -> credential
 *   -> pool rate_limit | streaming forward (policy none, Range but under rfc9111) | cached path (GET/HEAD)
 * Each step returns a reply or what was served; the access line and the metrics are written
 * once, from what the path returned: at once for an answer written whole in the same turn (a
 * hit), else when the response closes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../platform/config/schema.js';
import { dropHopByHop, keepPoolHeaders } from '../http/headers/hop-by-hop.js';
import { AccessLog } from '../platform/log/logger.js';
import { consumerLabelMode, createConsumerLabels } from '../platform/metrics/labels.js';
import type { Metrics } from '../platform/metrics/registry.js';
import { createGraphqlPath } from '../paths/graphql/exchange.js';
import { GraphqlAnswers } from '../paths/graphql/answer-cache.js';
import type { ServiceDeps, Services } from './services.js';
import { isRateLimitPath, poolRateLimitBody } from '../pool/rules/report.js';
import { createUpstreamExchange } from '../paths/rest/exchange.js';
import { answer, writeError } from '../http/answer.js';
import type { HeadBlocks } from '../http/header-block.js';
import { CachedPath } from '../paths/rest/cached.js';
import type { RequestContext } from '../paths/context.js';
import { dropConsumerKeys, resolveCredential, type CredentialRules, type Credential } from '../pool/consumers/credential.js';
import { identify, UNKNOWN_CONSUMER, verdict, type Identified, type OidcPresented, type Presented } from '../pool/consumers/gate.js';
import type { OidcVerifier } from '../pool/consumers/oidc.js';
import type { UpstreamRuntime } from '../paths/upstreams.js';
import type { SpanHandle } from '../platform/trace/tracing.js';
import type { Consumers } from '../pool/consumers/consumers.js';
import { errors } from '../http/errors.js';
import { createForward } from '../paths/rest/forward.js';
import { NOT_SERVED, type ErrorReply, type Served } from '../http/reply.js';
import { apiPathname, createRouter, enterpriseForm, upstreamPath } from '../http/route.js';
import { checkFraming, checkHost, parseTarget } from '../http/target.js';
import { Recorder, Trace } from './recorder.js';

export type HandlerDeps = Pick<ServiceDeps, 'logger' | 'metrics'> & { readonly heads?: HeadBlocks | undefined };

/** The ways in the handler runs itself: the streaming forward, the cached path and GraphQL. */
function buildPaths(config: Config, services: Services, { logger, metrics }: Pick<ServiceDeps, 'logger' | 'metrics'>) {
  const { pool } = services;
  const forward = createForward(logger, metrics, pool);
  const exchange = createUpstreamExchange({
    pool,
    partitioner: services.partitioner,
    maxEntryBytes: config.cache.max_entry_bytes,
    metrics,
    logger,
  });
  const cached = new CachedPath({ ...services, exchange, logger, metrics, forward });
  const answers = new GraphqlAnswers(services.cache, services.coalescer, services.tags, logger);
  const { partitioner, refreshAhead } = services;
  const graphql = createGraphqlPath({
    pool,
    partitioner,
    answers,
    refreshAhead,
    maxEntryBytes: config.cache.max_entry_bytes,
    metrics,
    logger,
  });
  return { forward, cached, graphql };
}

/**
 * A routed GET or HEAD as the paths see it (src/paths/context.ts): its route label is the trace's,
 * matched on first use (a hit takes its stored form's instead: recorder.ts).
 */
class RoutedContext implements RequestContext {
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly id: string,
    readonly upstream: UpstreamRuntime,
    readonly pathname: string,
    readonly search: string,
    readonly path: string,
    readonly method: 'GET' | 'HEAD',
    readonly cred: Credential,
    readonly span: SpanHandle | undefined,
    readonly heads: HeadBlocks | undefined,
    private readonly trace: Trace,
  ) {}
  get route(): string {
    return this.trace.route;
  }
}

/**
 * The request handler: `handle` routes one request, runs its path and has it recorded. Built once
 * by the app from the services; per request it builds only the request's own values.
 */
export class Handler {
  readonly #services: Services;
  readonly #router: ReturnType<typeof createRouter>;
  readonly #paths: ReturnType<typeof buildPaths>;
  readonly #rules: CredentialRules[];
  readonly #gate: ReturnType<typeof consumerGate>;
  readonly #recorder: Recorder;
  readonly #byAgent: boolean;
  readonly #metrics: Metrics;
  readonly #heads: HeadBlocks | undefined;

  /** `heads`: answer heads written as blocks (src/http/header-block.ts), when their self-test passed at start-up. */
  constructor(config: Config, services: Services, { logger, metrics, heads }: HandlerDeps) {
    this.#services = services;
    this.#router = createRouter(config.upstreams);
    this.#paths = buildPaths(config, services, { logger, metrics });
    this.#rules = credentialRules(config, services);
    const labels = createConsumerLabels(consumerLabelMode(config.metrics.consumer_label, config.consumers.enabled));
    this.#byAgent = labels.mode === 'user_agent';
    this.#recorder = new Recorder(metrics, new AccessLog(logger, services.memos.accessLog), labels, config.log);
    this.#gate = consumerGate(services.consumers, services.oidc, metrics);
    this.#metrics = metrics;
    this.#heads = heads;
  }

  /** One request: routed and run, then recorded in its own turn (a hit) or when it closes. True when recorded now. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const started = performance.now();
    const socket = req.socket;
    let bytesBefore = socket.bytesWritten;
    const id = this.#services.requestId(req.headers['x-request-id']);
    const { tracing } = this.#services;
    // The client's trace context is read before any header is dropped; the path's spans descend from this one.
    const trace = new Trace(
      this.#byAgent ? req.headers['user-agent'] : undefined,
      tracing.on ? tracing.request(req.headers, req.method ?? '-') : undefined,
    );
    trace.served = this.#route(req, res, id, trace);
    // An answer written whole, and handed whole to its socket, in this turn (a hit): recorded now,
    // its bytes on the wire known. Anything else (a wait upstream, a stream, a slow client, a
    // response queued behind a pipelined one) is recorded when it closes. No 'close' can have
    // been emitted yet: Node emits it on a later tick.
    if (writtenWhole(res, trace.served)) {
      this.#recorder.record(req, res, id, trace, started, socket.bytesWritten - bytesBefore);
      return true;
    }
    // Its bytes on the wire: from when it has the connection (a response queued behind pipelined
    // ones gets it once they are out) to when it finishes, before Node hands the connection to the
    // next one (a 'finish' listener ahead of Node's own); up to its 'close' if it never finishes.
    let bytesAfter: number | undefined;
    if (res.socket === null) res.once('socket', () => (bytesBefore = socket.bytesWritten));
    res.prependOnceListener('finish', () => (bytesAfter = socket.bytesWritten));
    res.once('close', () => this.#recorder.record(req, res, id, trace, started, (bytesAfter ?? socket.bytesWritten) - bytesBefore));
    return false;
  }

  /** Hands the access lines waiting to the log (shutdown). */
  flush(): void {
    this.#recorder.flush();
  }

  /** Errors before a request is routed: no upstream, nothing served. */
  #refuse(req: IncomingMessage, res: ServerResponse, id: string, reply: ErrorReply): Served {
    drain(req);
    writeError(res, reply, id);
    return NOT_SERVED;
  }

  /** Routes a request and runs its path; returns what was served (a promise once the path waits). */
  #route(req: IncomingMessage, res: ServerResponse, id: string, trace: Trace): Served | Promise<Served> {
    const target =
      checkHost(req.rawHeaders, req.httpVersionMajor === 1 && req.httpVersionMinor === 1) ??
      checkFraming(req.headers['transfer-encoding']) ??
      parseTarget(req.url);
    if (target.ok === false) {
      if (target.close === true) res.shouldKeepAlive = false;
      return this.#refuse(req, res, id, errors.badRequest(target.reason));
    }
    const { upstreams, entrances, webhooks } = this.#services;
    if (target.pathname === webhooks?.path) return webhooks.receive(req, res, id);
    const match = this.#router.match(target.pathname);
    if (match === undefined) return this.#refuse(req, res, id, errors.noRoute());
    // GitHub Enterprise Server's paths on a GitHub upstream (gh with GH_HOST): the same request, one cache entry.
    const enterprise = upstreams[match.index]!.enterprise;
    const stripped = enterprise === undefined ? undefined : enterpriseForm(target.pathname);
    const upstream = stripped === undefined ? upstreams[match.index]! : enterprise!;
    const pathname = stripped ?? target.pathname;
    const graphqlRuntime = entrances[match.index]!.graphql;
    trace.routed(upstream, pathname);
    const path = upstreamPath(upstream.cfg, upstream.client.basePath, pathname, target.search);
    const method = req.method;
    const isGraphql = graphqlRuntime?.serves(method, path) === true;
    const at: Routed = { upstream, pathname, search: target.search, path, index: match.index, graphql: isGraphql };
    // A consumer whose token fails or whose scope does not allow the request goes no further: no lookup, nothing upstream.
    const gated = this.#gate?.(req, method ?? '?', isGraphql ? '/graphql' : apiPathname(upstream.cfg, pathname), upstream.cfg.token_pool);
    if (gated instanceof Promise)
      return gated
        .then((done) => this.#routed(req, res, id, trace, at, done))
        .catch(() => this.#refuse(req, res, id, errors.internal(upstream.cfg)));
    return this.#routed(req, res, id, trace, at, gated);
  }

  /** A routed request past the consumer gate: GraphQL, the pass-through, or a GET or HEAD. */
  #routed(
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    trace: Trace,
    at: Routed,
    gated: Gated | undefined,
  ): Served | Promise<Served> {
    if (gated?.refusal !== undefined) return this.#refuse(req, res, id, gated.refusal);
    const { upstream, pathname, path, index } = at;
    const { entrances, consumers, pool } = this.#services;
    const oidc = gated?.oidc;
    if (at.graphql) {
      const call = { id, upstream, graphql: entrances[index]!.graphql!, path, rules: this.#rules[index]!, oidc, span: trace.span };
      return this.#paths.graphql(req, res, call, trace);
    }
    const method = req.method;
    if (method !== 'GET' && method !== 'HEAD') {
      dropConsumerKeys(req.headers, consumers, req.socket, oidc); // never forwarded; unsafe methods never use the pool
      const { passThrough } = entrances[index]!;
      if (passThrough === undefined) return this.#refuse(req, res, id, errors.methodNotAllowed(method ?? '?'));
      res.setHeader('x-request-id', id);
      passThrough.forward(req, res, pathname, path, id, trace.span);
      return NOT_SERVED;
    }
    drain(req);
    // From here on the headers are what goes upstream: the key is built from the same ones.
    dropHopByHop(req.headers);

    // A GET or HEAD's headers go upstream only as a copy that skips undefined values: what is
    // taken out is set to undefined, not deleted (a delete makes the header map a dictionary).
    const cred = resolveCredential(req.headers, this.#rules[index]!, 'blank', req.socket, oidc, gated?.key);
    if (cred === undefined) {
      this.#metrics.consumerRejections.labels(UNKNOWN_CONSUMER, 'key').inc();
      return this.#refuse(req, res, id, errors.consumerKeyRequired());
    }
    if (cred.kind === 'pool') keepPoolHeaders(req.headers, 'blank');
    const ctx = new RoutedContext(req, res, id, upstream, pathname, at.search, path, method, cred, trace.span, this.#heads, trace);
    trace.ctx = ctx;
    if (cred.kind === 'pool' && pool !== undefined && isRateLimitPath(path, upstream.client.basePath)) {
      return answer(ctx, { kind: 'body', ...poolRateLimitBody(pool.headers, pool.pool.rateLimits()), ...NOT_SERVED });
    }
    // Range requests stream through, except under rfc9111: a part of the stored response (answer.ts).
    const policy = upstream.policy.kind;
    if (policy === 'none' || (req.headers.range !== undefined && policy !== 'rfc9111')) return this.#paths.forward(ctx);
    return this.#paths.cached.serve(ctx);
  }
}

/**
 * The response ended and every byte of it went to the kernel (none waiting in Node's buffers):
 * nothing can change its access line any more. `writableFinished` says ended, nothing queued in
 * the response, its socket's write buffer empty; a write that failed (the client reset) also
 * empties that buffer, but leaves the socket errored or destroyed: such a response waits for its
 * 'close' and is logged as aborted.
 */
export function writtenWhole(res: ServerResponse, served: Served | Promise<Served>): boolean {
  if (served instanceof Promise || !res.writableFinished) return false;
  const socket = res.socket;
  return socket !== null && !socket.destroyed && socket.errored === null;
}

/** Where a request was routed: what the rest of its path needs. */
interface Routed {
  readonly upstream: UpstreamRuntime;
  readonly pathname: string;
  readonly search: string;
  readonly path: string;
  /** The route's upstream index (entrances, credential rules). */
  readonly index: number;
  readonly graphql: boolean;
}

/** The gate's verdict: refused (the reply), or go on, with the consumer it found (an OIDC token's, or a key's: matched once). */
interface Gated {
  readonly refusal?: ErrorReply | undefined;
  readonly oidc?: OidcPresented | undefined;
  readonly key?: Presented | undefined;
}

/**
 * With consumer keys on: the consumer a request's credentials name, checked (an OIDC token
 * verified, a scope's rules); a refusal is counted in etagere_consumer_rejections_total.
 */
function consumerGate(consumers: Consumers | undefined, oidc: OidcVerifier | undefined, metrics: Metrics) {
  if (consumers === undefined) return undefined;
  const judge = (identified: Identified, method: string, apiPath: string, githubLike: boolean): Gated => {
    const found = verdict(identified, method, apiPath, githubLike);
    const { refusal } = found;
    if (refusal === undefined) return { oidc: found.oidc, key: found.key };
    metrics.consumerRejections.labels(refusal.consumer, refusal.reason).inc();
    return { refusal: refusal.reply };
  };
  return (req: IncomingMessage, method: string, apiPath: string, githubLike: boolean): Gated | Promise<Gated> => {
    const identified = identify(req.headers, consumers, oidc, req.socket);
    if (identified instanceof Promise) return identified.then((done) => judge(done, method, apiPath, githubLike));
    return judge(identified, method, apiPath, githubLike);
  };
}

/** Whose credential a request uses, per upstream (indexed as the router's matches). */
function credentialRules(config: Config, { upstreams, pool, consumers, memos }: Services): CredentialRules[] {
  return upstreams.map((rt) => ({
    pooled: rt.cfg.token_pool && pool !== undefined,
    consumers,
    unknown: config.consumers.unknown,
    poolCredentials: memos.credentials,
  }));
}

/** GET and HEAD bodies are never forwarded; read and drop them so keep-alive keeps working. */
function drain(req: IncomingMessage): void {
  if (!req.complete) req.resume();
}
