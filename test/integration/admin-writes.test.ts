/**
 * Writes on the admin port from a web page in the operator's browser: a `no-cors` fetch can POST
 * `text/plain`, a form or no type at all, never JSON, and it carries the page's Origin and
 * `Sec-Fetch-Site: cross-site`. Each such write is refused (415 or 403, JSON) and marks nothing;
 * `etagere purge`, curl with JSON and the admin address's own origin still purge.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { runCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const HELLO = '/repos/octocat/hello-world';
const PURGE = JSON.stringify({ path: HELLO });

interface Answer {
  status: number;
  value: Record<string, unknown>;
}

async function post(proxy: TestProxy, headers: Record<string, string>, body = PURGE): Promise<Answer> {
  const res = await request(`${proxy.adminUrl}/admin/purge`, { method: 'POST', headers, body });
  return { status: res.statusCode, value: (await res.body.json()) as Record<string, unknown> };
}

async function markedScopes(proxy: TestProxy): Promise<number> {
  const res = await request(`${proxy.adminUrl}/admin/cache/stats`);
  return ((await res.body.json()) as { marked_scopes: number }).marked_scopes;
}

describe('admin writes from a web page in the browser are refused', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let own: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({ upstreams: [{ name: 'github', prefix: '/', url: fake.url }] });
    own = new URL(proxy.adminUrl).origin;
    expect((await get(proxy.url + HELLO)).status).toBe(200);
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  const hostile: Array<[string, Record<string, string>, number]> = [
    ['text/plain (a no-cors fetch)', { 'content-type': 'text/plain;charset=UTF-8' }, 415],
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 415],
    ['a multipart form', { 'content-type': 'multipart/form-data; boundary=x' }, 415],
    ['no Content-Type', {}, 415],
    ['a type that only mentions JSON', { 'content-type': 'text/plain; application/json' }, 415],
    ['JSON from another origin', { 'content-type': 'application/json', origin: 'https://evil.example' }, 403],
    ['JSON from another port of localhost', { 'content-type': 'application/json', origin: 'http://localhost:3000' }, 403],
    ['JSON from Origin null (a sandboxed frame)', { 'content-type': 'application/json', origin: 'null' }, 403],
    ['JSON marked Sec-Fetch-Site: cross-site', { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' }, 403],
    ['JSON marked Sec-Fetch-Site: same-site', { 'content-type': 'application/json', 'sec-fetch-site': 'same-site' }, 403],
    [
      "a browser's no-cors POST as sent",
      {
        'content-type': 'text/plain;charset=UTF-8',
        origin: 'https://evil.example',
        'sec-fetch-site': 'cross-site',
        'sec-fetch-mode': 'no-cors',
      },
      403,
    ],
  ];

  it.each(hostile)('refuses %s, with a JSON error, and marks nothing', async (_what, headers, status) => {
    const answer = await post(proxy, headers);
    expect(answer.status).toBe(status);
    expect(answer.value.message).toEqual(expect.any(String));
    expect(answer.value.documentation_url).toEqual(expect.any(String));
    expect(await markedScopes(proxy)).toBe(0);
  });

  it('refuses a page that rebinds its own name to the admin address, even from its own origin', async () => {
    const port = new URL(proxy.adminUrl).port;
    const answer = await post(proxy, {
      'content-type': 'application/json',
      host: `evil.example:${port}`,
      origin: `http://evil.example:${port}`,
    });
    expect(answer.status).toBe(403);
    expect(await markedScopes(proxy)).toBe(0);
  });

  it("purges with JSON from the admin address's own origin (same-origin)", async () => {
    const answer = await post(proxy, { 'content-type': 'application/json; charset=utf-8', origin: own, 'sec-fetch-site': 'same-origin' });
    expect(answer.status).toBe(200);
    expect(answer.value).toMatchObject({ path: HELLO, marked: 1 });
  });

  it('purges from curl with a JSON body', async () => {
    const { stdout } = await promisify(execFile)('curl', [
      '-sS',
      '-X',
      'POST',
      `${proxy.adminUrl}/admin/purge`,
      '-H',
      'Content-Type: application/json',
      '-d',
      JSON.stringify({ prefix: '/repos/octocat/' }),
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ prefix: '/repos/octocat', upstreams: ['github'] });
  });

  it('purges from etagere purge', { timeout: 30_000 }, async () => {
    const purged = runCli(['purge', '--path', HELLO, '--json', '--admin', proxy.adminUrl]);
    expect((await purged.exited).code).toBe(0);
    expect(JSON.parse(purged.stdout())).toMatchObject({ path: HELLO, upstreams: ['github'] });
  });

  it('still answers reads without a Content-Type', async () => {
    expect((await get(`${proxy.adminUrl}/admin/cache/stats`)).status).toBe(200);
    expect((await get(`${proxy.adminUrl}/healthz`, { origin: 'https://evil.example' })).status).toBe(200);
  });
});
