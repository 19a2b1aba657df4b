/**
 * A request's `Cache-Control: no-cache` under the GitHub policies (cache.client_no_cache): by default
 * (`conditional`) a curl user's `no-cache` revalidates upstream, while the `no-cache` that fetch
 * adds to a conditional request (If-None-Match, If-Modified-Since) is ignored and Cache-Status says
 * so. `honor` and `ignore` keep their meaning.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const HELLO = '/repos/octocat/hello-world';
const FETCH_NO_CACHE = { 'cache-control': 'no-cache', pragma: 'no-cache' };
const IGNORED = 'detail=client-no-cache-ignored';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe('a client no-cache under the GitHub policies', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let etag: string;
  let lastModified: string;

  const get = async (prefix: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await request(`${proxy.url}${prefix}${HELLO}`, { headers });
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const cacheStatus = (answer: Answer): string => String(answer.headers['cache-status']);
  const upstreamCalls = (): number => fake.stats().total;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'github', prefix: '/', url: fake.url },
        { name: 'honor', prefix: '/honor', strip_prefix: true, url: fake.url, cache: { client_no_cache: 'honor' } },
        { name: 'ignore', prefix: '/ignore', strip_prefix: true, url: fake.url, cache: { client_no_cache: 'ignore' } },
      ],
    });
  });
  beforeEach(async () => {
    // Each test starts from one stored entry per upstream.
    for (const prefix of ['', '/honor', '/ignore']) {
      const first = await get(prefix, { 'cache-control': 'max-age=0' });
      expect(first.status).toBe(200);
      etag = String(first.headers.etag);
      lastModified = String(first.headers['last-modified']);
    }
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it("revalidates upstream on a curl user's no-cache (no validator), by default", async () => {
    const curl = async (...headers: string[]): Promise<string> =>
      (
        await promisify(execFile)('curl', [
          '-sS',
          '-D',
          '-',
          '-o',
          '/dev/null',
          ...headers.flatMap((line) => ['-H', line]),
          proxy.url + HELLO,
        ])
      ).stdout;
    await curl(); // curl's own Accept: */* is an entry of its own
    expect(await curl()).toMatch(/^cache-status: etagere; hit\b/im);
    const before = upstreamCalls();
    const forced = await curl('Cache-Control: no-cache');
    expect(forced).toMatch(/^HTTP\/1\.1 200/);
    expect(forced).toMatch(/^cache-status: etagere; fwd=request; fwd-status=304\b/im);
    expect(forced).not.toContain('client-no-cache-ignored');
    expect(upstreamCalls()).toBe(before + 1);
  });

  it('revalidates upstream on an HTTP/1.0 Pragma: no-cache without a validator, by default', async () => {
    const before = upstreamCalls();
    const answer = await get('', { pragma: 'no-cache' });
    expect(cacheStatus(answer)).toMatch(/^etagere; fwd=request\b/);
    expect(upstreamCalls()).toBe(before + 1);
  });

  it("serves fetch's conditional poll (If-None-Match + no-cache) from the cache, and Cache-Status says the no-cache was ignored", async () => {
    const before = upstreamCalls();
    const answer = await get('', { ...FETCH_NO_CACHE, 'if-none-match': etag });
    expect(answer.status).toBe(304);
    expect(cacheStatus(answer)).toMatch(new RegExp(`^etagere; hit; ttl=\\d+; ${IGNORED}$`));
    expect(upstreamCalls()).toBe(before);
  });

  it('serves an If-Modified-Since + no-cache request from the cache too, with the detail', async () => {
    const before = upstreamCalls();
    const answer = await get('', { ...FETCH_NO_CACHE, 'if-modified-since': lastModified });
    expect([200, 304]).toContain(answer.status);
    expect(cacheStatus(answer)).toContain(IGNORED);
    expect(upstreamCalls()).toBe(before);
  });

  it('says nothing of an ignored directive when none was ignored', async () => {
    expect(cacheStatus(await get(''))).toMatch(/^etagere; hit; ttl=\d+$/);
    expect(cacheStatus(await get('', { 'if-none-match': etag }))).toMatch(/^etagere; hit; ttl=\d+$/);
  });

  it('hostile: max-age=0 beside a conditional no-cache still revalidates', async () => {
    const before = upstreamCalls();
    const answer = await get('', { 'cache-control': 'no-cache, max-age=0', pragma: 'no-cache', 'if-none-match': etag });
    expect(cacheStatus(answer)).toMatch(/^etagere; fwd=request; fwd-status=304\b/);
    expect(upstreamCalls()).toBe(before + 1);
  });

  it('hostile: If-Match and If-Unmodified-Since do not waive no-cache (only If-None-Match and If-Modified-Since do)', async () => {
    const before = upstreamCalls();
    const answer = await get('', { 'cache-control': 'no-cache', 'if-match': etag, 'if-unmodified-since': lastModified });
    expect(cacheStatus(answer)).toMatch(/^etagere; fwd=request\b/);
    expect(upstreamCalls()).toBe(before + 1);
  });

  it('honor: every no-cache goes upstream, conditional or not', async () => {
    const before = upstreamCalls();
    expect(cacheStatus(await get('/honor', FETCH_NO_CACHE))).toMatch(/^etagere; fwd=request\b/);
    expect(cacheStatus(await get('/honor', { ...FETCH_NO_CACHE, 'if-none-match': etag }))).toMatch(/^etagere; fwd=request\b/);
    expect(upstreamCalls()).toBe(before + 2);
  });

  it('ignore: every no-cache is ignored, conditional or not, and Cache-Status says so', async () => {
    const before = upstreamCalls();
    const plain = await get('/ignore', FETCH_NO_CACHE);
    expect(plain.status).toBe(200);
    expect(cacheStatus(plain)).toMatch(new RegExp(`^etagere; hit; ttl=\\d+; ${IGNORED}$`));
    const conditional = await get('/ignore', { ...FETCH_NO_CACHE, 'if-none-match': etag });
    expect(conditional.status).toBe(304);
    expect(cacheStatus(conditional)).toContain(IGNORED);
    expect(upstreamCalls()).toBe(before);
  });
});
