/**
 * Hardening: the real `etagere serve` process under a 500-connection keep-alive load.
 *
 * 1. SIGTERM mid-load: every request sent before the signal gets a complete 2xx answer (cache
 *    hits and slow upstream misses alike), new connections are refused (or answered 503 shutting
 *    down), /readyz on the admin port turns 503, and the process exits 0 within
 *    `shutdown.drain_timeout_ms` plus a small margin.
 * 2. SIGKILL, then a new process on the same Redis: the cache is still warm (answers come from
 *    L2, the upstream sees no request).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Client, Pool, request, type DiagnosticsChannel } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { deadPort } from '../helpers/upstream.js';

const CONNECTIONS = 500;
const DRAIN_TIMEOUT_MS = 5_000;
/** Time allowed for exit beyond the drain timeout (closing clients, flushing logs, process exit). */
const EXIT_MARGIN_MS = 1_500;
/** Upstream latency during the load: misses are still in flight when the signal arrives. */
const UPSTREAM_LATENCY_MS = 600;
const HOT_PATHS = ['/repos/octocat/hello-world', '/users/octocat', '/users/bob', '/users/alice', '/repos/octocat/spoon-knife'];

interface Proxy {
  cli: CliProcess;
  url: string;
  adminUrl: string;
}

let dir: string;

