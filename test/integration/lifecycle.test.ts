import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { runCli } from '../helpers/cli.js';
import { startTestProxy, until } from '../helpers/proxy.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

describe('admin endpoints and graceful shutdown', () => {
  let upstream: ScriptedUpstream;
  const held: Array<() => void> = [];

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const send = (): void => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('done');
      };
      if (req.url === '/hold') held.push(send);
      else send();
    });
  });
  afterAll(async () => {
    for (const release of held.splice(0)) release();
    await upstream.close();
  });

  it('serves /healthz, /readyz and /metrics on the admin port only', async () => {
    const proxy = await startTestProxy({ upstreams: [{ name: 'main', prefix: '/', url: upstream.url }] });
    try {
      await (await request(`${proxy.url}/x`)).body.text();
      const health = await request(`${proxy.adminUrl}/healthz`);
      expect(health.statusCode).toBe(200);
      expect(await health.body.json()).toEqual({ status: 'ok' });
      const ready = await request(`${proxy.adminUrl}/readyz`);
      expect(ready.statusCode).toBe(200);
      await ready.body.text();
      const metrics = await request(`${proxy.adminUrl}/metrics`);
      expect(metrics.statusCode).toBe(200);
      const text = await metrics.body.text();
      expect(text).toMatch(/^etagere_process_cpu_seconds_total /m);
      expect(text).toMatch(/^etagere_requests_total\{upstream="main",route="other",method="GET",status="200"\} 1$/m); // "/x" matches no route template
      // The proxy port does not expose admin paths: they route upstream like any other path.
      const viaProxy = await request(`${proxy.url}/metrics`);
      expect(await viaProxy.body.text()).toBe('done');
    } finally {
      await proxy.close();
    }
  });

  it('close() lets in-flight requests finish, refuses new connections and turns /readyz to 503', async () => {
    const proxy = await startTestProxy({ upstreams: [{ name: 'main', prefix: '/', url: upstream.url }] });
    const inflight = request(`${proxy.url}/hold`).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
    await until(() => held.length === 1, 5000, 'request to reach upstream');
    const closing = proxy.close();
    await until(() => !proxy.server.listening, 5000, 'listener to stop');
    await expect(request(`${proxy.url}/x`)).rejects.toThrow();
    held.shift()!();
    expect(await inflight).toEqual({ status: 200, body: 'done' });
    await closing;
  });

  it('`etagere serve` drains on SIGTERM and exits 0', async () => {
    const port = await deadPort();
    const adminPort = await deadPort();
    const cli = runCli(['serve'], {
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      UPSTREAM_URL: upstream.url,
      ETAGERE_CONFIG: undefined,
    });
    try {
      await until(() => cli.stdout().includes('etagere listening'), 15000, 'proxy to start');
      const inflight = request(`http://127.0.0.1:${port}/hold`).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
      await until(() => held.length === 1, 5000, 'request to reach upstream');
      cli.child.kill('SIGTERM');
      // Still in flight: the process must not exit before the response is done.
      await until(
        async () =>
          (await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
            (r) => r.status,
            () => 0,
          )) !== 200,
        5000,
        'readyz to drop',
      );
      held.shift()!();
      expect(await inflight).toEqual({ status: 200, body: 'done' });
      expect(await cli.exited).toEqual({ code: 0, signal: null });
    } finally {
      cli.child.kill('SIGKILL');
    }
  });

  it('`etagere serve` exits non-zero naming the bad key for an invalid config', async () => {
    const cli = runCli(['serve'], { PORT: 'eighty', ETAGERE_CONFIG: undefined });
    const { code } = await cli.exited;
    expect(code).not.toBe(0);
    expect(cli.stderr()).toMatch(/listen\.port/);
  });

  it('`etagere` with an unknown command prints usage and exits non-zero', async () => {
    const cli = runCli(['frobnicate']);
    const { code } = await cli.exited;
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(/usage:/);
  });
});
