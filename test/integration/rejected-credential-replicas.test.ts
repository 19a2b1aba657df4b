/**
 * Across replicas (real Redis): a credential the upstream rejected on replica A
 * reads none of its entries on replica B, through the shared L2 or B's own L1, with max-stale.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const TOKEN = 'token replica_client_token_rejects';
const revoked = new Set<string>();

function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('a rejected credential across replicas', () => {
  let upstream: ScriptedUpstream;
  let redis: TestRedis;
  let replicaA: TestProxy;
  let replicaB: TestProxy;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const json = { 'content-type': 'application/json; charset=utf-8' };
      if (revoked.has(req.headers.authorization ?? '')) {
        res.writeHead(401, json);
        res.end('{"message":"Bad credentials"}');
        return;
      }
      res.writeHead(200, { ...json, 'cache-control': 'private, max-age=0', etag: `W/"${req.url ?? ''}"` });
      res.end(JSON.stringify({ secret: `private data of ${req.url ?? ''}` }));
    });
    redis = await startRedis();
    const config = {
      upstreams: [{ name: 'api', prefix: '/', url: upstream.url }],
      redis: { url: redis.url, key_prefix: 'rejected-replicas:' },
      cache: { partition_secret: 'a shared partition secret of the test' },
    };
    replicaA = await startTestProxy(config);
    replicaB = await startTestProxy(config);
  });
  afterAll(async () => {
    await replicaA.close();
    await replicaB.close();
    await redis.stop();
    await upstream.close();
  });

  it('a 401 "Bad credentials" seen by one replica stops max-stale on the other, for every entry of that credential', async () => {
    const auth = { authorization: TOKEN };
    for (const path of ['/private/one', '/private/two']) {
      expect((await get(`${replicaA.url}${path}`, auth)).status).toBe(200);
      // Replica B has it too (L2, then its own L1) and serves it stale without the upstream.
      await until(
        async () => (await get(`${replicaB.url}${path}`, { ...auth, 'cache-control': 'max-stale, only-if-cached' })).status === 200,
      );
    }
    revoked.add(TOKEN);
    expect((await get(`${replicaA.url}/private/one`, auth)).status).toBe(401);
    for (const path of ['/private/one', '/private/two']) {
      await until(
        async () => (await get(`${replicaB.url}${path}`, { ...auth, 'cache-control': 'max-stale, only-if-cached' })).status === 504,
        5_000,
        `replica B to stop serving ${path}`,
      );
      const stale = await get(`${replicaB.url}${path}`, { ...auth, 'cache-control': 'max-stale' });
      expect(stale.body).not.toContain('private data');
      expect(stale.status).toBe(401);
    }
  });
});
