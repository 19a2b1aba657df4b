/**
 * The environment variables the config reads, and the error a bad config throws: no dependency, so
 * the command line's help and error handling load neither zod nor YAML.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Environment variables that override the file. Documented in docs/configuration.md (checked by a test). */
export const ENV_VARS = {
  ETAGERE_CONFIG: 'path of the YAML config file (overridden by --config)',
  PORT: 'listen.port',
  HOST: 'listen.host',
  ETAGERE_TLS_CERT_FILE: 'listen.tls.cert_file: the HTTPS certificate (PEM; give the key too)',
  ETAGERE_TLS_KEY_FILE: 'listen.tls.key_file: the HTTPS private key (PEM; give the certificate too)',
  ADMIN_PORT: 'admin.port',
  ADMIN_HOST: 'admin.host',
  ETAGERE_ADMIN_TOKEN: 'admin.token: the bearer token of /admin/* (also what etagere purge, cache and quota send)',
  PUBLIC_URL: 'public_url',
  REDIS_URL: 'redis.url',
  REDIS_CLUSTER_NODES: 'redis.cluster: comma-separated host:port seed nodes',
  ETAGERE_TOKENS: 'pool.tokens: comma-separated tokens, each "token" or "name=token"',
  ETAGERE_TOKENS_FILE: 'pool.tokens_file: a file with one token per line ("name=token" allowed)',
  ETAGERE_CONSUMER_KEYS_FILE: 'consumers.keys_file: a file of "name=key" lines, the keys of the consumers of consumers.keys',
  ETAGERE_APP_ID: 'pool.apps: one GitHub App named "app", with this app_id',
  ETAGERE_APP_PRIVATE_KEY_FILE: "pool.apps[0].private_key_file: that App's private key (PEM)",
  ETAGERE_APP_INSTALLATIONS: 'pool.apps[0].installations: "all" (the default) or comma-separated installation ids',
  UPSTREAM_URL: "upstreams[0].url (the default upstream's url)",
  LOG_LEVEL: 'log.level',
  WORKERS: 'workers: a number, or "auto" for one per CPU',
  ETAGERE_PARTITION_SECRET: 'cache.partition_secret',
  ETAGERE_WEBHOOK_SECRET: "webhooks.secret: the webhook's secret (turns the receiver on)",
  ETAGERE_WEBHOOK_SECRET_FILE: "webhooks.secret_file: a file holding the webhook's secret",
  OTEL_EXPORTER_OTLP_ENDPOINT: 'tracing.endpoint: the OTLP/HTTP base endpoint, spans to its /v1/traces (turns tracing on)',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'tracing.traces_endpoint: the OTLP/HTTP traces URL, used as it is (turns tracing on)',
  OTEL_SERVICE_NAME: 'tracing.service_name',
  OTEL_TRACES_SAMPLER: 'tracing.sampler: always_on, always_off, traceidratio or their parentbased_ forms',
  OTEL_TRACES_SAMPLER_ARG: "tracing.sampler_arg: the traceidratio samplers' ratio, 0 to 1",
  OTEL_RESOURCE_ATTRIBUTES: 'tracing.resource_attributes: comma-separated key=value pairs (values percent-encoded)',
} as const;
