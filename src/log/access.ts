/**
 * The access log: one JSON line per request, in the same shape pino writes (level, time, service,
 * msg), assembled directly and written to the logger's destination. On the hit path this costs a
 * fraction of a generic pino call: the fields are known, so there is no object walk and no
 * redaction pass. Credentials never reach it: it takes no headers, and the path's sensitive query
 * parameters are masked with `redactQuery`.
 */
import { pino, type Logger } from 'pino';
import { redactQuery } from './logger.js';

export interface AccessFields {
  reqId: string;
  method: string;
  path: string;
  upstream: string;
  /** Route template (bounded), e.g. /repos/:owner/:repo. */
  route?: string;
  status: number;
  cache: string | undefined;
  upstreamStatus: number | undefined;
  /** Name of the pool token used (never its value). */
  token?: string | undefined;
  durationMs: number;
  bytes: number;
  aborted: boolean;
}

export type AccessLog = (f: AccessFields) => void;

interface Destination {
  write(line: string): unknown;
}

export function createAccessLog(logger: Logger): AccessLog {
  if (!logger.isLevelEnabled('info')) return () => undefined;
  const dest = (logger as unknown as Record<symbol, Destination | undefined>)[pino.symbols.streamSym];
  if (dest === undefined || typeof dest.write !== 'function') {
    return (f) => logger.info({ ...f, path: redactQuery(f.path) }, 'request');
  }
  return (f) => {
    let line = `{"level":"info","time":${Date.now()},"service":"etagere","reqId":${JSON.stringify(f.reqId)},"method":${JSON.stringify(f.method)},"path":${JSON.stringify(redactQuery(f.path))},"upstream":${JSON.stringify(f.upstream)}${f.route === undefined ? '' : `,"route":${JSON.stringify(f.route)}`},"status":${f.status}`;
    if (f.cache !== undefined) line += `,"cache":"${f.cache}"`;
    if (f.upstreamStatus !== undefined) line += `,"upstreamStatus":${f.upstreamStatus}`;
    if (f.token !== undefined) line += `,"tokenName":${JSON.stringify(f.token)}`;
    line += `,"durationMs":${f.durationMs},"bytes":${f.bytes}`;
    if (f.aborted) line += ',"aborted":true';
    dest.write(`${line},"msg":"request"}\n`);
  };
}
