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

/** Lines below warn wait at most this long in the stdout buffer (a lone info line is out within a second). */
export const LOG_FLUSH_MS = 500;
/** Lines below warn are written to stdout once this many bytes are waiting (or every LOG_FLUSH_MS). */
const BATCH_BYTES = 32 * 1024;
/** pino's level number for warn: warn, error and fatal lines are written at once. */
const WARN = 40;

/**
 * On stdout, lines are buffered up to 32 KiB (one write for about a hundred access lines on the
 * hit path: each write costs a thread-pool round trip, and with 4 KiB that showed on every line),
 * flushed every LOG_FLUSH_MS, and a warn or error line flushes the buffer at once: a "token dead"
 * line is in the log when it happens, not at shutdown.
 */
export function createLogger(opts: LoggerOptions): Logger {
  const options = {
    level: opts.level,
    base: { service: 'etagere' },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    formatters: { level: (label: string) => ({ level: label }) },
  };
  if (opts.destination !== undefined) return pino(options, opts.destination);
  const dest = pino.destination({ dest: 1, sync: false, minLength: BATCH_BYTES, maxWrite: 2 * BATCH_BYTES, periodicFlush: LOG_FLUSH_MS });
  let flushOnDrain = false;
  const flushNow = (): void => {
    try {
      dest.flush();
    } catch {
      // destroyed at exit: nothing left to write to
    }
  };
  return pino(
    {
      ...options,
      hooks: {
        logMethod(args, method, level) {
          method.apply(this, args);
          if (level < WARN) return;
          flushNow();
          // A write already in flight leaves the new line buffered: flush again once it is done.
          if (!flushOnDrain) {
            flushOnDrain = true;
            dest.once('drain', () => {
              flushOnDrain = false;
              flushNow();
            });
          }
        },
      },
    },
    dest,
  );
}

const SENSITIVE_QUERY = /([?&](?:access_token|client_secret|token|code|state|password)=)[^&#]*/gi;
/** The same parameters, found (not replaced): most queries (page, per_page, q) have none. */
const HAS_SENSITIVE = /[?&](?:access_token|client_secret|token|code|state|password)=/i;

/**
 * Masks credential-bearing query parameters (GitHub once accepted ?access_token=). A URL without
 * one is returned as it is, after a test that costs about a third less than a replace that finds
 * nothing (on every logged request with a query).
 */
export function redactQuery(url: string): string {
  return url.indexOf('=') === -1 || !HAS_SENSITIVE.test(url) ? url : url.replace(SENSITIVE_QUERY, '$1[REDACTED]');
}