/** Starts `etagere serve --config FILE` on free ports; resolves once /readyz answers 200. */
async function startProxy(raw: Record<string, unknown>): Promise<Proxy> {
  const [port, adminPort] = [await deadPort(), await deadPort()];
  const file = join(dir, `proxy-${port}.json`); // JSON is YAML
  const config = { listen: { host: '127.0.0.1', port }, admin: { host: '127.0.0.1', port: adminPort }, log: { level: 'warn' }, ...raw };
  await writeFile(file, JSON.stringify(config));
  const cli = runCli(['serve', '--config', file], {
    ETAGERE_CONFIG: undefined,
    LOG_LEVEL: undefined,
    PORT: undefined,
    ADMIN_PORT: undefined,
    REDIS_URL: undefined,
    UPSTREAM_URL: undefined,
  });
  const proxy = { cli, url: `http://127.0.0.1:${port}`, adminUrl: `http://127.0.0.1:${adminPort}` };
  await until(
    async () => {
      if (cli.child.exitCode !== null) throw new Error(`etagere serve exited early:\n${cli.stderr()}${cli.stdout()}`);
      return (
        (await fetch(`${proxy.adminUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        )) === 200
      );
    },
    20_000,
    'etagere serve to be ready',
  );
  return proxy;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'etagere-shutdown-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** One request's fate, as the client saw it. */
interface Outcome {
  sentAt: number | undefined;
  endedAt: number;
  status: number; // 0: no response (connection refused / reset)
  error?: string;
  bodyOk: boolean;
  kind: 'hit' | 'miss';
}

describe('SIGTERM under a 500-connection keep-alive load', () => {
  let fake: FakeUpstream;
  let proxy: Proxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000_000 });
    proxy = await startProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, connections: 256 }],
      shutdown: { drain_timeout_ms: DRAIN_TIMEOUT_MS },
    });
  }, 30_000);
  afterAll(async () => {
    proxy?.cli.child.kill('SIGKILL');
    await fake?.close();
  });

  it('answers every in-flight request, refuses new connections, and exits 0 within the drain timeout', async () => {
    // The hot paths are cached before the load: those requests are L1 hits.
    for (const path of HOT_PATHS) await (await request(proxy.url + path)).body.dump();
    const setLatency = await request(`${fake.url}/__fake/config`, {
      method: 'POST',
      body: JSON.stringify({ latencyMs: UPSTREAM_LATENCY_MS }),
    });
    expect(setLatency.statusCode).toBe(200);
    await setLatency.body.dump();

    const pool = new Pool(proxy.url, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 60_000 });
    const outcomes: Outcome[] = [];
    // "Sent" is when the client wrote the request on its connection (a request can wait in the
    // client's queue for a free connection): undici publishes that moment just before the write.
    const onSend = (message: unknown): void => {
      const seq = /^x-load-seq: (\d+)\r$/m.exec((message as DiagnosticsChannel.ClientSendHeadersMessage).headers);
      const outcome = seq === null ? undefined : outcomes[Number(seq[1])];
      if (outcome !== undefined) outcome.sentAt = performance.now();
    };
    subscribe('undici:client:sendHeaders', onSend);
    let signalAt = Number.POSITIVE_INFINITY;
    let exited = false;
    const worker = async (workerIndex: number): Promise<void> => {
      // Even workers ask for a new key each time (a miss held UPSTREAM_LATENCY_MS by the upstream),
      // odd ones for the hot paths (hits). They keep going after the signal, as real clients would,
      // until their first failure.
      for (let i = 0; !exited; i++) {
        const kind = workerIndex % 2 === 0 ? 'miss' : 'hit';
        const path =
          kind === 'miss'
            ? `/repos/etagere-org/repo-0${String(10 + (workerIndex % 60))}?w=${workerIndex}&i=${i}`
            : HOT_PATHS[(workerIndex + i) % HOT_PATHS.length]!;
        const outcome: Outcome = { sentAt: undefined, endedAt: 0, status: 0, bodyOk: false, kind };
        const seq = outcomes.push(outcome) - 1;
        try {
          const res = await pool.request({ method: 'GET', path, headers: { 'x-load-seq': String(seq) } });
          outcome.status = res.statusCode;
          const body = await res.body.text();
          outcome.bodyOk = body.length > 0 && JSON.parse(body) !== undefined;
        } catch (err) {
          outcome.error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        }
        outcome.endedAt = performance.now();
        if (!sentBefore(outcome) && (outcome.error !== undefined || outcome.status !== 200)) return;
      }
    };
    const sentBefore = (o: Outcome): boolean => o.sentAt !== undefined && o.sentAt < signalAt;
    const workers = Array.from({ length: CONNECTIONS }, (_, w) => worker(w));

    // Mid-load: every connection open, hits flowing, and a few hundred misses waiting on the upstream.
    const done = (kind: Outcome['kind']): number => outcomes.filter((o) => o.kind === kind && o.endedAt > 0).length;
    await until(() => done('miss') >= CONNECTIONS && done('hit') >= 5 * CONNECTIONS, 30_000, 'load to build up');
    signalAt = performance.now();
    proxy.cli.child.kill('SIGTERM');
    const exit = proxy.cli.exited.then((e) => ({ ...e, ms: performance.now() - signalAt }));
    void exit.then(() => (exited = true));

    // Once the process has taken the signal (its /readyz on the admin port says 503), new
    // connections are never served: refused (the listener is closed), reset, or a 503 "shutting
    // down" while the listener closes.
    await until(
      async () =>
        (await fetch(`${proxy.adminUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        )) === 503,
      5_000,
      '/readyz to turn 503',
    );
    const late: string[] = [];
    const readyz: number[] = [];
    const probe = async (): Promise<void> => {
      const client = new Client(proxy.url, { pipelining: 1 });
      try {
        const res = await client.request({ method: 'GET', path: HOT_PATHS[0]! });
        const body = await res.body.text();
        late.push(res.statusCode === 503 && /shutting down/.test(body) ? '503 shutting down' : `served ${res.statusCode}`);
      } catch (err) {
        late.push((err as NodeJS.ErrnoException).code ?? (err as Error).message);
      } finally {
        client.destroy().catch(() => undefined);
      }
      readyz.push(
        await fetch(`${proxy.adminUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        ),
      );
    };
    // A few probes while upstream misses are still being drained (the process is alive).
    for (let i = 0; i < 5 && !exited; i++) await probe();

    const { code, signal, ms: exitMs } = await exit;
    await Promise.all(workers);
    await pool.destroy();

    unsubscribe('undici:client:sendHeaders', onSend);

    const before = outcomes.filter(sentBefore);
    const inFlight = before.filter((o) => o.endedAt > signalAt);
    const failed = before.filter((o) => o.status < 200 || o.status > 299 || !o.bodyOk);
    const after = outcomes.filter((o) => !sentBefore(o));
    console.log(
      `shutdown: ${CONNECTIONS} keep-alive connections, SIGTERM with ${inFlight.length} requests in flight (${inFlight.filter((o) => o.kind === 'miss').length} upstream misses, ` +
        `${inFlight.filter((o) => o.kind === 'hit').length} hits): ${failed.length} failed; exit code ${code} after ${Math.round(exitMs)} ms (drain timeout ${DRAIN_TIMEOUT_MS} ms); ` +
        `sent after the signal on open connections: ${after.filter((o) => o.status === 200).length} served, ${after.filter((o) => o.status !== 200).length} not; ` +
        `new connections: ${[...new Set(late)].join(', ')}`,
    );

    expect(inFlight.filter((o) => o.kind === 'miss').length).toBeGreaterThanOrEqual(100);
    expect(failed.map((o) => `${o.kind} ${o.status} ${o.error ?? ''}`)).toEqual([]);
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((l) => l.startsWith('served'))).toEqual([]);
    expect(readyz.filter((s) => s === 200)).toEqual([]);
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(exitMs).toBeLessThan(DRAIN_TIMEOUT_MS + EXIT_MARGIN_MS);
  }, 60_000);
});

describe('SIGKILL, then a new process on the same Redis', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let raw: Redis;
  const alive: Proxy[] = [];
  const PATHS = Array.from({ length: 20 }, (_, i) => `/repos/etagere-org/repo-0${String(10 + i)}`);

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000_000 });
    raw = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  }, 30_000);
  afterAll(async () => {
    for (const proxy of alive) proxy.cli.child.kill('SIGKILL');
    raw?.disconnect();
    await fake?.close();
    await redis?.stop();
  });

  const config = (): Record<string, unknown> => ({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
    redis: { url: redis.url, key_prefix: 'etagere-restart:' },
  });
  const redisUp = async (proxy: Proxy): Promise<boolean> => {
    const text = await fetch(`${proxy.adminUrl}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    return /^etagere_redis_up 1$/m.test(text);
  };

  it('the cache is still warm: every request after the restart is answered from L2, none goes upstream', async () => {
    const first = await startProxy(config());
    alive.push(first);
    await until(() => redisUp(first), 10_000, 'first proxy to reach Redis');
    for (const path of PATHS) {
      const res = await request(first.url + path);
      expect(res.statusCode).toBe(200);
      expect(String(res.headers['cache-status'])).toMatch(/fwd=miss; fwd-status=200; ttl=\d+; stored/);
      await res.body.dump();
    }
    // Written to L2 (in the background, after each response): wait until all 20 are there.
    await until(async () => (await raw.keys('etagere-restart:v1:*:e')).length === PATHS.length, 5_000, 'L2 writes');

    first.cli.child.kill('SIGKILL');
    expect(await first.cli.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const second = await startProxy(config());
    alive.push(second);
    await until(() => redisUp(second), 10_000, 'second proxy to reach Redis');
    const upstreamBefore = fake.stats().total;
    const statuses: string[] = [];
    for (const path of PATHS) {
      const res = await request(second.url + path);
      expect(res.statusCode).toBe(200);
      expect(JSON.parse(await res.body.text())).toMatchObject({ name: path.split('/').pop() });
      statuses.push(String(res.headers['cache-status']));
    }
    const upstreamAfter = fake.stats().total - upstreamBefore;
    console.log(
      `restart: ${PATHS.length} entries warmed, proxy SIGKILLed, new process: ${statuses.filter((s) => /^etagere; hit/.test(s)).length}/${PATHS.length} hits, ${upstreamAfter} upstream requests`,
    );
    expect(statuses.filter((s) => !/^etagere; hit; ttl=\d+/.test(s))).toEqual([]);
    expect(upstreamAfter).toBe(0);
    second.cli.child.kill('SIGTERM');
    expect(await second.cli.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});
