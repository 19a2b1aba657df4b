import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CellCounter, CellHistogram } from '../../src/platform/metrics/cells.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVATIONS: Array<[string, string, number]> = [
  ['github', '/repos/:owner/:repo', 0.0004],
  ['github', '/repos/:owner/:repo', 0.001], // on a bound: counted in that bucket (le is inclusive)
  ['github', '/repos/:owner/:repo', 0.05],
  ['github', 'other', 3], // above every bound: only +Inf
  ['cyclists', '/counts/:city', 0.02],
];

/** The same observations through prom-client's own classes and through the cell classes. */
function both(): { reference: Registry; cells: Registry } {
  const reference = new Registry();
  const cells = new Registry();
  const refCount = new Counter({ name: 't_requests_total', help: 'h', labelNames: ['upstream', 'route'] as const, registers: [reference] });
  const refHist = new Histogram({
    name: 't_duration_seconds',
    help: 'h',
    labelNames: ['upstream', 'route'] as const,
    buckets: BUCKETS,
    registers: [reference],
  });
  const cellCount = new CellCounter({
    name: 't_requests_total',
    help: 'h',
    labelNames: ['upstream', 'route'] as const,
    registers: [cells],
  });
  const cellHist = new CellHistogram({
    name: 't_duration_seconds',
    help: 'h',
    labelNames: ['upstream', 'route'] as const,
    buckets: BUCKETS,
    registers: [cells],
  });
  for (const [upstream, route, seconds] of OBSERVATIONS) {
    refCount.labels(upstream, route).inc();
    refHist.labels(upstream, route).observe(seconds);
    cellCount.cell(upstream, route).value++;
    cellHist.cell(upstream, route).observe(seconds);
  }
  return { reference, cells };
}

describe('metric cells', () => {
  it('export the same text as prom-client counters and histograms fed the same observations', async () => {
    const { reference, cells } = both();
    const text = await cells.metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('t_duration_seconds_bucket{le="0.001",upstream="github",route="/repos/:owner/:repo"} 2');
    expect(text).toContain('t_duration_seconds_bucket{le="+Inf",upstream="github",route="other"} 1');
  });

  it('aggregate over cluster workers like prom-client metrics', async () => {
    const first = both();
    const second = both();
    const ref = AggregatorRegistry.aggregate([await first.reference.getMetricsAsJSON(), await second.reference.getMetricsAsJSON()]);
    const cells = AggregatorRegistry.aggregate([await first.cells.getMetricsAsJSON(), await second.cells.getMetricsAsJSON()]);
    expect(await cells.metrics()).toBe(await ref.metrics());
    expect(await cells.metrics()).toContain('t_requests_total{upstream="github",route="/repos/:owner/:repo"} 6');
  });

  it('reset to zero but keep their label sets (as a resolved cell stays in use)', async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'r_total', help: 'h', labelNames: ['x'] as const, registers: [registry] });
    const cell = counter.cell('a');
    cell.value += 3;
    registry.resetMetrics();
    cell.value++;
    expect(await registry.metrics()).toContain('r_total{x="a"} 1');
  });
});
