/**
 * What tracing runs with, from the validated `tracing` section (the OTEL_* environment already
 * applied over it by src/platform/config/load.ts): where spans go, the sampler, the resource.
 * Pure: no OpenTelemetry code here.
 */
import { maskedUrl } from '../config/masked.js';
import type { TracingConfig } from '../config/schema.js';

export type SamplerName = TracingConfig['sampler'];

export interface TraceSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  readonly url: string;
  readonly serviceName: string;
  readonly sampler: SamplerName;
  /** The ratio of the traceidratio samplers (1 when not given, as OpenTelemetry's default). */
  readonly ratio: number;
  readonly resource: Readonly<Record<string, string>>;
}

/**
 * The traces URL of a base endpoint: `/v1/traces` under its path, as OTEL_EXPORTER_OTLP_ENDPOINT
 * means it; the endpoint's query (a collector's `?api-key=`) stays after the path.
 */
export function tracesUrl(base: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    return `${base.replace(/\/+$/, '')}/v1/traces`;
  }
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.toString();
}

/** The settings, or undefined when no endpoint is configured (tracing off). */
export function traceSettings(config: TracingConfig): TraceSettings | undefined {
  const url = config.traces_endpoint ?? (config.endpoint === null ? undefined : tracesUrl(config.endpoint));
  if (url === undefined) return undefined;
  return {
    url,
    serviceName: config.service_name ?? config.resource_attributes['service.name'] ?? 'etagere',
    sampler: config.sampler,
    ratio: config.sampler_arg ?? 1,
    resource: config.resource_attributes,
  };
}

/** A URL as it may be logged: masked as `etagere check-config` masks it (password, query values). */
export const shownUrl = maskedUrl;

/**
 * Whether a request is sampled (recorded and exported), as OpenTelemetry's samplers decide:
 * `parentbased_*` follow a valid parent's sampled flag and use their root sampler without one;
 * `traceidratio` keeps a fixed share of trace ids, the same decision for the same trace id on
 * every replica (from the id's last 8 hex digits, its random part under W3C Trace Context level 2).
 */
export function sampled(sampler: SamplerName, ratio: number, traceId: string, parent: { sampled: boolean } | undefined): boolean {
  if (parent !== undefined && sampler.startsWith('parentbased_')) return parent.sampled;
  if (sampler.endsWith('always_on')) return true;
  if (sampler.endsWith('always_off')) return false;
  return parseInt(traceId.slice(-8), 16) < ratio * 0x1_0000_0000;
}

/** A root's decision (no parent): `draw` uniform in [0, 1), compared with the ratio as `sampled` compares a trace id. */
export function sampledRoot(sampler: SamplerName, ratio: number, draw: number): boolean {
  return rootSampler(sampler, ratio)(draw);
}

/** `sampledRoot` for one sampler, settled once: per request, at most a comparison. */
export function rootSampler(sampler: SamplerName, ratio: number): (draw: number) => boolean {
  if (sampler.endsWith('always_on')) return () => true;
  if (sampler.endsWith('always_off')) return () => false;
  return (draw) => draw < ratio;
}
