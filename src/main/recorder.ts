/**
 * What a request leaves behind once answered: one access line, the request metrics and its server
 * span, written from what the path served (at once for a hit, else when the response closes).
 *
 * A stored form's hits differ only in id, time, duration and bytes: what they share (the route
 * label, the metrics cell, the busiest-paths counts, the access line's template) is resolved once
 * per form and kept beside it (`HitRecord`), so recording a hit is a few additions and one line.
 * `log.access` says which requests get a line: all, misses (every request but a fresh hit), or
 * sampled (misses, and one hit in 1 / `log.access_ratio`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type FormReply, type Representation, type Served, NOT_SERVED } from '../http/reply.js';
import { apiPathname } from '../http/route.js';
import type { RequestContext } from '../paths/context.js';
import type { UpstreamRuntime } from '../paths/upstreams.js';
import type { AccessLog } from '../platform/log/logger.js';
import type { CountCell } from '../platform/metrics/cells.js';
import { type ConsumerLabels, LabelSets } from '../platform/metrics/labels.js';
import { upstreamSpend, NO_CONSUMER, type PathCounts } from '../platform/metrics/quota-windows.js';
import type { Metrics } from '../platform/metrics/registry.js';
import type { RequestCell } from '../platform/metrics/request-metrics.js';
import { ATTR, pathOnly, serverSpanName, type RequestSpan } from '../platform/trace/tracing.js';

/** Which requests get an access line (`log.access`). */
export interface AccessChoice {
  readonly access: 'all' | 'misses' | 'sampled';
  /** The share of hits logged under `sampled`. */
  readonly access_ratio: number;
}

/**
 * What the recorder reads of a request: the routed request (if any), its route label (matched on
 * first use: a hit takes its form's), what the path served, its User-Agent and its server span.
 */
export class Trace {
  ctx: Pick<RequestContext, 'upstream' | 'cred' | 'pathname'> | undefined = undefined;
  served: Served | Promise<Served> = NOT_SERVED;
  #upstream: UpstreamRuntime | undefined = undefined;
  #pathname = '';
  #route: string | undefined = undefined;

  constructor(
    /** The User-Agent, read only when metrics.consumer_label is user_agent (before any header is dropped). */
    readonly agent: string | undefined,
    /** The request's server span, when tracing is on (src/platform/trace/). */
    public span: RequestSpan | undefined,
  ) {}

  /** The request was routed to `upstream` (its client path `pathname`): its route label is that path's template. */
  routed(upstream: UpstreamRuntime, pathname: string): void {
    this.#upstream = upstream;
    this.#pathname = pathname;
  }

  /** The route template of the request's path, for metric labels ('-' when it was not routed). */
  get route(): string {
    const upstream = this.#upstream;
    if (upstream === undefined) return '-';
    return (this.#route ??= upstream.routes.match(apiPathname(upstream.cfg, this.#pathname)));
  }
}

/** What a stored form's hits share, for one upstream, method, URL, status and credential kind. */
interface HitRecord {
  readonly upstream: UpstreamRuntime;
  readonly method: string;
  readonly url: string;
  readonly status: number;
  readonly authorized: boolean;
  readonly route: string;
  readonly cell: RequestCell;
  /** The access line's fields from method to cache (logger.ts `template`), when lines go to pino's destination. */
  readonly template: string | undefined;
  /** The busiest-paths counts of its path, while the table's generation is `generation`. */
  readonly top: PathCounts | undefined;
  readonly generation: number;
  /** By consumer key: the last consumer seen, and its label's cells (none when it has no label). */
  consumer: { readonly consumer: string | undefined; readonly cells: ConsumerCells | undefined } | undefined;
}

interface ConsumerCells {
  readonly requests: CountCell;
  readonly hits: CountCell;
  readonly upstream: CountCell;
}

export class Recorder {
  readonly #metrics: Metrics;
  readonly #access: AccessLog;
  readonly #labels: ConsumerLabels;
  readonly #choice: AccessChoice;
  /** Per consumer and route, its counter cells (consumer labels and route templates are bounded); hits and upstream made on first use. */
  readonly #consumers: LabelSets<ConsumerCells>;
  readonly #hits = new WeakMap<Representation, HitRecord>();
  /** Under `sampled`: the share of a hit line owed so far (one is written each time it reaches 1). */
  #owed = 0;
  /** The consumer labels' generation last seen: labels given up since then lose their series (labels.ts). */
  #labelsSeen: number;

