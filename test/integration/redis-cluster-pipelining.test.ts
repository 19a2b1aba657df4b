/**
 * On a Redis Cluster, ioredis groups auto-pipelined commands by the slot of their first key, which
 * for a defined script is taken to be its first argument. The scripts defined without a fixed
 * number of keys (first argument: that number) used to land in another slot's pipeline, which then
 * failed as a whole: an L2 lookup issued in the same tick as a pool read answered "skipped" (Redis
 * unavailable), the request went on without the cross-replica lock, and two replicas both fetched
 * (the Cluster test of redis-l2.test.ts failed about one run in three).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOT_KEY_FIRST, type RedisConnection } from '../../src/platform/redis/connection.js';
import { connectProxyRedis, startRedisCluster, type TestRedisCluster } from '../helpers/redis.js';

describe('Redis Cluster with auto-pipelining', () => {
  let cluster: TestRedisCluster;
  let conn: RedisConnection;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    // Timeouts of 2 s: a failed batch answers at once (the bug this is about), while a loaded CI
    // machine can take longer than the default 20 ms lookup budget, which also answers undefined.
    conn = await connectProxyRedis({
      cluster: cluster.nodes.map((node) => `${node.host}:${node.port}`),
      key_prefix: 'pipelining:',
      lookup_timeout_ms: 2000,
      command_timeout_ms: 2000,
    });
  }, 60_000);

  afterAll(async () => {
    await conn?.close();
    await cluster?.stop();
  });

  it('a script whose first argument is the key count never fails the reads sent in the same tick', async () => {
    // The name matters to ioredis, not the script: take one the product defines without a fixed key count.
    const name = NOT_KEY_FIRST.find((command) => command.startsWith('etagere'))!;
    conn.client.defineCommand(name, { lua: "return redis.call('exists', KEYS[1])" });
    const call = (key: string) => (conn.client as unknown as Record<string, (...args: unknown[]) => Promise<number>>)[name]!(1, key);
    for (let round = 0; round < 20; round++) {
      // Keys of many slots (so of every node), read in the same tick as scripts on other keys.
      const keys = Array.from({ length: 12 }, (_, index) => `pipelining:{k${round}-${index}}:e`);
      const answers = await Promise.all([
        ...keys.map((key) => conn.run('get', (client) => client.get(key).then((value) => value ?? 'none'))),
        ...keys.map((key) => conn.run('read', () => call(`${key}:lock`))),
      ]);
      expect(answers.filter((answer) => answer === undefined)).toEqual([]);
    }
  });

  it('every script the product defines without a fixed key count is sent outside auto-pipelines', () => {
    for (const file of ['src/pool/backends/shared-pool.ts', 'src/pool/consumers/consumer-ledger.ts']) {
      const source = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
      for (const match of source.matchAll(/defineCommand\('(\w+)', \{ lua: /g))
        expect(NOT_KEY_FIRST, `${file}: ${match[1]}`).toContain(match[1]);
    }
  });
});
