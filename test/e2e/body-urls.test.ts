/**
 * With zero configuration, API addresses inside JSON bodies point at the
 * proxy (under the name the client used), so clients that navigate by them (PyGithub) stay on it;
 * web addresses stay on GitHub's web. The rewrite is per public base and never stored, and a
 * client's If-None-Match still gets a 304 from the cache.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { rawGet, stringUrlFields, WEB_URL_FIELD } from '../fake-upstream/helpers.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

type Json = Record<string, unknown>;

describe('zero-config proxy: API addresses in bodies point at the proxy', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let port: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec('bu_pool_one@alice:repo') });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: { tokens: [{ name: 'one', value: 'bu_pool_one' }] },
    });
    port = new URL(proxy.url).port;
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('rewrites every API address to the Host the client used, leaves web addresses, and serves hits from one rewrite', async () => {
    const path = '/repos/octocat/hello-world';
    const before = fake.stats().total;
    const first = await rawGet(`${proxy.url}${path}`, { host: `localhost:${port}` });
    expect(first.status).toBe(200);
    const found = stringUrlFields(JSON.parse(first.body));
    expect(found.length).toBeGreaterThan(20);
    for (const [key, url] of found) {
      if (WEB_URL_FIELD.test(key)) expect(url, key).not.toContain(`localhost:${port}`);
      else if (key !== '.license.url' || url !== null) expect(url.startsWith(`http://localhost:${port}/`), `${key}=${url}`).toBe(true);
    }
    expect(first.body).not.toContain(fake.url);
    expect(Number(first.headers['content-length'])).toBe(Buffer.byteLength(first.body));

    // Another name for the same proxy gets its own addresses from the same entry; the first name again gets a hit.
    const other = await rawGet(`${proxy.url}${path}`, { host: `127.0.0.1:${port}` });
    expect(JSON.parse(other.body).url).toBe(`http://127.0.0.1:${port}${path}`);
    expect(String(other.headers['cache-status'])).toContain('hit');
    const again = await rawGet(`${proxy.url}${path}`, { host: `localhost:${port}` });
    expect(again.body).toBe(first.body);
    expect(fake.stats().total).toBe(before + 1);
  });

  it('answers If-None-Match with the ETag the client was given with a 304 from the cache', async () => {
    const path = '/users/octocat';
    const first = await rawGet(`${proxy.url}${path}`, { host: `localhost:${port}` });
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^W\//);
    const before = fake.stats().total;
    const second = await rawGet(`${proxy.url}${path}`, { host: `localhost:${port}`, 'if-none-match': etag });
    expect(second.status).toBe(304);
    expect(second.headers.etag).toBe(etag);
    expect(fake.stats().total).toBe(before);
  });

  it('follows a list through its Link pages and body URLs without leaving the proxy', async () => {
    const base = `http://localhost:${port}`;
    let next: string | undefined = `${base}/orgs/etagere-org/repos?per_page=30`;
    const seen = new Set<number>();
    while (next !== undefined) {
      const page = await rawGet(next, { host: `localhost:${port}` });
      for (const repo of JSON.parse(page.body) as Json[]) {
        seen.add(repo.id as number);
        expect(String(repo.url).startsWith(`${base}/repos/`)).toBe(true);
      }
      next = /<([^>]+)>;\s*rel="next"/.exec(String(page.headers.link ?? ''))?.[1];
      if (next !== undefined) expect(next.startsWith(base)).toBe(true);
    }
    expect(seen.size).toBeGreaterThan(30);
    const owner = await rawGet(`${base}/users/etagere-org`, { host: `localhost:${port}` });
    expect(owner.status).toBe(200);
    expect(fake.stats().byCredential.anonymous ?? 0).toBe(0);
  });

  it('exports what the rewritten bodies weigh', async () => {
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    const weight = /etagere_cache_bytes\{tier="rewritten_bodies"\} (\d+)/.exec(metrics);
    expect(Number(weight?.[1])).toBeGreaterThan(0);
  });

  it('puts no Host that is not a plain host[:port] into a body', async () => {
    const answer = await rawGet(`${proxy.url}/repos/octocat/hello-world`, { host: `bad_name:${port}` });
    if (answer.status === 200) expect(JSON.parse(answer.body).url).toBe(`${fake.url}/repos/octocat/hello-world`);
    else expect(answer.status).toBe(400);
    expect(answer.body).not.toContain('bad_name');
  });
});

describe('rewrite_body_urls is per upstream', () => {
  let scripted: ScriptedUpstream;
  let proxy: TestProxy;
  const body = (base: string): string => JSON.stringify({ url: `${base}/things/1`, note: `${base}/in text` });

  beforeAll(async () => {
    let base = '';
    scripted = await startScriptedUpstream((req, res) => {
      const raw = req.url!.startsWith('/raw');
      res.writeHead(200, {
        'content-type': raw ? 'application/vnd.github.raw' : 'application/json; charset=utf-8',
        'cache-control': 'public, max-age=60',
        etag: '"strong"',
      });
      res.end(body(base));
    });
    base = scripted.url;
    proxy = await startTestProxy({
      upstreams: [
        { name: 'plain', prefix: '/plain', url: scripted.url, strip_prefix: true },
        { name: 'opted', prefix: '/opted', url: scripted.url, strip_prefix: true, rewrite_body_urls: true },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await scripted?.close();
  });

  it('is off by default without the token pool, and on when asked: a strong ETag is then weakened', async () => {
    const plain = await rawGet(`${proxy.url}/plain/things/1`, {});
    expect(plain.body).toBe(body(scripted.url));
    expect(plain.headers.etag).toBe('"strong"');
    const opted = await rawGet(`${proxy.url}/opted/things/1`, {});
    expect(JSON.parse(opted.body).url).toBe(`${proxy.url}/opted/things/1`);
    expect(opted.headers.etag).toBe('W/"strong"');
    const conditional = await rawGet(`${proxy.url}/opted/things/1`, { 'if-none-match': 'W/"strong"' });
    expect(conditional.status).toBe(304);
  });

  it('never rewrites a raw media type', async () => {
    const raw = await rawGet(`${proxy.url}/opted/raw/file`, {});
    expect(raw.body).toBe(body(scripted.url));
  });
});
