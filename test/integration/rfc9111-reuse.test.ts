/**
 * Policy `rfc9111` reuses what a shared cache may (RFC 9111 section 3, 4.2.2; W3C Edge
 * Architecture 1.0): responses whose Surrogate-Control gives etagere freshness, any status with
 * explicit freshness, the heuristically cacheable statuses by heuristic freshness. Surrogate-Control
 * `no-store` is never stored. The GitHub policies do none of this.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

interface Scripted {
  status: number;
  headers: Record<string, string>;
}

const LAST_MODIFIED = () => new Date(Date.now() - 10 * 86_400_000).toUTCString();

describe('rfc9111: reuse of what a shared cache may store', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const scripts = new Map<string, Scripted>();
  const mode = new Map<string, 'ok' | '503'>();

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await request(`${proxy.url}${path}`, { headers });
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const upstreamCount = (path: string) => upstream.seen.filter((s) => s.url === path).length;
  /** Two GETs of `prefix + path` with the origin answering `script`; how many reached the origin. */
  const twice = async (prefix: '/rfc' | '/gh', path: string, script: Scripted) => {
    scripts.set(path, script);
    const first = await get(prefix + path);
    const second = await get(prefix + path);
    return { first, second, seen: upstreamCount(prefix + path) };
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const path = (req.url ?? '').replace(/^\/(rfc|gh)/, '');
      if (mode.get(path) === '503') {
        res.writeHead(503, { 'content-type': 'text/plain', 'cache-control': 'max-age=60' });
        res.end('down');
        return;
      }
      const script = scripts.get(path) ?? { status: 200, headers: {} };
      res.writeHead(script.status, { 'content-type': 'text/plain', date: new Date().toUTCString(), ...script.headers });
      res.end(`body of ${path}`);
    });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'rfc', prefix: '/rfc', url: upstream.url, cache: { policy: 'rfc9111', heuristic_fraction: 0.1 } },
        { name: 'gh', prefix: '/gh', url: upstream.url, cache: { policy: 'max-age' } },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('tells the origin it is a surrogate (Surrogate-Capability), under rfc9111 only', async () => {
    await twice('/rfc', '/capability', { status: 200, headers: {} });
    await twice('/gh', '/capability', { status: 200, headers: {} });
    const sent = (prefix: string) => upstream.seen.find((s) => s.url === `${prefix}/capability`)?.headers['surrogate-capability'];
    expect(sent('/rfc')).toBe('etagere="Surrogate/1.0"');
    expect(sent('/gh')).toBeUndefined();
  });

  it('Surrogate-Control max-age stores and reuses a response whose Cache-Control says no-store', async () => {
    const { first, second, seen } = await twice('/rfc', '/sc-max-age', {
      status: 200,
      headers: { 'cache-control': 'no-store', 'surrogate-control': 'max-age=3600;etagere' },
    });
    expect(first.headers['cache-status']).toMatch(/stored/);
    expect(second.status).toBe(200);
    expect(second.body).toBe('body of /sc-max-age');
    expect(seen).toBe(1);
  });

  it('Surrogate-Control no-store is never stored, whatever Cache-Control and Expires say', async () => {
    const { seen } = await twice('/rfc', '/sc-no-store', {
      status: 200,
      headers: {
        'cache-control': 'max-age=10000',
        expires: new Date(Date.now() + 10_000_000).toUTCString(),
        'surrogate-control': 'no-store',
      },
    });
    expect(seen).toBe(2);
  });

  it('Surrogate-Control aimed at another device, or a shorter one than Cache-Control, is honoured as such', async () => {
    const other = await twice('/rfc', '/sc-other', {
      status: 200,
      headers: { 'cache-control': 'no-store', 'surrogate-control': 'max-age=3600;cdn' },
    });
    expect(other.seen).toBe(2);
    const short = await twice('/rfc', '/sc-short', {
      status: 200,
      headers: { 'cache-control': 'max-age=3600', 'surrogate-control': 'max-age=0' },
    });
    expect(short.seen).toBe(2);
  });

  it('the GitHub policies ignore Surrogate-Control', async () => {
    const stored = await twice('/gh', '/sc-max-age', {
      status: 200,
      headers: { 'cache-control': 'no-store', 'surrogate-control': 'max-age=3600' },
    });
    expect(stored.seen).toBe(2);
    const kept = await twice('/gh', '/sc-no-store', {
      status: 200,
      headers: { 'cache-control': 'max-age=3600', 'surrogate-control': 'no-store' },
    });
    expect(kept.seen).toBe(1);
  });

  it.each([299, 302, 303, 307, 400, 500, 503, 599])('a %d with explicit freshness is reused while fresh', async (status) => {
    const path = `/status-${status}`;
    const { second, seen } = await twice('/rfc', path, { status, headers: { 'cache-control': 'max-age=3600', location: '/elsewhere' } });
    expect(second.status).toBe(status);
    expect(seen).toBe(1);
  });

  it('a status that is not heuristically cacheable is not stored without explicit freshness, nor with must-understand', async () => {
    const heuristicOnly = await twice('/rfc', '/status-302-lm', { status: 302, headers: { 'last-modified': LAST_MODIFIED() } });
    expect(heuristicOnly.seen).toBe(2);
    const unknown = await twice('/rfc', '/status-599-mu', { status: 599, headers: { 'cache-control': 'max-age=3600, must-understand' } });
    expect(unknown.seen).toBe(2);
  });

  it('the GitHub policies still store 200s only', async () => {
    const { seen } = await twice('/gh', '/status-302', { status: 302, headers: { 'cache-control': 'max-age=3600' } });
    expect(seen).toBe(2);
  });

  it('a 5xx with explicit freshness does not replace a stored entry: stale-if-error serves that entry', async () => {
    const path = '/fallback';
    scripts.set(path, { status: 200, headers: { 'cache-control': 'max-age=0', etag: '"v1"' } });
    expect((await get(`/rfc${path}`)).status).toBe(200);
    mode.set(path, '503');
    const during = await get(`/rfc${path}`);
    expect(during.status).toBe(200);
    expect(during.body).toBe(`body of ${path}`);
    mode.set(path, 'ok');
    scripts.set(path, { status: 200, headers: { 'cache-control': 'max-age=3600', etag: '"v2"' } });
    expect((await get(`/rfc${path}`)).status).toBe(200);
  });

  it('Expires counts from the time received when Date is not a date (and not at all under the GitHub policies)', async () => {
    const script = () => ({ status: 200, headers: { date: 'foo', expires: new Date(Date.now() + 100_000).toUTCString() } });
    expect((await twice('/rfc', '/expires-bad-date', script())).seen).toBe(1);
    expect((await twice('/gh', '/expires-bad-date', script())).seen).toBe(2);
  });

  it.each([200, 203, 204, 404, 405, 410, 414])('a %d with Last-Modified is reused by heuristic freshness', async (status) => {
    const { second, seen } = await twice('/rfc', `/heuristic-${status}`, { status, headers: { 'last-modified': LAST_MODIFIED() } });
    expect(second.status).toBe(status);
    expect(seen).toBe(1);
  });

  it('Vary: a request whose selecting headers mean the same (list spaces, language case and order) reuses the stored variant', async () => {
    const script = { status: 200, headers: { 'cache-control': 'max-age=3600', vary: 'Foo, Accept-Language', 'content-language': 'de' } };
    scripts.set('/vary', script);
    await get('/rfc/vary', { foo: '1,2', 'accept-language': 'en, de' });
    await get('/rfc/vary', { foo: ' 1, 2 ', 'accept-language': 'DE, en' });
    await get('/rfc/vary', { foo: '1,2', 'accept-language': 'fr;q=0.5, de' });
    expect(upstreamCount('/rfc/vary')).toBe(1);
    // Different meanings go upstream: another member order of an unknown field, another language first.
    await get('/rfc/vary', { foo: '2,1', 'accept-language': 'en, de' });
    await get('/rfc/vary', { foo: '2,1', 'accept-language': 'fr, de;q=0.5' });
    expect(upstreamCount('/rfc/vary')).toBe(3);
  });

  it('Vary under the GitHub policies compares the bytes', async () => {
    scripts.set('/vary-gh', { status: 200, headers: { 'cache-control': 'max-age=3600', vary: 'Foo' } });
    await get('/gh/vary-gh', { foo: '1,2' });
    await get('/gh/vary-gh', { foo: ' 1, 2 ' });
    expect(upstreamCount('/gh/vary-gh')).toBe(2);
  });

  describe('byte ranges from a stored complete response', () => {
    const body = 'body of /ranged'; // 15 bytes, as the scripted origin sends it
    beforeAll(() => {
      scripts.set('/ranged', { status: 200, headers: { 'cache-control': 'max-age=3600', etag: '"r1"' } });
    });

    it('a Range request on a miss fetches the whole response, stores it, and gets its part', async () => {
      const first = await get('/rfc/ranged', { range: 'bytes=0-3' });
      expect(first.status).toBe(206);
      expect(first.body).toBe('body');
      expect(first.headers['content-range']).toBe(`bytes 0-3/${body.length}`);
      const sent = upstream.seen.filter((s) => s.url === '/rfc/ranged');
      expect(sent).toHaveLength(1);
      expect(sent[0]!.headers.range).toBeUndefined();
      expect((await get('/rfc/ranged')).body).toBe(body);
      expect(upstreamCount('/rfc/ranged')).toBe(1);
    });

    it('later ranges are cut from the stored response: first-last, first-, -suffix', async () => {
      await get('/rfc/ranged');
      const cases = [
        ['bytes=5-6', 'of', '5-6'],
        ['bytes=8-', '/ranged', '8-14'],
        ['bytes=-6', 'ranged', '9-14'],
      ] as const;
      for (const [range, part, span] of cases) {
        const reply = await get('/rfc/ranged', { range });
        expect(reply.status, range).toBe(206);
        expect(reply.body, range).toBe(part);
        expect(reply.headers['content-range'], range).toBe(`bytes ${span}/${body.length}`);
        expect(reply.headers['content-length'], range).toBe(String(part.length));
      }
      expect(upstreamCount('/rfc/ranged')).toBe(1);
    });

    it('a range past the end is a 416 naming the length; several ranges, bad syntax or another If-Range get the whole', async () => {
      await get('/rfc/ranged');
      const past = await get('/rfc/ranged', { range: 'bytes=100-' });
      expect(past.status).toBe(416);
      expect(past.headers['content-range']).toBe(`bytes */${body.length}`);
      expect(past.body).toBe('');
      const wholes: Array<Record<string, string>> = [
        { range: 'bytes=0-1,3-4' },
        { range: 'bytes=4-1' },
        { range: 'lines=1-2' },
        { range: 'bytes=0-1', 'if-range': '"other"' },
      ];
      for (const headers of wholes) {
        const whole = await get('/rfc/ranged', headers);
        expect(whole.status, JSON.stringify(headers)).toBe(200);
        expect(whole.body).toBe(body);
      }
      expect((await get('/rfc/ranged', { range: 'bytes=0-1', 'if-range': '"r1"' })).status).toBe(206);
      expect(upstreamCount('/rfc/ranged')).toBe(1);
    });

    it('under the GitHub policies a Range request still streams through to the origin', async () => {
      await get('/gh/ranged', { range: 'bytes=0-3' });
      await get('/gh/ranged', { range: 'bytes=0-3' });
      const sent = upstream.seen.filter((s) => s.url === '/gh/ranged');
      expect(sent).toHaveLength(2);
      expect(sent[0]!.headers.range).toBe('bytes=0-3');
    });
  });
});
