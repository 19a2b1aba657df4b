/**
 * The per-request metrics are one table, one cell per request label set, and the four request
 * series (requests, duration, cache outcomes, quota saved) are views of it: they must export
 * exactly what four prom-client metrics fed request by request would.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { savedQuota } from '../../src/platform/metrics/quota-windows.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { METRIC_SPECS } from '../../src/platform/metrics/specs.js';

type Observation = [
  upstream: string,
  route: string,
  method: string,
  status: number,
  outcome: string | undefined,
  seconds: number,
  authorized: boolean,
];

const OBSERVATIONS: Observation[] = [
  ['github', '/repos/{owner}/{repo}', 'GET', 200, 'hit', 0.0004, false],
  ['github', '/repos/{owner}/{repo}', 'GET', 200, 'hit', 0.0005, true],
  ['github', '/repos/{owner}/{repo}', 'HEAD', 200, 'hit', 0.002, false],
  ['github', '/repos/{owner}/{repo}', 'GET', 304, 'revalidated', 0.03, true],
  ['github', '/repos/{owner}/{repo}', 'GET', 200, 'revalidated', 0.04, false],
  ['github', '/users/{username}', 'GET', 200, 'miss', 0.2, false],
  ['github', '/users/{username}', 'GET', 502, 'error', 12, false],
  ['github', '-', 'GET', 404, undefined, 0.0001, false],
  ['cyclists', '/counts', 'GET', 200, 'stale', 0.001, false],
];

/** The text of the four request metrics, as the registry renders them. */
async function textOf(registry: Registry): Promise<string> {
  const names: ReadonlySet<string> = new Set([
    METRIC_SPECS.requests.name,
    METRIC_SPECS.requestDuration.name,
    METRIC_SPECS.cacheOutcomes.name,
    METRIC_SPECS.quotaSaved.name,
  ]);
  const parts: string[] = [];
  for (const metric of registry.getMetricsAsArray())
    if (names.has(metric.name)) parts.push(await registry.getSingleMetricAsString(metric.name));
  return parts.sort().join('\n');
}

describe('the per-request metric table', () => {
  it('exports the same text as four prom-client metrics fed the same requests', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const reference = new Registry();
    const { requests, requestDuration, cacheOutcomes, quotaSaved } = METRIC_SPECS;
    const counter = (spec: { name: string; help: string; labelNames: readonly string[] }) =>
      new Counter({ name: spec.name, help: spec.help, labelNames: [...spec.labelNames], registers: [reference] });
    const refRequests = counter(requests);
    const refOutcomes = counter(cacheOutcomes);
    const refSaved = counter(quotaSaved);
    const refDuration = new Histogram({
      name: requestDuration.name,
      help: requestDuration.help,
      labelNames: [...requestDuration.labelNames],
      buckets: [...requestDuration.buckets],
      registers: [reference],
    });
    for (const [upstream, route, method, status, outcome, seconds, authorized] of OBSERVATIONS) {
      metrics.observeRequest(upstream, route, method, status, outcome, seconds, authorized);
      refRequests.labels(upstream, route, method, String(status)).inc();
      refDuration.labels(upstream, route).observe(seconds);
      if (outcome !== undefined) {
        refOutcomes.labels(upstream, route, outcome).inc();
        refSaved.labels(upstream).inc(savedQuota(outcome, authorized) ? 1 : 0);
      }
    }
    // A cell kept and fed directly (a stored form's hits) counts the same.
    const cell = metrics.requestCell('github', '/repos/{owner}/{repo}', 'GET', 200, 'hit', false);
    metrics.observeCell(cell, 0.0007);
    refRequests.labels('github', '/repos/{owner}/{repo}', 'GET', '200').inc();
    refDuration.labels('github', '/repos/{owner}/{repo}').observe(0.0007);
    refOutcomes.labels('github', '/repos/{owner}/{repo}', 'hit').inc();
    refSaved.labels('github').inc();
    expect(await textOf(metrics.registry)).toBe(await textOf(reference));
    expect(metrics.recent.summary()).toMatchObject({ requests: OBSERVATIONS.length + 1, hits: 4 });
  });
});
