import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// Bytes that are not valid UTF-8 prove the body is streamed untouched.
const BINARY = Buffer.from([0, 1, 2, 255, 254, 0xc3, 0x28, 10, 13, 0x7f]);

describe('pass-through proxy', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const hang: Array<() => void> = [];

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res, body) => {
      if (req.url?.startsWith('/binary')) {
        res.writeHead(203, {
          'content-type': 'application/octet-stream',
          'x-custom': 'kept',
          'set-cookie': ['a=1', 'b=2'],
          connection: 'close, x-hop',
          'x-hop': 'dropped',
          'keep-alive': 'timeout=1',
          'content-length': String(BINARY.length),
        });
        res.end(BINARY);
      } else if (req.url?.startsWith('/chunked')) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('one,');
        setImmediate(() => res.end('two'));
      } else if (req.url?.startsWith('/held')) {
        hang.push(() => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('late');
        });
      } else if (req.url?.startsWith('/slow')) {
        hang.push(() => res.end('late'));
      } else if (req.url?.startsWith('/echo') || req.url?.startsWith('/api/v3/echo') || req.method !== 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
      } else if (req.url?.startsWith('/status/')) {
        const code = Number(req.url.slice(8));
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'upstream says ' + code }));
      } else if (req.url?.startsWith('/cut')) {
        res.writeHead(200, { 'content-length': '100' });
        res.write('partial');
        setImmediate(() => res.socket?.destroy());
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    const dead = await deadPort();
    proxy = await startTestProxy({
      upstreams: [
        { name: 'main', prefix: '/', url: upstream.url, timeouts: { headers_ms: 300 }, cache: { policy: 'none' } },
        { name: 'writable', prefix: '/rw', url: upstream.url, pass_through: true, strip_prefix: true },
        { name: 'down', prefix: '/down', url: `http://127.0.0.1:${dead}` },
        { name: 'based', prefix: '/based', url: `${upstream.url}/api/v3`, strip_prefix: true },
      ],
    });
  });
  afterAll(async () => {
    for (const release of hang) release();
    await proxy?.close();
    await upstream?.close();
  });

  it('forwards status, bytes and end-to-end headers unchanged, dropping hop-by-hop ones', async () => {
    const res = await request(`${proxy.url}/binary?x=1`);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(203);
    expect(body.equals(BINARY)).toBe(true);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['content-length']).toBe(String(BINARY.length));
    expect(res.headers['x-custom']).toBe('kept');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(res.headers['x-hop']).toBeUndefined();
    expect(res.headers['keep-alive']).not.toBe('timeout=1');
    expect(res.headers['x-request-id']).toMatch(/.+/);
  });

  it('streams chunked bodies', async () => {
    const res = await request(`${proxy.url}/chunked`);
    expect(await res.body.text()).toBe('one,two');
  });

  it('forwards Authorization unchanged, drops hop-by-hop request headers, keeps the query', async () => {
    const res = await request(`${proxy.url}/echo/a?b=2&a=1`, {
      headers: {
        authorization: 'token abc123',
        accept: 'application/vnd.github+json',
        'x-github-api-version': '2022-11-28',
        te: 'trailers',
        'proxy-authorization': 'Basic eDp5',
        'x-request-id': 'client-chosen-id',
      },
    });
    const echoed = (await res.body.json()) as { url: string; headers: Record<string, string> };
    expect(echoed.url).toBe('/echo/a?b=2&a=1');
    expect(echoed.headers.authorization).toBe('token abc123');
    expect(echoed.headers.accept).toBe('application/vnd.github+json');
    expect(echoed.headers['x-github-api-version']).toBe('2022-11-28');
    expect(echoed.headers.te).toBeUndefined();
    expect(echoed.headers['proxy-authorization']).toBeUndefined();
    expect(echoed.headers.host).toBe(new URL(upstream.url).host);
    expect(echoed.headers['x-request-id']).toBe('client-chosen-id');
    expect(res.headers['x-request-id']).toBe('client-chosen-id');
  });

  it('replaces an unsafe client X-Request-Id with its own', async () => {
    const res = await request(`${proxy.url}/echo`, { headers: { 'x-request-id': 'bad id with spaces' } });
    const echoed = (await res.body.json()) as { headers: Record<string, string> };
    expect(res.headers['x-request-id']).not.toBe('bad id with spaces');
    expect(echoed.headers['x-request-id']).toBe(res.headers['x-request-id']);
  });

  it('answers HEAD with headers and no body', async () => {
    const res = await request(`${proxy.url}/binary`, { method: 'HEAD' });
    expect(res.statusCode).toBe(203);
    expect(res.headers['content-length']).toBe(String(BINARY.length));
    expect((await res.body.arrayBuffer()).byteLength).toBe(0);
  });

  it('passes upstream error statuses through as they are', async () => {
    const res = await request(`${proxy.url}/status/404`);
    expect(res.statusCode).toBe(404);
    expect(await res.body.json()).toEqual({ message: 'upstream says 404' });
  });

  it('refuses other methods with 405 JSON unless the upstream allows pass-through', async () => {
    const before = upstream.seen.length;
    const res = await request(`${proxy.url}/echo`, { method: 'POST', body: '{"a":1}' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    const body = (await res.body.json()) as { message: string; documentation_url: string };
    expect(body.message).toMatch(/POST/);
    expect(body.documentation_url).toMatch(/^https:\/\//);
    expect(upstream.seen.length).toBe(before);
  });

  it('passes other methods through with their bodies where configured', async () => {
    const res = await request(`${proxy.url}/rw/items?z=1`, {
      method: 'POST',
      body: '{"a":1}',
      headers: { 'content-type': 'application/json', authorization: 'token abc' },
    });
    expect(res.statusCode).toBe(200);
    const echoed = (await res.body.json()) as { method: string; url: string; body: string; headers: Record<string, string> };
    expect(echoed).toMatchObject({ method: 'POST', url: '/items?z=1', body: '{"a":1}' });
    expect(echoed.headers.authorization).toBe('token abc');
    expect(echoed.headers['x-request-id']).toMatch(/.+/);
  });

  it('prepends the upstream URL base path', async () => {
    const res = await request(`${proxy.url}/based/echo?q=1`);
    expect(((await res.body.json()) as { url: string }).url).toBe('/api/v3/echo?q=1');
  });

  it('answers 502 in GitHub error shape when the upstream refuses connections', async () => {
    const res = await request(`${proxy.url}/down/repos/a/b`);
    expect(res.statusCode).toBe(502);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    const body = (await res.body.json()) as Record<string, string>;
    expect(Object.keys(body).sort()).toEqual(['documentation_url', 'message']);
    expect(body.message).toMatch(/ECONNREFUSED/);
  });

  it('answers 504 when the upstream does not answer in time', async () => {
    const res = await request(`${proxy.url}/slow`);
    expect(res.statusCode).toBe(504);
    expect(((await res.body.json()) as { message: string }).message).toMatch(/Gateway Timeout/);
  });

  it('cuts the client connection when the upstream dies mid-body (never a silent short body)', async () => {
    await expect(
      (async () => {
        const res = await request(`${proxy.url}/cut`);
        await res.body.text();
      })(),
    ).rejects.toThrow();
  });

  it('survives a client that leaves before the upstream answers', async () => {
    const before = hang.length;
    const ac = new AbortController();
    const pending = request(`${proxy.url}/held`, { signal: ac.signal }).catch(() => 'aborted');
    await until(() => hang.length > before, 5000, 'request to reach upstream');
    ac.abort();
    expect(await pending).toBe('aborted');
    await until(() => proxy.inFlight() === 0, 5000, 'the proxy to see the client leave');
    hang.splice(before, 1)[0]!();
    // The proxy is still alive and answering.
    const res = await request(`${proxy.url}/chunked`);
    expect(await res.body.text()).toBe('one,two');
  });

  it('answers 400 JSON for targets that could escape the prefix', async () => {
    for (const path of ['/repos/%2e%2e/x', '/a/../b', '/a%2fb']) {
      const res = await rawRequest(proxy.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(res).toMatch(/^HTTP\/1.1 400/);
      expect(res).toMatch(/"documentation_url"/);
    }
    const abs = await rawRequest(proxy.url, `GET http://evil.example/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(abs).toMatch(/^HTTP\/1.1 400/);
  });

  it('answers malformed HTTP with a 400 and closes', async () => {
    const res = await rawRequest(proxy.url, 'GARBAGE\r\n\r\n');
    expect(res).toMatch(/^HTTP\/1.1 400/);
  });

  it('logs one line per request with credentials redacted', async () => {
    const secret = 'ghp_supersecretvalue000000000000000001';
    await (
      await request(`${proxy.url}/echo?access_token=${secret}`, { headers: { authorization: `token ${secret}`, cookie: `s=${secret}` } })
    ).body.text();
    await until(() => proxy.logs().some((l) => typeof l.path === 'string' && l.path.startsWith('/echo?access_token')), 2000, 'log line');
    const line = proxy.logs().find((l) => typeof l.path === 'string' && l.path.startsWith('/echo?access_token'))!;
    expect(line).toMatchObject({ msg: 'request', method: 'GET', upstream: 'main', status: 200, upstreamStatus: 200 });
    expect(typeof line.durationMs).toBe('number');
    expect(typeof line.reqId).toBe('string');
    expect(proxy.logText()).not.toContain(secret);
  });
});

function rawRequest(base: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const sock = connect(Number(url.port), url.hostname, () => sock.write(text));
    let out = '';
    sock.on('data', (d: Buffer) => (out += d.toString()));
    sock.on('end', () => resolve(out));
    sock.on('error', reject);
    sock.setTimeout(3000, () => {
      sock.destroy();
      reject(new Error('raw request timed out'));
    });
  });
}
