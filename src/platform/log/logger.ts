/**
 * The pino logger. Credentials never reach a log line: Authorization, Cookie and
 * Proxy-Authorization headers are redacted wherever they appear, and sensitive query
 * parameters are masked by `redactQuery` before a URL is logged. The access line is written
 * beside it (`AccessLog`, below).
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import { createBoundedMemo, type BoundedMemo } from '../bytes.js';

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

/*
 * The access log: one JSON line per request, in the same shape pino writes (level, time, service,
 * msg), assembled directly and written to the logger's destination. On the hit path this costs a
 * fraction of a generic pino call: the fields are known, so there is no object walk and no
 * redaction pass, and a stored form's hits share a template (the query masked once). Credentials
 * never reach it: it takes no headers, and the path's sensitive query parameters are masked with
 * `redactQuery`.
 */
export interface AccessFields {
  reqId: string;
  method: string;
  path: string;
  upstream: string;
  /** Route template (bounded), e.g. /repos/{owner}/{repo}. */
  route?: string;
  status: number;
  cache: string | undefined;
  upstreamStatus: number | undefined;
  /** Name of the pool token used (never its value). */
  token?: string | undefined;
  durationMs: number;
  bytes: number;
  aborted: boolean;
  /** The request's trace and server span, when it was traced (sampled): lowercase hex, as W3C Trace Context writes them. */
  traceId?: string | undefined;
  spanId?: string | undefined;
}

interface Destination {
  write(line: string): unknown;
  /** Present on pino's own (SonicBoom) destination. */
  flushSync?: () => void;
}

/** Characters that JSON strings must escape (and the lone surrogates JSON.stringify also escapes). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A JSON string literal: most values (ids, methods, routes, plain paths) need no escaping at all. */
function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** Bound of the memo of quoted values (etagere_cache_bytes{tier="log_memo"}). */
export const LOG_MEMO_BYTES = 512 * 1024;
/** Longer values are quoted on every line. */
const LOG_MEMO_KEY_CHARS = 1024;

/**
 * The memo of the few values that repeat on every line (method, upstream name, route template),
 * quoted once: a lookup instead of an escape check and a copy. One per access log (services.ts builds it).
 */
export const createLogMemo = (): BoundedMemo => createBoundedMemo(LOG_MEMO_BYTES, LOG_MEMO_KEY_CHARS);

function quoter(memo: BoundedMemo): (text: string) => string {
  return (text) => {
    let literal = memo.get(text);
    if (literal === undefined) {
      literal = jsonString(text);
      memo.set(text, literal);
    }
    return literal;
  };
}

/** Beyond this many characters pending, lines are handed over at once rather than when the timer fires. */
const BATCH_CHARS = 64 * 1024;
/** Lines wait at most this long before they are handed to the destination (which itself buffers: logger.ts). */
export const ACCESS_FLUSH_MS = 200;

/** The fields a stored form's hits share (its template, `AccessLog.template`). */
export type TemplateFields = Pick<AccessFields, 'method' | 'path' | 'upstream' | 'route' | 'status' | 'cache'>;

/**
 * The access log of one handler. `write` assembles a line from its fields; a stored form's hits,
 * whose lines differ only in id, time, duration and bytes, are written from a template made once
 * (`template`, `writeFrom`): no quoting, escaping or query masking per line. On pino's own
 * destination lines are handed over together, by size or after ACCESS_FLUSH_MS, not every turn;
 * `flush` hands over what waits (shutdown). Other destinations (the tests' streams) get each line as it comes.
 */
export class AccessLog {
  /** Lines are written (info is enabled). */
  readonly on: boolean;
  readonly #logger: Logger;
  readonly #dest: Destination | undefined;
  readonly #quoted: (text: string) => string;
  readonly #batched: boolean;
  #pending = '';
  #timer: NodeJS.Timeout | undefined = undefined;

  /** `memo`: where the repeated values are kept quoted (a memo of its own when not given). */
  constructor(logger: Logger, memo: BoundedMemo = createLogMemo()) {
    this.on = logger.isLevelEnabled('info');
    this.#logger = logger;
    const dest = (logger as unknown as Record<symbol, Destination | undefined>)[pino.symbols.streamSym];
    this.#dest = dest !== undefined && typeof dest.write === 'function' ? dest : undefined;
    this.#batched = typeof this.#dest?.flushSync === 'function';
    this.#quoted = quoter(memo);
  }

  /** One line from its fields. */
  write(fields: AccessFields): void {
    if (!this.on) return;
    if (this.#dest === undefined) {
      const { traceId, spanId, ...rest } = fields;
      this.#logger.info(
        { ...rest, path: redactQuery(fields.path), ...(traceId === undefined ? {} : { trace_id: traceId, span_id: spanId }) },
        'request',
      );
      return;
    }
    let line = this.template(fields);
    if (fields.upstreamStatus !== undefined) line += `,"upstreamStatus":${fields.upstreamStatus}`;
    if (fields.token !== undefined) line += `,"tokenName":${jsonString(fields.token)}`;
    this.#emit(this.#head(fields.reqId) + line + this.#tail(fields));
  }

  /** What the lines of one stored form's hits share, from `method` to `cache`: quoted, and the query masked, once. */
  template(fields: TemplateFields): string {
    const quoted = this.#quoted;
    let line = `,"method":${quoted(fields.method)},"path":${jsonString(redactQuery(fields.path))},"upstream":${quoted(fields.upstream)}`;
    if (fields.route !== undefined) line += `,"route":${quoted(fields.route)}`;
    line += `,"status":${fields.status}`;
    if (fields.cache !== undefined) line += `,"cache":"${fields.cache}"`;
    return line;
  }

  /** Whether `writeFrom` may be used (lines go to pino's destination, not through the logger). */
  get direct(): boolean {
    return this.#dest !== undefined;
  }

  /** One line from a template (`template`) and the fields of this request. */
  writeFrom(template: string, fields: Pick<AccessFields, 'reqId' | 'durationMs' | 'bytes' | 'aborted' | 'traceId' | 'spanId'>): void {
    if (this.on) this.#emit(this.#head(fields.reqId) + template + this.#tail(fields));
  }

  /** Hands the lines waiting to the destination. */
  flush(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#pending.length === 0) return;
    const out = this.#pending;
    this.#pending = '';
    this.#dest?.write(out);
  }

  #head(reqId: string): string {
    return `{"level":"info","time":${Date.now()},"service":"etagere","reqId":${jsonString(reqId)}`;
  }

  #tail(fields: Pick<AccessFields, 'durationMs' | 'bytes' | 'aborted' | 'traceId' | 'spanId'>): string {
    let tail = `,"durationMs":${fields.durationMs},"bytes":${fields.bytes}`;
    if (fields.aborted) tail += ',"aborted":true';
    if (fields.traceId !== undefined) tail += `,"trace_id":"${fields.traceId}","span_id":"${fields.spanId}"`;
    return `${tail},"msg":"request"}\n`;
  }

  #emit(line: string): void {
    if (!this.#batched) {
      this.#dest!.write(line);
      return;
    }
    this.#pending += line;
    if (this.#pending.length >= BATCH_CHARS) this.flush();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.flush(), ACCESS_FLUSH_MS);
      this.#timer.unref();
    }
  }
}
