import type { Counter, Gauge, Histogram } from 'prom-client';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { LabelSets } from '../../src/platform/metrics/labels.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { METRIC_SPECS } from '../../src/platform/metrics/specs.js';

const specs = Object.values(METRIC_SPECS);

describe('metric spec table', () => {
  it('declares each metric name once', () => {
    const names = specs.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('follows Prometheus naming: counters end in _total, histograms in _seconds, all under etagere_', () => {
    for (const spec of specs) {
      expect(spec.name).toMatch(/^etagere_[a-z0-9_]+$/);
      if (spec.type === 'counter') expect(spec.name).toMatch(/_total$/);
      if (spec.type === 'histogram') expect(spec.name).toMatch(/_seconds$/);
      if (spec.type === 'gauge') expect(spec.name).not.toMatch(/_total$/);
    }
  });

  it('is what the registry exports, in table order, with the declared type and help', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const exported = await metrics.registry.getMetricsAsJSON();
    expect(exported.map((m) => [m.name, m.type, m.help])).toEqual(specs.map((s) => [s.name, s.type, s.help]));
  });
});

describe('metrics', () => {
  it('type each metric other modules observe by its labels from the table', () => {
    const metrics = createMetrics({ defaultMetrics: false });
    expectTypeOf(metrics.tokenEvents).toEqualTypeOf<Counter<'token' | 'event'>>();
    expectTypeOf(metrics.redisOps).toEqualTypeOf<Counter<'op' | 'result'>>();
    expectTypeOf(metrics.redisLatency).toEqualTypeOf<Histogram<'op'>>();
    expectTypeOf(metrics.cacheEvictions).toEqualTypeOf<Counter>();
    expectTypeOf(metrics.queueWait).toEqualTypeOf<Histogram>();
    expectTypeOf(metrics.redisUp).toEqualTypeOf<Gauge>();
    expect(Object.keys(metrics)).not.toContain('requests');
  });

  it('read the pool and cache gauges from sources registered after the metrics were built', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    expect(await metrics.registry.metrics()).toContain('etagere_cache_entries{tier="l1"} 0');
    metrics.watchCache({ l1Entries: () => 7, l1Bytes: () => 1234, waiters: () => 2 });
    metrics.watchPool({
      tokens: () => [{ name: 'alice', state: 'ok', limit: 5000, remaining: 42, reset: null, in_flight: 1 }],
      queueLength: () => 3,
    });
    const text = await metrics.registry.metrics();
    expect(text).toContain('etagere_cache_entries{tier="l1"} 7');
    expect(text).toContain('etagere_coalesced_waiters 2');
    expect(text).toContain('etagere_token_remaining{token="alice"} 42');
    expect(text).toContain('etagere_token_state{token="alice",state="ok"} 1');
    expect(text).toContain('etagere_pool_queue_length 3');
    expect(text).not.toContain('etagere_token_reset_timestamp_seconds{');
  });

  it('count quota saved by the quota-saved rule, per upstream', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.observeRequest('github', '/user', 'GET', 200, 'hit', 0.001, false);
    metrics.observeRequest('github', '/user', 'GET', 304, 'revalidated', 0.01, true);
    metrics.observeRequest('github', '/user', 'GET', 304, 'revalidated', 0.01, false);
    metrics.observeRequest('github', '/user', 'GET', 200, 'miss', 0.01, true);
    const text = await metrics.registry.metrics();
    expect(text).toContain('etagere_quota_saved_total{upstream="github"} 2');
    expect(text).toContain('etagere_requests_total{upstream="github",route="/user",method="GET",status="304"} 2');
    expect(metrics.recent.summary()).toMatchObject({ requests: 4, saved: 2, hits: 1 });
  });
});

describe('label sets', () => {
  it('make a label set once and return the same value after', () => {
    const made: string[][] = [];
    const sets = new LabelSets((...values) => {
      made.push(values);
      return { values };
    });
    const first = sets.of('github', '/user');
    expect(sets.of('github', '/user')).toBe(first);
    expect(sets.of('github', '/users/:username')).not.toBe(first);
    expect(made).toEqual([
      ['github', '/user'],
      ['github', '/users/:username'],
    ]);
    expect([...sets.values()]).toHaveLength(2);
  });

  it('keep label sets apart that share a prefix of values, and list values in first-seen order', () => {
    const sets = new LabelSets((...values) => values.join('/'));
    const order = [
      ['github', '/user', 'GET', '200'],
      ['github', '/user', 'GET', '304'],
      ['github', '/user', 'HEAD', '200'],
      ['ghes', '/user', 'GET', '200'],
    ];
    for (const values of order) expect(sets.of(...values)).toBe(values.join('/'));
    expect(sets.of('github', '/user', 'GET', '200')).toBe('github//user/GET/200');
    expect([...sets.values()]).toEqual(order.map((values) => values.join('/')));
  });

  it('hold one value for a metric without labels, and treat an empty label value as a value', () => {
    let made = 0;
    const none = new LabelSets(() => ++made);
    expect(none.of()).toBe(1);
    expect(none.of()).toBe(1);
    const sets = new LabelSets((...values) => values.join('|'));
    expect(sets.of('github', '')).toBe('github|');
    expect(sets.of('github', 'x')).toBe('github|x');
    expect([...sets.values()]).toEqual(['github|', 'github|x']);
  });

  it('keep label sets apart whose joined values would collide with a plain separator', () => {
    const sets = new LabelSets((...values) => values.join('|'));
    expect(sets.of('a b', 'c')).not.toBe(sets.of('a', 'b c'));
  });
});
