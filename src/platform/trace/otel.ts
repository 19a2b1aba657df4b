/**
 * Tracing on: the OpenTelemetry SDK (NodeTracerProvider, a bounded BatchSpanProcessor, the
 * OTLP/HTTP exporter). Loaded by setup.ts only when an endpoint is configured. Nothing is
 * registered globally: the provider, the propagator and the active span (an AsyncLocalStorage)
 * belong to this instance, so two proxies in one process trace apart.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { Attributes, AttributeValue, IncomingHeaders, OutgoingHeaders, RequestSpan, Tracing } from './tracing.js';
import type { TraceSettings, SamplerName } from './settings.js';

/** A traceparent is 55 characters (version 00); longer ones are allowed by later versions, not a kilobyte. */
const MAX_TRACEPARENT = 256;
/** Spans waiting for export beyond this are dropped: a slow collector costs memory within a bound, never a request. */
const MAX_QUEUE = 2048;
/** How long an export may take, and how long shutdown waits for the last one. */
const EXPORT_TIMEOUT_MS = 5_000;
const SHUTDOWN_MS = 2_000;

/** Reads the client's trace headers (bounded): a huge or repeated `traceparent` is no context. */
const getter: TextMapGetter<IncomingHeaders> = {
  get(carrier, key) {
    const value = carrier[key];
    if (key === 'traceparent') return typeof value === 'string' && value.length <= MAX_TRACEPARENT ? value : undefined;
    return value;
  },
  keys: (carrier) => Object.keys(carrier),
};

/** Writes `traceparent` alone (see `Tracing.inject`). */
const setter: TextMapSetter<OutgoingHeaders> = {
  set(carrier, key, value) {
    if (key === 'traceparent') carrier[key] = value;
  },
};

function samplerOf(name: SamplerName, ratio: number): Sampler {
  const root = name.endsWith('always_off')
    ? new AlwaysOffSampler()
    : name.endsWith('traceidratio')
      ? new TraceIdRatioBasedSampler(ratio)
      : new AlwaysOnSampler();
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/** A span of the SDK behind the small handle the request path uses. */
class Handle implements RequestSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  constructor(readonly span: Span) {
    const context = span.spanContext();
    this.traceId = context.traceId;
    this.spanId = context.spanId;
    this.sampled = span.isRecording();
  }
  set(key: string, value: AttributeValue | undefined): void {
    if (value !== undefined && this.sampled) this.span.setAttribute(key, value);
  }
  fail(reason: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  }
  end(): void {
    this.span.end();
  }
  rename(name: string): void {
    if (this.sampled) this.span.updateName(name);
  }
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

export function createOtelTracing(settings: TraceSettings): Tracing {
  const exporter = new OTLPTraceExporter({ url: settings.url });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ ...settings.resource, [ATTR_SERVICE_NAME]: settings.serviceName }),
    sampler: samplerOf(settings.sampler, settings.ratio),
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: MAX_QUEUE, exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
  });
  const tracer = provider.getTracer('etagere');
  const propagator = new W3CTraceContextPropagator();
  const active = new AsyncLocalStorage<Context>();
  const current = (): Context => active.getStore() ?? ROOT_CONTEXT;
  const startChild = (name: string, attributes: Attributes, client = false): Handle =>
    new Handle(tracer.startSpan(name, { kind: client ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes: defined(attributes) }, current()));

  return {
    on: true,
    request(headers, method) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, getter);
      return new Handle(tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent));
    },
    within(span, work) {
      return active.run(trace.setSpan(current(), (span as Handle).span), work);
    },
    async child(name, attributes, work) {
      const span = startChild(name, attributes);
      try {
        return await active.run(trace.setSpan(current(), span.span), () => work(span));
      } catch (err) {
        span.fail((err as Error).name);
        throw err;
      } finally {
        span.end();
      }
    },
    start: startChild,
    inject(headers, span) {
      const context = span === undefined ? current() : trace.setSpan(current(), (span as Handle).span);
      propagator.inject(context, headers, setter);
    },
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_MS).unref()));
      await Promise.race([provider.shutdown().catch(() => undefined), late]);
      clearTimeout(timer);
    },
  };
}
