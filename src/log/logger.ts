/**
 * The pino logger. Credentials never reach a log line: Authorization, Cookie and
 * Proxy-Authorization headers are redacted wherever they appear, and sensitive query
 * parameters are masked by `redactQuery` before a URL is logged.
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

const REDACT_PATHS = [
  'headers.authorization',
  'headers.cookie',
  'headers["proxy-authorization"]',
  'headers["x-etagere-key"]',
  'req.headers["x-etagere-key"]',
  'headers["set-cookie"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'token',
  'tokens',
];

export interface LoggerOptions {
  level: string;
  /** Where lines go; default: stdout through an asynchronous pino destination. */
  destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096 });
  return pino(
    {
      level: opts.level,
      base: { service: 'etagere' },
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
}

const SENSITIVE_QUERY = /([?&](?:access_token|client_secret|token|code|state|password)=)[^&#]*/gi;

/** Masks credential-bearing query parameters (GitHub once accepted ?access_token=). */
export function redactQuery(url: string): string {
  return url.indexOf('=') === -1 ? url : url.replace(SENSITIVE_QUERY, '$1[REDACTED]');
}
