/**
 * What tracing runs with, from the validated `tracing` section (the OTEL_* environment already
 * applied over it by src/platform/config/load.ts): where spans go, the sampler, the resource.
 * Pure: no OpenTelemetry code here.
 */
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

/** The traces URL of a base endpoint: `/v1/traces` under its path, as OTEL_EXPORTER_OTLP_ENDPOINT means it. */
export function tracesUrl(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
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

/** A URL as it may be logged: no user or password. */
export function shownUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}
