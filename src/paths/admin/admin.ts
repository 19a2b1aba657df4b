/**
 * The admin listener (its own port, loopback by default): / (the status page), /healthz,
 * /readyz, /metrics, /admin/status (what the status page shows), /admin/tokens (each pool
 * token's name, numbers, state, last error and reported scopes, and whether the pool is served as
 * equivalent), /admin/consumers (each consumer's share and
 * figures, by name), /admin/quota (who spent the quota on what: admin-quota.ts), and the cache's
 * purge, inspection and stats (admin-cache.ts).
 * Nothing here ever prints a token. With admin.token, every path but /, /healthz, /readyz and
 * /metrics needs it (headers/admin-token.ts: 401 otherwise). It answers only to a loopback Host (127.0.0.1, localhost,
 * [::1]), one of admin.allowed_hosts, or the address the connection arrived on: a page elsewhere
 * that rebinds its own name to this address (DNS rebinding) gets a 403, never the metrics or the
 * token report. A write (any method but GET, HEAD, OPTIONS) must be JSON and come from no other
 * origin (headers/admin-write.ts): a page in the operator's browser cannot purge.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { RecentSummary } from '../../platform/metrics/request-metrics.js';
import { adminWriteRefusal, isAdminWrite } from '../../http/headers/admin-write.js';
import { adminTokenRefusal, adminTokenRule, type AdminTokenRule } from '../../http/headers/admin-token.js';
import { adminHostAllowed } from '../../platform/host.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { DOCUMENTATION_URL } from '../../http/errors.js';
import type { ConsumersReport } from '../../pool/consumers/consumer-budget.js';
import { equivalenceReport, type EquivalenceReport, type ScopesRow } from '../../pool/rules/scopes.js';
import { consumersAnswer } from './admin-consumers.js';
import type { ConsumerLabelMode } from '../../platform/metrics/labels.js';
import type { QuotaReport, QuotaWindow } from '../../platform/metrics/quota-windows.js';
import { QUOTA_TOP, STATUS_TOP, quotaQuery, type QuotaAnswer } from './admin-quota.js';
import { readCacheCall, servesCacheAdmin, writeAnswer, type Answer, type CacheCall } from './admin-cache.js';
import { STATUS_PAGE } from './status-page.js';

export interface AdminState {
  /** False while starting and once draining for shutdown. */
  ready(): boolean;
  /** The pool tokens' state, by name (never values); undefined without a pool. */
  tokens?(): ScopesRow[] | undefined;
  /** `pool.equivalent` as configured: what the tokens' reported scopes are checked against. */
  equivalentConfigured?: boolean;
  /** The fair share between consumers, by name (never keys); undefined when consumer keys are off. */
  consumers?(): ConsumersReport | undefined;
  /** Where the pool's budget lives (shared through Redis, or local). */
  budget?(): { shared: boolean; replicas: number } | undefined;
  /** Redis: configured, and connected with its breaker closed. */
  redis?(): { configured: boolean; up: boolean };
  /** The /metrics text when not this process's registry alone (a cluster primary aggregates its workers). */
  metricsText?(): Promise<string>;
  /** Recent activity when not this process's alone (a cluster primary sums its workers). */
  recent?(): RecentSummary;
  /** metrics.consumer_label as it applies (default: none). */
  consumerLabel?: ConsumerLabelMode;
  /** /admin/quota's window when not this process's alone (a cluster primary sums its workers'). */
  quota?(window: QuotaWindow, top: number): Promise<QuotaReport>;
  /** admin.allowed_hosts: Host names answered besides the loopback ones. */
  allowedHosts?: readonly string[];
  /** admin.token: every path but /, /healthz, /readyz and /metrics needs it as `Authorization: Bearer`; null: open. */
  token?: string | null;
  /** /admin/purge, /admin/cache, /admin/cache/stats (admin-cache.ts): this process's cache, or a cluster primary's workers'. */
  cache?(call: CacheCall): Promise<Answer>;
}

/** A JSON answer once its value is ready (a 500 that says why if it fails). */
function later<T>(res: ServerResponse, value: Promise<T>, write: (ready: T) => void = (ready) => json(res, 200, ready)): void {
  value.then(write, (err: unknown) => json(res, 500, { message: `admin answer failed: ${(err as Error).message}` }));
}

function json(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(body);
}

/** Whether the pool is served as equivalent now, and why not (the tokens' scopes: src/pool/rules/scopes.ts). */
function equivalence(state: AdminState, tokens: readonly ScopesRow[] | undefined): EquivalenceReport | null {
  return tokens === undefined ? null : equivalenceReport(state.equivalentConfigured ?? true, tokens);
}

/**
 * Answers a request the admin port refuses, in this order: a Host it does not answer to (403), a
 * missing or wrong admin token (401), a write a web page could have sent (403/415). True when it did.
 */
