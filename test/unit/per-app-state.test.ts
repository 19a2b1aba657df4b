/**
 * State lives in instances: two sets of services in one process (two apps) keep tables of their
 * own: the shared header fields, the handler's memos, the request ids, and what /metrics reports.
 */
import { describe, expect, it } from 'vitest';
import { buildServices } from '../../src/main/services.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';

const servicesOf = () => {
  const metrics = createMetrics({ defaultMetrics: false });
  const services = buildServices(parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: 'http://127.0.0.1:9' }] }), {
    logger: createLogger({ level: 'silent' }),
    metrics,
  });
  return { services, metrics };
};

const sharedHeaderBytes = async (metrics: ReturnType<typeof createMetrics>): Promise<number> => {
  const gauge = (await metrics.registry.getSingleMetric('etagere_cache_bytes')!.get()).values;
  return gauge.find((value) => value.labels.tier === 'shared_headers')!.value;
};

describe('two apps in one process share no tables', () => {
  it('counts the shared header fields of each app in its own table and gauge', async () => {
    const one = servicesOf();
    const other = servicesOf();
    try {
      expect(one.services.cache.headerTable).not.toBe(other.services.cache.headerTable);
      const pair = one.services.cache.headerTable.pair('content-type', 'application/json');
      expect(one.services.cache.headerTable.pair('content-type', 'application/json')).toBe(pair);
      expect(one.services.cache.headerTable.size).toBe(1);
      expect(other.services.cache.headerTable.size).toBe(0);
      expect(await sharedHeaderBytes(one.metrics)).toBeGreaterThan(0);
      expect(await sharedHeaderBytes(other.metrics)).toBe(0);
    } finally {
      await one.services.close();
      await other.services.close();
    }
  });

  it('keeps the memos and the request ids of each app apart', async () => {
    const one = servicesOf();
    const other = servicesOf();
    try {
      one.services.memos.accessLog.set('GET', '"GET"');
      expect(other.services.memos.accessLog.get('GET')).toBeUndefined();
      expect(one.services.memos.credentials).not.toBe(other.services.memos.credentials);
      const prefix = (id: string): string => id.split('-')[0]!;
      expect(prefix(one.services.requestId(undefined))).not.toBe(prefix(other.services.requestId(undefined)));
    } finally {
      await one.services.close();
      await other.services.close();
    }
  });
});