  constructor(metrics: Metrics, access: AccessLog, labels: ConsumerLabels, choice: AccessChoice) {
    this.#metrics = metrics;
    this.#access = access;
    this.#labels = labels;
    this.#choice = choice;
    this.#labelsSeen = labels.generation;
    this.#consumers = new LabelSets((name, route) => {
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
  }

  /** One request's line and metrics, from what the path served: now, or once a path still at work has finished with it. */
  record(req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, started: number, bytes: number): void {
    const seconds = (performance.now() - started) / 1e3;
    const { served } = trace;
    // A client that leaves before its answer is ready: logged once the path has finished with it.
    if (served instanceof Promise)
      served.then(
        (done) => this.#write(req, res, id, trace, done, seconds, bytes),
        () => this.#write(req, res, id, trace, NOT_SERVED, seconds, bytes),
      );
    else if (served.outcome === 'hit' && (served as Partial<FormReply>).form !== undefined && trace.ctx !== undefined)
      this.#hit(req, res, id, trace, served as FormReply, seconds, bytes);
    else this.#write(req, res, id, trace, served, seconds, bytes);
  }

  /** Hands the access lines waiting to the log (shutdown). */
  flush(): void {
    this.#access.flush();
  }

  /** Whether a request with this outcome gets an access line (`log.access`). */
  #logs(outcome: string | undefined): boolean {
    const { access } = this.#choice;
    if (access === 'all' || outcome !== 'hit') return true;
    if (access === 'misses') return false;
    this.#owed += this.#choice.access_ratio;
    if (this.#owed < 1) return false;
    this.#owed -= 1;
    return true;
  }

