/**
 * The access log: one JSON line per request, in the same shape pino writes (level, time, service,
 * msg), assembled directly and written to the logger's destination. On the hit path this costs a
 * fraction of a generic pino call: the fields are known, so there is no object walk and no
 * redaction pass. Credentials never reach it: it takes no headers, and the path's sensitive query
 * parameters are masked with `redactQuery`.
 */
import { pino, type Logger } from 'pino';
import { createBoundedMemo, type BoundedMemo } from '../memo.js';
import { redactQuery } from './logger.js';

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

export type AccessLog = (fields: AccessFields) => void;

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

/** Beyond this many characters pending, lines are handed over at once rather than at the end of the tick. */
const BATCH_CHARS = 64 * 1024;

/** `memo`: where the repeated values are kept quoted (a memo of its own when not given). */
export function createAccessLog(logger: Logger, memo: BoundedMemo = createLogMemo()): AccessLog {
  if (!logger.isLevelEnabled('info')) return () => undefined;
  const quoted = quoter(memo);
  const dest = (logger as unknown as Record<symbol, Destination | undefined>)[pino.symbols.streamSym];
  if (dest === undefined || typeof dest.write !== 'function') {
    return ({ traceId, spanId, ...fields }) =>
      logger.info(
        { ...fields, path: redactQuery(fields.path), ...(traceId === undefined ? {} : { trace_id: traceId, span_id: spanId }) },
        'request',
      );
  }
  // On pino's own destination, the lines of one event-loop turn are handed over in one write: the
  // destination's per-write cost, not the line itself, dominated the access log on the hit path.
  // (Other destinations, such as the tests' in-memory stream, get each line as it comes.)
  let pending = '';
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (pending.length === 0) return;
    const out = pending;
    pending = '';
    dest.write(out);
  };
  const emit =
    typeof dest.flushSync === 'function'
      ? (line: string): void => {
          pending += line;
          if (pending.length >= BATCH_CHARS) flush();
          else if (!scheduled) {
            scheduled = true;
            setImmediate(flush);
          }
        }
      : (line: string): void => void dest.write(line);
  return (fields) => {
    let line = `{"level":"info","time":${Date.now()},"service":"etagere","reqId":${jsonString(fields.reqId)},"method":${quoted(fields.method)},"path":${jsonString(redactQuery(fields.path))},"upstream":${quoted(fields.upstream)}${fields.route === undefined ? '' : `,"route":${quoted(fields.route)}`},"status":${fields.status}`;
    if (fields.cache !== undefined) line += `,"cache":"${fields.cache}"`;
    if (fields.upstreamStatus !== undefined) line += `,"upstreamStatus":${fields.upstreamStatus}`;
    if (fields.token !== undefined) line += `,"tokenName":${jsonString(fields.token)}`;
    line += `,"durationMs":${fields.durationMs},"bytes":${fields.bytes}`;
    if (fields.aborted) line += ',"aborted":true';
    if (fields.traceId !== undefined) line += `,"trace_id":"${fields.traceId}","span_id":"${fields.spanId}"`;
    emit(`${line},"msg":"request"}\n`);
  };
}
