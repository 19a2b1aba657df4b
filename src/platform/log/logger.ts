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

/**
 * Words of a query parameter's name that make its value a secret (GitHub once took ?access_token=;
 * other APIs take api_key, X-Amz-Signature, sig, an OAuth code and state). A word stands between
 * "_", "-", ".", spaces or the name's ends (`client_secret`, `X-API-KEY`), or starts with a capital
 * after a lower-case letter or digit (`apiKey`, `refreshToken`); `mytoken`, `tokens` and `keyword`
 * hold none.
 */
const SECRET_WORD = /(?:^|[^A-Za-z0-9])(?:token|secret|key|apikey|password|passwd|pwd|signature|sig|code|state)(?![A-Za-z0-9])/i;
const SECRET_CAMEL_WORD = /[a-z0-9](?:Token|Secret|Key|Password|Passwd|Pwd|Signature|Sig|Code|State)(?![a-z])/;
/** A cheap first look from a query's start: none of the words' beginnings and no escape means nothing to mask. */
const MAYBE_SECRET = /token|secret|key|pass|pwd|sig|code|state|%/gi;
const REDACTED = '[REDACTED]';

/** Percent-escapes decoded where they are valid ("+" as space), the rest kept as it is: a hostile name never throws. */
function decodeLoosely(text: string): string {
  const spaced = text.indexOf('+') === -1 ? text : text.replace(/\+/g, ' ');
  if (spaced.indexOf('%') === -1) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run;
      }
    });
  }
}

/** Whether a raw parameter name names a secret, once decoded (up to three times: `access%255Ftoken` too). */
export function secretParameter(rawName: string): boolean {
  let name = rawName;
  for (let round = 0; round < 3 && (name.indexOf('%') !== -1 || name.indexOf('+') !== -1); round++) {
    const decoded = decodeLoosely(name);
    if (decoded === name) break;
    name = decoded;
  }
  return SECRET_WORD.test(name) || SECRET_CAMEL_WORD.test(name);
}

/**
 * Masks the values of credential-bearing query parameters (`secretParameter`), whatever the
 * names' case or percent-encoding. A URL without a query, or whose query holds none of the words
 * and no escape, is returned as it is after one search: the common case on every logged request.
 */
export function redactQuery(url: string): string {
  const mark = url.indexOf('?');
  if (mark === -1 || url.indexOf('=', mark) === -1) return url;
  MAYBE_SECRET.lastIndex = mark;
  if (!MAYBE_SECRET.test(url)) return url;
  const hash = url.indexOf('#', mark);
  const query = hash === -1 ? url.slice(mark + 1) : url.slice(mark + 1, hash);
  let masked = false;
  const parts = query.split(/([&;])/).map((part) => {
    const equals = part.indexOf('=');
    if (equals === -1 || !secretParameter(part.slice(0, equals))) return part;
    masked = true;
    return `${part.slice(0, equals + 1)}${REDACTED}`;
  });
  if (!masked) return url;
  return `${url.slice(0, mark + 1)}${parts.join('')}${hash === -1 ? '' : url.slice(hash)}`;
}
