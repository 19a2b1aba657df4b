/**
 * What /admin/consumers (and the status page's consumer table) shows: each consumer by name, its
 * weight and caps, its standing in the current windows (share, reserve, spent, what it could spend
 * now) from the fair-share budget, and its counters: requests, hits, upstream requests, quota
 * spent and refusals, read from the same metrics /metrics exports; an OIDC row says which of
 * these it counts (`oidc`). Names only, never a key.
 */
import type { Metrics } from '../../platform/metrics/registry.js';
import type { ConsumersReport, ConsumerStanding } from '../../pool/consumers/consumer-budget.js';
import { UNKNOWN_CONSUMER } from '../../pool/consumers/gate.js';

/**
 * What an OIDC row counts: `requests by name` (one token name's requests and hits; its quota is
 * spent from its issuer's row), `quota by issuer` (the share and quota of every name the issuer's
 * tokens carry). null: a consumer key, which counts both.
 */
export type OidcCounts = 'requests by name' | 'quota by issuer' | null;

export interface ConsumerFigures extends Partial<ConsumerStanding> {
  name: string;
  oidc: OidcCounts;
  requests: number;
  hits: number;
  upstream_requests: number;
  quota_spent: number;
  refused: Record<string, number>;
}

export interface ConsumersAnswer {
  /** Fair share on (consumer keys and a pool). */
  enabled: boolean;
  budget: ConsumersReport['budget'] | null;
  reserve_fraction: number | null;
  consumers: ConsumerFigures[];
}

interface Counted {
  get(): Promise<{ values: ReadonlyArray<{ value: number; labels: Partial<Record<string, string | number>> }> }>;
}

/** A counter's values summed by consumer (and by `by`, when given). */
async function byConsumer(counter: Counted, by?: string): Promise<Map<string, Map<string, number>>> {
  const out = new Map<string, Map<string, number>>();
  for (const { value, labels } of (await counter.get()).values) {
    const name = String(labels.consumer ?? '');
    const inner = out.get(name) ?? new Map<string, number>();
    const key = by === undefined ? '' : String(labels[by] ?? '');
    inner.set(key, (inner.get(key) ?? 0) + value);
    out.set(name, inner);
  }
  return out;
}

const total = (values: Map<string, number> | undefined): number =>
  [...(values ?? new Map<string, number>()).values()].reduce((a, b) => a + b, 0);

export async function consumersAnswer(metrics: Metrics, report: ConsumersReport | undefined): Promise<ConsumersAnswer> {
  const [requests, hits, upstream, spent, refused] = await Promise.all([
    byConsumer(metrics.consumerRequests),
    byConsumer(metrics.consumerHits),
    byConsumer(metrics.consumerUpstreamRequests),
    byConsumer(metrics.consumerQuotaSpent, 'resource'),
    byConsumer(metrics.consumerShareRejections, 'reason'),
  ]);
  const names = new Set<string>(report?.consumers.map((standing) => standing.name) ?? []);
  for (const counted of [requests, hits, upstream, spent, refused]) for (const name of counted.keys()) names.add(name);
  const standings = new Map((report?.consumers ?? []).map((standing) => [standing.name, standing]));
  const issuers = new Set(report?.oidc_issuers ?? []);
  const oidcOf = (name: string): OidcCounts =>
    issuers.has(name)
      ? 'quota by issuer'
      : issuers.size > 0 && !standings.has(name) && name !== UNKNOWN_CONSUMER
        ? 'requests by name'
        : null;
  const consumers = [...names].map((name): ConsumerFigures => ({
    ...standings.get(name),
    name,
    oidc: oidcOf(name),
    requests: total(requests.get(name)),
    hits: total(hits.get(name)),
    upstream_requests: total(upstream.get(name)),
    quota_spent: total(spent.get(name)),
    refused: Object.fromEntries(refused.get(name) ?? []),
  }));
  return {
    enabled: report !== undefined,
    budget: report?.budget ?? null,
    reserve_fraction: report?.reserve_fraction ?? null,
    consumers,
  };
}