  /** A stored form's hit: its record's cells, counts and template. */
  #hit(req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, reply: FormReply, seconds: number, bytes: number): void {
    const ctx = trace.ctx!;
    const record = this.#recordOf(req, res, trace, reply.form);
    this.#metrics.observeCell(record.cell, seconds);
    if (record.top !== undefined && record.generation === this.#metrics.topPaths.generation) record.top.hits++;
    else this.#metrics.topPaths.served(ctx.upstream.cfg.name, ctx.pathname, 'hit', record.authorized);
    const cells = this.#consumerCells(record, ctx.cred.kind === 'pool' ? ctx.cred.consumer : undefined, trace.agent);
    if (cells !== undefined) {
      cells.requests.value++;
      cells.hits.value++;
    }
    const { span } = trace;
    if (record.template !== undefined && this.#logs('hit')) {
      const sampled = span?.sampled === true;
      this.#access.writeFrom(record.template, {
        reqId: id,
        durationMs: Math.round(seconds * 1e6) / 1e3,
        bytes,
        aborted: !res.writableFinished,
        traceId: sampled ? span.traceId : undefined,
        spanId: sampled ? span.spanId : undefined,
      });
    } else if (record.template === undefined) this.#line(req, res, id, trace, reply, seconds, bytes, record.route);
    // An unsampled span records nothing: its end is skipped too.
    if (span?.sampled === true) endServerSpan(span, req, res, id, trace, reply);
  }

  /**
   * A hit's consumer cells. By key, the same consumer as the form's last hit has the same cells
   * (kept on its record); by User-Agent every request counts for its agent's rank, so the label is
   * asked each time, and labels given up lose their series.
   */
  #consumerCells(record: HitRecord, consumer: string | undefined, agent: string | undefined): ConsumerCells | undefined {
    const labels = this.#labels;
    if (labels.mode === 'none') return undefined;
    if (labels.mode === 'key') {
      let known = record.consumer;
      if (known === undefined || known.consumer !== consumer) {
        const label = labels.of(consumer, agent);
        record.consumer = known = { consumer, cells: label === undefined ? undefined : this.#consumers.of(label, record.route) };
      }
      return known.cells;
    }
    const label = labels.of(consumer, agent);
    if (labels.generation !== this.#labelsSeen) this.#forgetRetired();
    return label === undefined ? undefined : this.#consumers.of(label, record.route);
  }

  /** Labels given up (metrics.consumer_label user_agent: labels.ts): their series and cells go. */
  #forgetRetired(): void {
    const metrics = this.#metrics;
    this.#labelsSeen = this.#labels.generation;
    for (const gone of this.#labels.retired()) {
      this.#consumers.drop(gone);
      for (const counter of [metrics.consumerRequests, metrics.consumerHits, metrics.consumerUpstreamRequests]) counter.forget(gone);
    }
  }

  /** The form's record for this request, made again when what it was made for differs. */
  #recordOf(req: IncomingMessage, res: ServerResponse, trace: Trace, form: Representation): HitRecord {
    const ctx = trace.ctx!;
    const method = req.method ?? '-';
    const url = req.url ?? '';
    const status = res.statusCode;
    const authorized = ctx.cred.kind !== 'anonymous';
    const known = this.#hits.get(form);
    if (
      known !== undefined &&
      known.upstream === ctx.upstream &&
      known.method === method &&
      known.url === url &&
      known.status === status &&
      known.authorized === authorized
    )
      return known;
    const upstream = ctx.upstream.cfg.name;
    const route = trace.route;
    const { topPaths } = this.#metrics;
    const record: HitRecord = {
      upstream: ctx.upstream,
      method,
      url,
      status,
      authorized,
      route,
      cell: this.#metrics.requestCell(upstream, route, method, status, 'hit', authorized),
      template: this.#access.direct ? this.#access.template({ method, path: url, upstream, route, status, cache: 'hit' }) : undefined,
      top: topPaths.countsOf(upstream, ctx.pathname),
      generation: topPaths.generation,
      consumer: undefined,
    };
    this.#hits.set(form, record);
    return record;
  }

  /** Any other request: its cells looked up, its line assembled from its fields. */
  #write(req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, served: Served, seconds: number, bytes: number): void {
    const { ctx } = trace;
    const route = trace.route;
    const upstreamName = ctx?.upstream.cfg.name ?? '-';
    const authorized = ctx !== undefined && ctx.cred.kind !== 'anonymous';
    this.#metrics.observeRequest(upstreamName, route, req.method ?? '-', res.statusCode, served.outcome, seconds, authorized);
    if (ctx !== undefined) {
      this.#metrics.topPaths.served(upstreamName, ctx.pathname, served.outcome, authorized);
      const spend = upstreamSpend(served.outcome, served.upstreamStatus, authorized);
      const label = this.#labels.of(ctx.cred.kind === 'pool' ? ctx.cred.consumer : undefined, trace.agent);
      if (this.#labels.generation !== this.#labelsSeen) this.#forgetRetired();
      if (label !== undefined) {
        const cells = this.#consumers.of(label, route);
        cells.requests.value++;
        if (served.outcome === 'hit') cells.hits.value++;
        if (spend !== 'none') cells.upstream.value++;
      }
      if (spend !== 'none') this.#metrics.quota.record(label ?? NO_CONSUMER, upstreamName, route, spend === 'billable');
    }
    this.#line(req, res, id, trace, served, seconds, bytes, route);
    if (trace.span?.sampled === true) endServerSpan(trace.span, req, res, id, trace, served);
  }

  /** The access line of a request from its fields (when `log.access` gives it one). */
  #line(
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    trace: Trace,
    served: Served,
    seconds: number,
    bytes: number,
    route: string,
  ) {
    if (!this.#logs(served.outcome)) return;
    const sampled = trace.span?.sampled === true;
    this.#access.write({
      reqId: id,
      method: req.method ?? '-',
      path: req.url ?? '',
      upstream: trace.ctx?.upstream.cfg.name ?? '-',
      route,
      status: res.statusCode,
      cache: served.outcome,
      upstreamStatus: served.upstreamStatus,
      token: served.token,
      durationMs: Math.round(seconds * 1e6) / 1e3,
      bytes,
      aborted: !res.writableFinished,
      traceId: sampled ? trace.span!.traceId : undefined,
      spanId: sampled ? trace.span!.spanId : undefined,
    });
  }
}

/** A sampled server span's name and attributes, from what was served: names of the consumer and token, never a credential. */
function endServerSpan(span: RequestSpan, req: IncomingMessage, res: ServerResponse, id: string, trace: Trace, served: Served): void {
  const { ctx } = trace;
  const route = trace.route;
  span.rename(serverSpanName(req.method ?? '-', route));
  if (route !== '-') span.set(ATTR.route, route);
  span.set(ATTR.status, res.statusCode);
  span.set(ATTR.urlPath, ctx?.pathname ?? pathOnly(req.url ?? '').slice(0, 1024));
  span.set(ATTR.cache, served.outcome);
  span.set(ATTR.upstream, ctx?.upstream.cfg.name);
  span.set(ATTR.consumer, ctx?.cred.kind === 'pool' ? ctx.cred.consumer : undefined);
  span.set(ATTR.token, served.token);
  span.set(ATTR.requestId, id);
  if (!res.writableFinished) span.set('etagere.aborted', true);
  if (res.statusCode >= 500) span.fail(`status ${res.statusCode}`);
  span.end();
}
