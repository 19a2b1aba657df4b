/**
 * Passed-through writes (POST, PATCH, DELETE) reuse kept-alive upstream connections, as many as
 * the upstream's `connections` at most, instead of a new connection (and TLS handshake) each; a
 * request's headers stay its own on a reused socket, a client's hop-by-hop headers (its
 * `Connection: close` too) never reach the upstream, and shutdown closes the idle sockets.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

interface Echo {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

describe('pass-through keeps upstream connections alive', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const open = new Set<Socket>();
  let accepted = 0;
  /** The most upstream connections open at once since it was last reset. */
  let peak = 0;

  const write = async (method: string, path: string, headers: Record<string, string> = {}, body = '{"a":1}'): Promise<Echo> => {
    const res = await request(`${proxy.url}/rw${path}`, { method, body, headers: { 'content-type': 'application/json', ...headers } });
    expect(res.statusCode).toBe(200);
    return (await res.body.json()) as Echo;
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res, body) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
    upstream.server.on('connection', (socket: Socket) => {
      accepted++;
      open.add(socket);
      peak = Math.max(peak, open.size);
      socket.on('close', () => open.delete(socket));
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'writable', prefix: '/rw', url: upstream.url, pass_through: true, strip_prefix: true, connections: 4 }],
    });
  });
  beforeEach(() => {
    accepted = 0;
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('20 sequential POSTs use at most 2 upstream connections, and none asks the upstream to close', async () => {
    for (let index = 0; index < 20; index++) {
      const echoed = await write('POST', `/items?n=${index}`, {}, `{"n":${index}}`);
      expect(echoed).toMatchObject({ method: 'POST', url: `/items?n=${index}`, body: `{"n":${index}}` });
      expect(echoed.headers.connection).not.toBe('close');
    }
    expect(accepted).toBeLessThanOrEqual(2);
  });

  it('PATCH and DELETE share the kept-alive connections too', async () => {
    for (let index = 0; index < 10; index++) await write(index % 2 === 0 ? 'PATCH' : 'DELETE', `/items/${index}`);
    expect(accepted).toBeLessThanOrEqual(2);
  });

  it("never carries one request's Authorization over to the next request on the same socket", async () => {
    const sent: Array<string | undefined> = ['token first-client-token', undefined, 'Bearer second-client-token', undefined, 'token third'];
    for (const authorization of [...sent, ...sent]) {
      const echoed = await write('POST', '/who', authorization === undefined ? {} : { authorization });
      expect(echoed.headers.authorization).toBe(authorization);
    }
    expect(accepted).toBeLessThanOrEqual(2);
  });

  /** A POST through node:http, which sends what undici refuses to (Connection naming headers, Expect). */
  const nodePost = (path: string, headers: Record<string, string>, body: string): Promise<{ status: number; echoed: Echo }> =>
    new Promise((resolve, reject) => {
      const url = new URL(`${proxy.url}/rw${path}`);
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent: false, headers }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, echoed: JSON.parse(text) as Echo }));
      });
      req.on('error', reject);
      if (headers.expect === undefined) req.end(body);
      else req.on('continue', () => req.end(body));
    });

  it("hostile: a client's Connection: close and the headers its Connection names never reach the upstream", async () => {
    const answer = await nodePost(
      '/hop',
      { connection: 'close, x-hop', 'x-hop': 'secret-hop', 'keep-alive': 'timeout=1', 'content-type': 'application/json' },
      '{}',
    );
    expect(answer.status).toBe(200);
    expect(answer.echoed.headers.connection).not.toMatch(/close/i);
    expect(answer.echoed.headers['x-hop']).toBeUndefined();
    expect(answer.echoed.headers['keep-alive']).toBeUndefined();
    // The next writes still reuse a kept-alive connection.
    accepted = 0;
    for (let index = 0; index < 5; index++) await write('POST', '/after');
    expect(accepted).toBeLessThanOrEqual(1);
  });

  it('a POST that asks Expect: 100-continue is answered on a connection of its own, and its body arrives whole', async () => {
    const answer = await nodePost('/expect', { expect: '100-continue', 'content-type': 'application/json' }, '{"big":true}');
    expect(answer.status).toBe(200);
    expect(answer.echoed).toMatchObject({ method: 'POST', url: '/expect', body: '{"big":true}' });
    expect(answer.echoed.headers.connection).toBe('close');
  });

  it('never opens more upstream connections than the upstream is configured for (connections: 4)', async () => {
    peak = open.size;
    const burst = await Promise.all(Array.from({ length: 16 }, (_, index) => write('POST', `/burst/${index}`)));
    expect(burst.map((echoed) => echoed.url).sort()).toEqual(Array.from({ length: 16 }, (_, index) => `/burst/${index}`).sort());
    expect(peak).toBeLessThanOrEqual(4);
  });

  it('shutdown closes the idle upstream connections', async () => {
    await write('POST', '/last');
    expect(open.size).toBeGreaterThanOrEqual(1);
    await proxy.close();
    await until(() => open.size === 0, 5_000, 'the upstream connections to close');
  });
});
