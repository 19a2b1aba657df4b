/**
 * Tracing on: the OpenTelemetry SDK (NodeTracerProvider, a bounded BatchSpanProcessor, the
 * OTLP/HTTP exporter). Loaded by setup.ts only when an endpoint is configured. Nothing is
 * registered globally and no async context is kept: the provider belongs to this instance (two
 * proxies in one process trace apart), and each span's parent is passed along the request path.
 *
 * The sampling decision is made first (settings.ts `sampled`): a request that is not sampled never
 * reaches the SDK. It gets ids of its own (to pass the trace on upstream) and nothing else, which
 * keeps 1 % sampling close to the cost of tracing off.
 */
import { randomFillSync } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Span, type TextMapGetter } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { Attributes, AttributeValue, IncomingHeaders, RequestSpan, SpanHandle, Tracing } from './tracing.js';
import { rootSampler, sampled, type TraceSettings } from './settings.js';

/** A traceparent is 55 characters (version 00); longer ones are allowed by later versions, not a kilobyte. */
const MAX_TRACEPARENT = 256;
/** Spans waiting for export beyond this are dropped: a slow collector costs memory within a bound, never a request. */
const MAX_QUEUE = 2048;
/** How long an export may take, and how long shutdown waits for the last one. */
const EXPORT_TIMEOUT_MS = 5_000;
const SHUTDOWN_MS = 2_000;
/** Random bytes drawn at once for the ids of unsampled requests. */
const ID_POOL_BYTES = 4096;

/** Reads the client's trace headers (bounded): a huge or repeated `traceparent` is no context. */
const getter: TextMapGetter<IncomingHeaders> = {
  get(carrier, key) {
    const value = carrier[key];
    if (key === 'traceparent') return typeof value === 'string' && value.length <= MAX_TRACEPARENT ? value : undefined;
    return value;
  },
  keys: (carrier) => Object.keys(carrier),
};

/** A recorded span of the SDK behind the small handle the request path uses. */
class Recorded implements RequestSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled = true;
  constructor(readonly span: Span) {
    const context = span.spanContext();
    this.traceId = context.traceId;
    this.spanId = context.spanId;
  }
  set(key: string, value: AttributeValue | undefined): void {
    if (value !== undefined) this.span.setAttribute(key, value);
  }
  fail(reason: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  }
  end(): void {
    this.span.end();
  }
  rename(name: string): void {
    this.span.updateName(name);
  }
}

/**
 * A request that is not sampled: its ids only, drawn when first read (a hit that goes nowhere
 * never draws them); its children are itself, and nothing is recorded.
 */
class Unsampled implements RequestSpan {
  readonly sampled = false;
  #traceId: string | undefined;
  #spanId: string | undefined;
  constructor(
    parentTraceId: string | undefined,
    private readonly id: (bytes: number) => string,
  ) {
    this.#traceId = parentTraceId;
  }
  get traceId(): string {
    return (this.#traceId ??= this.id(16));
  }
  get spanId(): string {
    return (this.#spanId ??= this.id(8));
  }
  set(): void {}
  fail(): void {}
  end(): void {}
  rename(): void {}
}

/** Attributes without their undefined values. */
function defined(attributes: Attributes): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** Hex ids, and uniform numbers in [0, 1) for a root's sampling decision, from a pool of random bytes refilled when spent. */
function randomSource(): { id: (bytes: number) => string; unit: () => number } {
  const pool = Buffer.allocUnsafe(ID_POOL_BYTES);
  let at = ID_POOL_BYTES;
  const take = (bytes: number): number => {
    if (at + bytes > ID_POOL_BYTES) {
      randomFillSync(pool);
      at = 0;
    }
    at += bytes;
    return at - bytes;
  };
  return {
    id: (bytes) => {
      const from = take(bytes);
      return pool.toString('hex', from, from + bytes);
    },
    unit: () => pool.readUInt32BE(take(4)) / 0x1_0000_0000,
  };
}

export function createOtelTracing(settings: TraceSettings): Tracing {
  const exporter = new OTLPTraceExporter({ url: settings.url });
  const provider = new NodeTracerProvider({
    // process.pid tells the workers of a cluster apart (each exports its own spans).
    resource: resourceFromAttributes({ 'process.pid': process.pid, ...settings.resource, [ATTR_SERVICE_NAME]: settings.serviceName }),
    // Sampling is decided before the SDK is called (`request`): what reaches it is recorded.
    sampler: new AlwaysOnSampler(),
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: MAX_QUEUE, exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
  });
  const tracer = provider.getTracer('etagere');
  const propagator = new W3CTraceContextPropagator();
  const random = randomSource();
  const id = random.id;
  const { sampler, ratio } = settings;
  const sampledAtRoot = rootSampler(sampler, ratio);
  const NONE: SpanHandle = { set: () => undefined, fail: () => undefined, end: () => undefined };

  /** A child of `parent`: recorded under a recorded one; under an unsampled one, that one; else none. */
  const startChild = (name: string, parent: SpanHandle | undefined, attributes: Attributes, client = false): SpanHandle => {
    if (!(parent instanceof Recorded)) return parent instanceof Unsampled ? parent : NONE;
    const kind = client ? SpanKind.CLIENT : SpanKind.INTERNAL;
    return new Recorded(tracer.startSpan(name, { kind, attributes: defined(attributes) }, trace.setSpan(ROOT_CONTEXT, parent.span)));
  };

  return {
    on: true,
    request(headers, method) {
      const parent =
        headers.traceparent === undefined ? undefined : trace.getSpanContext(propagator.extract(ROOT_CONTEXT, headers, getter));
      // A root: decided on a random draw before anything else is built, its ids drawn only if read.
      if (parent === undefined) {
        if (!sampledAtRoot(random.unit())) return new Unsampled(undefined, id);
        return new Recorded(
          tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, ROOT_CONTEXT),
        );
      }
      // A client's trace: decided on its id (the same on every replica).
      const remote = { sampled: (parent.traceFlags & TraceFlags.SAMPLED) !== 0 };
      if (!sampled(sampler, ratio, parent.traceId, remote)) return new Unsampled(parent.traceId, id);
      const context = trace.setSpanContext(ROOT_CONTEXT, parent);
      return new Recorded(tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, context));
    },
    async child(name, parent, attributes, work) {
      const span = startChild(name, parent, attributes);
      if (!(span instanceof Recorded)) return work(span);
      try {
        return await work(span);
      } catch (err) {
        span.fail((err as Error).name);
        throw err;
      } finally {
        span.end();
      }
    },
    // An unsampled request's child is the request itself (whose end does nothing): its ids go upstream.
    start: startChild,
    inject(headers, span) {
      if (span instanceof Recorded || span instanceof Unsampled)
        headers.traceparent = `00-${span.traceId}-${span.spanId}-${span.sampled ? '01' : '00'}`;
    },
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_MS).unref()));
      await Promise.race([provider.shutdown().catch(() => undefined), late]);
      clearTimeout(timer);
    },
  };
}
