/**
 * Builds a process's tracing from its config: `NO_TRACING` without an endpoint (the SDK is not
 * even loaded), else the OpenTelemetry SDK (otel.ts, imported here only then).
 */
import type { Logger } from '../log/logger.js';
import type { TracingConfig } from '../config/schema.js';
import { shownUrl, traceSettings } from './settings.js';
import { NO_TRACING, type Tracing } from './tracing.js';

export async function createTracing(config: TracingConfig, logger: Logger): Promise<Tracing> {
  const settings = traceSettings(config);
  if (settings === undefined) return NO_TRACING;
  const { createOtelTracing } = await import('./otel.js');
  const tracing = createOtelTracing(settings);
  // service_name, as the key says: every line's own `service` key is the logger's.
  logger.info(
    { endpoint: shownUrl(settings.url), sampler: settings.sampler, ratio: settings.ratio, service_name: settings.serviceName },
    'tracing on: spans exported over OTLP/HTTP (JSON)',
  );
  return tracing;
}
