/**
 * Traces, as the request path sees them: a small interface over OpenTelemetry (src/platform/trace/otel.ts),
 * built once per process (src/platform/trace/setup.ts) and handed down as an instance. When no OTLP
 * endpoint is configured it is `NO_TRACING`: `on` is false, and the hit path branches on that boolean
 * without calling anything here, so tracing off costs no span, no context and no OpenTelemetry code.
 *
 * Attributes never carry a secret: token and consumer names only, paths without their query.
 */

/** An attribute value as spans take it. */
export type AttributeValue = string | number | boolean;
export type Attributes = Readonly<Record<string, AttributeValue | undefined>>;

/** A span under way: attributes set as they are learnt, ended once. */
export interface SpanHandle {
  set(key: string, value: AttributeValue | undefined): void;
  /** Marks the span failed (status ERROR) with a short reason, never a secret. */
  fail(reason: string): void;
  end(): void;
}

/** A request's server span: its ids (for the access line) and its name once the route is known. */
export interface RequestSpan extends SpanHandle {
  readonly traceId: string;
  readonly spanId: string;
  /** Whether the span is recorded and exported (the sampler's decision). */
  readonly sampled: boolean;
  rename(name: string): void;
}

/** Outgoing request headers, as the upstream client and http-proxy-3 take them. */
export type OutgoingHeaders = Record<string, string | string[] | undefined>;

/** Incoming request headers (Node's map): `traceparent` and `tracestate` are read. */
export type IncomingHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface Tracing {
  /** False when tracing is off: callers branch on it and call nothing else. */
  readonly on: boolean;
  /**
   * Starts a request's server span, continuing the client's W3C `traceparent`/`tracestate` when
   * they are valid (a malformed or all-zero one is ignored: a new trace starts, when sampled).
   */
  request(headers: IncomingHeaders, method: string): RequestSpan;
  /**
   * A child span of `parent` around `work`'s promise (ended when it settles; failed when it
   * rejects). The parent is passed along the request path, never held in an async context: an
   * unsampled parent's child is the parent itself, and no parent means no span.
   */
  child<T>(name: string, parent: SpanHandle | undefined, attributes: Attributes, work: (span: SpanHandle) => Promise<T>): Promise<T>;
  /** Starts a child span of `parent`, to be ended by the caller; `client`: an outgoing request's span. */
  start(name: string, parent: SpanHandle | undefined, attributes: Attributes, client?: boolean): SpanHandle;
  /**
   * Writes `traceparent` for `span` into outgoing headers, replacing the client's. Only
   * `traceparent`: a `tracestate` or `baggage` goes upstream only where the client's own headers
   * are forwarded (never on a pool token).
   */
  inject(headers: OutgoingHeaders, span: SpanHandle): void;
  /** Exports what is queued and stops; bounded in time, never rejects. */
  shutdown(): Promise<void>;
}

/** A span that records nothing. */
const NO_SPAN: RequestSpan = {
  traceId: '',
  spanId: '',
  sampled: false,
  set: () => undefined,
  fail: () => undefined,
  end: () => undefined,
  rename: () => undefined,
};

/** Tracing off: nothing is started, injected or exported (callers check `on` before calling at all). */
export const NO_TRACING: Tracing = {
  on: false,
  request: () => NO_SPAN,
  child: (_name, _parent, _attributes, work) => work(NO_SPAN),
  start: () => NO_SPAN,
  inject: () => undefined,
  shutdown: () => Promise.resolve(),
};

/** The names of the proxy's child spans. */
export const SPANS = {
  l2Lookup: 'cache.l2_lookup',
  flightWait: 'cache.flight_wait',
  revalidation: 'cache.revalidate',
  tokenWait: 'pool.token_wait',
  graphql: 'graphql query',
} as const;

/** The client span of one upstream request, named for its method (OpenTelemetry's HTTP client spans). */
export const upstreamSpanName = (method: string): string => `upstream ${method}`;

/** The server span's name: method and route template (`GET /repos/{owner}/{repo}`), never the raw path. */
export const serverSpanName = (method: string, route: string): string => (route === '-' ? method : `${method} ${route}`);

/** The path of a URL without its query (a query may carry a secret): what `url.path` attributes hold. */
export const pathOnly = (path: string): string => {
  const query = path.indexOf('?');
  return query === -1 ? path : path.slice(0, query);
};

/** Attribute names: OpenTelemetry's HTTP semantic conventions, and the proxy's own under `etagere.`. */
export const ATTR = {
  method: 'http.request.method',
  status: 'http.response.status_code',
  route: 'http.route',
  urlPath: 'url.path',
  urlScheme: 'url.scheme',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  cache: 'etagere.cache',
  upstream: 'etagere.upstream',
  consumer: 'etagere.consumer',
  token: 'etagere.token',
  requestId: 'etagere.request_id',
  notModified: 'etagere.not_modified',
  flight: 'etagere.flight',
  l2: 'etagere.l2',
} as const;