function refused(req: IncomingMessage, res: ServerResponse, allowed: ReadonlySet<string>, tokenRule: AdminTokenRule | undefined): boolean {
  if (!adminHostAllowed(req.headers.host, allowed, req.socket.localAddress)) {
    json(res, 403, { message: 'Host not allowed: the admin port answers to 127.0.0.1, localhost, [::1] and admin.allowed_hosts' });
    return true;
  }
  const denied = adminTokenRefusal(tokenRule, req.url ?? '/', req.headers.authorization);
  if (denied !== undefined) {
    for (const [name, value] of Object.entries(denied.headers)) res.setHeader(name, value);
    json(res, denied.status, { message: denied.message, documentation_url: DOCUMENTATION_URL });
    return true;
  }
  const refusal = isAdminWrite(req.method) ? adminWriteRefusal(req.headers) : undefined;
  if (refusal === undefined) return false;
  json(res, refusal.status, { message: refusal.message, documentation_url: DOCUMENTATION_URL });
  return true;
}

export function createAdminServer(metrics: Metrics, state: AdminState): Server {
  const allowed = new Set((state.allowedHosts ?? []).map((name) => name.toLowerCase()));
  const tokenRule = adminTokenRule(state.token);
  const quota = async (window: QuotaWindow, top: number): Promise<QuotaAnswer> => ({
    consumer_label: state.consumerLabel ?? 'none',
    ...(await (state.quota?.(window, top) ?? Promise.resolve(metrics.quota.report(window, top)))),
  });
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    if (refused(req, res, allowed, tokenRule)) return;
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const cache = state.cache;
    if (servesCacheAdmin(path) && cache !== undefined) {
      const answer = readCacheCall(req, path).then((call) => ('kind' in call ? cache(call) : call));
      later(res, answer, (ready) => writeAnswer(res, ready, req.method === 'HEAD'));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      json(res, 405, { message: 'Method not allowed' });
      return;
    }
    switch (path) {
      case '/healthz':
        json(res, 200, { status: 'ok' });
        return;
      case '/readyz':
        if (state.ready()) json(res, 200, { status: 'ready' });
        else json(res, 503, { status: 'not ready' });
        return;
      case '/metrics':
        (state.metricsText?.() ?? metrics.registry.metrics()).then(
          (text) => {
            res.writeHead(200, { 'content-type': metrics.registry.contentType });
            res.end(text);
          },
          (err: unknown) => json(res, 500, { message: `metrics failed: ${(err as Error).message}` }),
        );
        return;
      case '/': {
        const body = Buffer.from(STATUS_PAGE);
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'content-length': body.length,
          'cache-control': 'no-store',
          'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
          'x-content-type-options': 'nosniff',
        });
        res.end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      case '/admin/status': {
        const budget = state.budget?.();
        const tokens = state.tokens?.();
        const status = {
          time: Date.now(),
          ready: state.ready(),
          recent: state.recent?.() ?? metrics.recent.summary(),
          redis: state.redis?.() ?? { configured: false, up: false },
          budget: budget === undefined ? null : budget.shared ? 'shared' : 'local',
          replicas: budget?.replicas ?? 1,
          tokens: tokens ?? [],
          equivalence: equivalence(state, tokens),
        };
        later(
          res,
          Promise.all([consumersAnswer(metrics, state.consumers?.()), quota('1h', STATUS_TOP)]).then(([answer, spent]) => ({
            ...status,
            consumers: answer.consumers,
            quota: spent,
          })),
        );
        return;
      }
      case '/admin/consumers':
        later(res, consumersAnswer(metrics, state.consumers?.()));
        return;
      case '/admin/quota': {
        const query = quotaQuery(req.url ?? '');
        if (query.ok) later(res, quota(query.window, QUOTA_TOP));
        else json(res, query.status, { message: query.message, documentation_url: query.documentation_url });
        return;
      }
      case '/admin/tokens': {
        const tokens = state.tokens?.();
        const budget = state.budget?.();
        json(res, 200, {
          pool: tokens !== undefined,
          budget: budget === undefined ? null : budget.shared ? 'shared' : 'local',
          replicas: budget?.replicas ?? 1,
          ...equivalence(state, tokens),
          tokens: tokens ?? [],
        });
        return;
      }
      default:
        json(res, 404, {
          message: 'Not Found',
          endpoints: [
            '/',
            '/healthz',
            '/readyz',
            '/metrics',
            '/admin/status',
            '/admin/tokens',
            '/admin/consumers',
            '/admin/quota',
            ...(state.cache === undefined ? [] : ['/admin/purge', '/admin/cache', '/admin/cache/stats']),
          ],
        });
    }
  });
}
