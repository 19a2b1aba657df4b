/**
 * What a request leaves behind once answered: one access line, the request metrics and its server
 * span, written from what the path served (at once for a hit, else when the response closes).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Served } from '../http/reply.js';
import { NOT_SERVED } from '../http/reply.js';
import type { RequestContext } from '../paths/context.js';
import type { createAccessLog } from '../platform/log/access.js';
import type { CountCell } from '../platform/metrics/cells.js';
import type { ConsumerLabels } from '../platform/metrics/consumer-label.js';
import { LabelSets } from '../platform/metrics/label-sets.js';
import { upstreamSpend } from '../platform/metrics/quota-saved.js';
import { NO_CONSUMER } from '../platform/metrics/quota-windows.js';
import type { Metrics } from '../platform/metrics/registry.js';
import { ATTR, pathOnly, serverSpanName, type RequestSpan } from '../platform/trace/tracing.js';

/** What the recorder reads of a request: the routed request (if any), its route and what the path served. */
export interface Trace {
  ctx: Pick<RequestContext, 'upstream' | 'cred' | 'pathname'> | undefined;
  route: string;
  served: Served | Promise<Served>;
  /** The User-Agent, read only when metrics.consumer_label is user_agent (before any header is dropped). */
  agent: string | undefined;
  /** The request's server span, when tracing is on (src/platform/trace/). */
  span: RequestSpan | undefined;
}

export type RecordFn = (req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, started: number, bytes: number) => void;

/**
 * The recorder: one access line and the request metrics, from what the path served (on a hit, or
 * at close). A routed request counts for its consumer label (metrics.consumer_label) and route,
 * and what it spent upstream goes to /admin/quota's windows.
 */
export function recorder(metrics: Metrics, access: ReturnType<typeof createAccessLog>, labels: ConsumerLabels) {
  // Per consumer and route, its counter cells resolved once (consumer labels and route templates
  // are bounded). The hits and upstream cells are made on first use: no series at 0 for them.
  const consumers = new LabelSets((name, route) => {
    let hits: CountCell | undefined;
    let upstream: CountCell | undefined;
    return {
      requests: metrics.consumerRequests.cell(name, route),
      get hits(): CountCell {
        return (hits ??= metrics.consumerHits.cell(name, route));
      },
      get upstream(): CountCell {
        return (upstream ??= metrics.consumerUpstreamRequests.cell(name, route));
      },
    };
  });
  /** Labels given up (metrics.consumer_label user_agent: consumer-label.ts): their series and cells go. */
  let labelsSeen = labels.generation;
  const forgetRetired = (): void => {
    labelsSeen = labels.generation;
    for (const gone of labels.retired()) {
      consumers.drop(gone);
      for (const counter of [metrics.consumerRequests, metrics.consumerHits, metrics.consumerUpstreamRequests]) counter.forget(gone);
    }
  };
  const write = (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    trace: Trace,
    served: Served,
    seconds: number,
    bytes: number,
  ): void => {
    const { ctx } = trace;
    const upstreamName = ctx?.upstream.cfg.name ?? '-';
    const authorized = ctx !== undefined && ctx.cred.kind !== 'anonymous';
    metrics.observeRequest(upstreamName, trace.route, req.method ?? '-', res.statusCode, served.outcome, seconds, authorized);
    if (ctx !== undefined) {
      metrics.topPaths.served(upstreamName, ctx.pathname, served.outcome, authorized);
      const spend = upstreamSpend(served.outcome, served.upstreamStatus, authorized);
      const label = labels.of(ctx.cred.kind === 'pool' ? ctx.cred.consumer : undefined, trace.agent);
      if (labels.generation !== labelsSeen) forgetRetired();
      if (label !== undefined) {
        const cells = consumers.of(label, trace.route);
        cells.requests.value++;
        if (served.outcome === 'hit') cells.hits.value++;
        if (spend !== 'none') cells.upstream.value++;
      }
      if (spend !== 'none') metrics.quota.record(label ?? NO_CONSUMER, upstreamName, trace.route, spend === 'billable');
    }
    access({
      reqId: id,
      method: req.method ?? '-',
      path: req.url ?? '',
      upstream: upstreamName,
      route: trace.route,
      status: res.statusCode,
      cache: served.outcome,
      upstreamStatus: served.upstreamStatus,
      token: served.token,
      durationMs: Math.round(seconds * 1e6) / 1e3,
      bytes,
      aborted: !res.writableFinished,
      traceId: trace.span?.sampled === true ? trace.span.traceId : undefined,
      spanId: trace.span?.sampled === true ? trace.span.spanId : undefined,
    });
    if (trace.span !== undefined) endServerSpan(trace.span, req, res, id, trace, served);
  };
  const record = (req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, started: number, bytes: number): void => {
    const seconds = (performance.now() - started) / 1e3;
    const { served } = trace;
    // A client that leaves before its answer is ready: logged once the path has finished with it.
    if (served instanceof Promise)
      served.then(
        (done) => write(req, res, id, trace, done, seconds, bytes),
        () => write(req, res, id, trace, NOT_SERVED, seconds, bytes),
      );
    else write(req, res, id, trace, served, seconds, bytes);
  };
  return record;
}

/** The server span's name and attributes, from what was served: names of the consumer and token, never a credential. */
function endServerSpan(span: RequestSpan, req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, served: Served): void {
  const { ctx } = trace;
  if (span.sampled) {
    span.rename(serverSpanName(req.method ?? '-', trace.route));
    if (trace.route !== '-') span.set(ATTR.route, trace.route);
    span.set(ATTR.status, res.statusCode);
    span.set(ATTR.urlPath, ctx?.pathname ?? pathOnly(req.url ?? '').slice(0, 1024));
    span.set(ATTR.cache, served.outcome);
    span.set(ATTR.upstream, ctx?.upstream.cfg.name);
    span.set(ATTR.consumer, ctx?.cred.kind === 'pool' ? ctx.cred.consumer : undefined);
    span.set(ATTR.token, served.token);
    span.set(ATTR.requestId, id);
    if (!res.writableFinished) span.set('etagere.aborted', true);
    if (res.statusCode >= 500) span.fail(`status ${res.statusCode}`);
  }
  span.end();
}
