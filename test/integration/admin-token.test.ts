/**
 * The admin port beyond loopback: with admin.token, every /admin/* route (bodies, inspect, purge,
 * consumers, quota, tokens, the status page's data) needs `Authorization: Bearer <token>`, while
 * /metrics, /healthz, /readyz and the status page's HTML stay open. Requests come from this
 * machine's non-loopback address when it has one (the admin listener is on 0.0.0.0). The commands
 * (`etagere purge`, `cache`, `quota`) send ETAGERE_ADMIN_TOKEN, and so does curl; `etagere serve`
 * with ADMIN_HOST=0.0.0.0 and no token refuses to start.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { networkInterfaces } from 'node:os';
import { chromium } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { runCli, serveCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const execFileAsync = promisify(execFile);
const POOL_TOKEN = 'demo_token_octocat_repo'; // reads octocat/private-notes
const ADMIN_TOKEN = testSecret('admin token of the admin-token test', 'admin-token-test-7f3a9c1e5b2d');
const PRIVATE = '/repos/octocat/private-notes';

/** An address of this machine that is not loopback (the admin listener is on 0.0.0.0), else loopback. */
function outsideAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const address of list ?? []) if (address.family === 'IPv4' && !address.internal) return address.address;
  return '127.0.0.1';
}

/** Debian's chromium, when installed (the status page test drives it with playwright-core). */
const CHROMIUM = ['chromium', 'chromium-browser']
  .map((name) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim())
  .find((path) => path !== '');

describe('the admin port on 0.0.0.0 with admin.token', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let admin = '';

  const call = async (
    method: 'GET' | 'POST',
    path: string,
    headers: Record<string, string> = {},
    body?: unknown,
  ): Promise<{ status: number; text: string; authenticate: string | undefined }> => {
    const res = await request(admin + path, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const authenticate = res.headers['www-authenticate'];
    return {
      status: res.statusCode,
      text: await res.body.text(),
      authenticate: typeof authenticate === 'string' ? authenticate : undefined,
    };
  };
  const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` };

  beforeAll(async () => {
    fake = await startFakeUpstream();
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: { tokens: [{ name: 'octo', value: POOL_TOKEN }] },
      consumers: {
        enabled: true,
        keys: [{ name: 'web', value: testSecret('consumer key of the admin-token test', 'admin-token-test-key-0042') }],
      },
      admin: { host: '0.0.0.0', port: 0, token: ADMIN_TOKEN },
    });
    admin = `http://${outsideAddress()}:${new URL(proxy.adminUrl).port}`;
    const stored = await get(proxy.url + PRIVATE, { 'x-etagere-key': 'admin-token-test-key-0042' });
    expect(stored.status).toBe(200);
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('hostile: without the token, no route under /admin answers anything but 401', async () => {
    const routes: Array<['GET' | 'POST', string, unknown?]> = [
      ['GET', `/admin/cache?path=${PRIVATE}&body=1`],
      ['GET', '/admin/cache/stats'],
      ['POST', '/admin/purge', { prefix: '/' }],
      ['GET', '/admin/tokens'],
      ['GET', '/admin/consumers'],
      ['GET', '/admin/quota'],
      ['GET', '/admin/status'],
      ['GET', '/admin/unknown'],
    ];
    for (const [method, path, body] of routes) {
      const answer = await call(method, path, {}, body);
      expect(answer.status, `${method} ${path}`).toBe(401);
      expect(JSON.parse(answer.text)).toMatchObject({ message: expect.stringMatching(/^Requires the admin token/) });
      expect(answer.text).not.toContain('private-notes');
      expect(answer.authenticate).toMatch(/^Bearer realm="etagere admin"/);
    }
  });

  it('hostile: a wrong token, one of the wrong length, another scheme or the token in the query get 401 too', async () => {
    const attempts: Array<[Record<string, string>, string, RegExp]> = [
      [{ authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}X` }, '', /^Bad admin token$/],
      [{ authorization: `Bearer ${ADMIN_TOKEN}${ADMIN_TOKEN}` }, '', /^Bad admin token$/],
      [{ authorization: 'Bearer x' }, '', /^Bad admin token$/],
      [{ authorization: `token ${ADMIN_TOKEN}` }, '', /as Authorization: Bearer/],
      [{ authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` }, '', /as Authorization: Bearer/],
      [{ 'x-etagere-key': ADMIN_TOKEN }, '', /^Requires the admin token/],
      [{}, `&token=${ADMIN_TOKEN}`, /not in the query/],
      [{}, `&access_token=${ADMIN_TOKEN}`, /not in the query/],
    ];
    for (const [headers, query, message] of attempts) {
      const answer = await call('GET', `/admin/cache?path=${PRIVATE}&body=1${query}`, headers);
      expect(answer.status).toBe(401);
      expect((JSON.parse(answer.text) as { message: string }).message).toMatch(message);
      expect(answer.text).not.toContain(ADMIN_TOKEN);
    }
  });

  it('hostile: an unauthenticated purge of "/" changes nothing: the private entry is still a hit', async () => {
    expect((await call('POST', '/admin/purge', {}, { prefix: '/' })).status).toBe(401);
    const after = await get(proxy.url + PRIVATE, { 'x-etagere-key': 'admin-token-test-key-0042' });
    expect(after.headers['cache-status']).toMatch(/; hit/);
  });

  it('keeps /metrics, /healthz, /readyz and the status page open: probes and Prometheus need no secret', async () => {
    for (const path of ['/metrics', '/healthz', '/readyz', '/']) expect((await call('GET', path)).status, path).toBe(200);
    expect((await call('GET', '/metrics')).text).toContain('etagere_requests_total');
  });

  it('answers every route to the right token, from the outside address', async () => {
    const inspect = await call('GET', `/admin/cache?path=${PRIVATE}&body=1`, bearer);
    expect(inspect.status).toBe(200);
    expect(inspect.text).toContain('private-notes');
    for (const path of ['/admin/cache/stats', '/admin/tokens', '/admin/consumers', '/admin/quota', '/admin/status'])
      expect((await call('GET', path, bearer)).status, path).toBe(200);
    expect((await call('POST', '/admin/purge', bearer, { path: '/repos/octocat/nothing-here' })).status).toBe(200);
  });

  it('the commands send ETAGERE_ADMIN_TOKEN; without it they say what to set', async () => {
    const run = async (args: string[], env: Record<string, string | undefined>) => {
      const cli = runCli([...args, '--admin', admin], { ETAGERE_CONFIG: undefined, ...env });
      const { code } = await cli.exited;
      return { code, out: cli.stdout(), err: cli.stderr() };
    };
    const withToken = { ETAGERE_ADMIN_TOKEN: ADMIN_TOKEN };
    const stats = await run(['cache', 'stats'], withToken);
    expect(stats.code, stats.err).toBe(0);
    expect(stats.out).toMatch(/entr(y|ies) in L1/);
    const purged = await run(['purge', '--path', '/repos/octocat/nothing-here'], withToken);
    expect(purged.code, purged.err).toBe(0);
    const quota = await run(['quota'], withToken);
    expect(quota.code, quota.err).toBe(0);
    const refused = await run(['cache', 'inspect', PRIVATE, '--body'], { ETAGERE_ADMIN_TOKEN: undefined });
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/answered 401: Requires the admin token.*ETAGERE_ADMIN_TOKEN/);
    expect(refused.out).not.toContain('private-notes');
  });

  it.skipIf(spawnSync('curl', ['--version']).status !== 0)('curl with the bearer token reads; without it, 401', async () => {
    // Asynchronously: the proxy answering curl runs in this process.
    const curl = async (...args: string[]): Promise<string> =>
      (await execFileAsync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', ...args], { encoding: 'utf8' })).stdout;
    expect(await curl(`${admin}/admin/tokens`)).toBe('401');
    expect(await curl('-H', `Authorization: Bearer ${ADMIN_TOKEN}`, `${admin}/admin/tokens`)).toBe('200');
    expect(await curl('-H', 'Content-Type: application/json', '-d', '{"prefix":"/"}', `${admin}/admin/purge`)).toBe('401');
  });

  it.skipIf(CHROMIUM === undefined)(
    'the status page asks for the token in a browser, then shows the data; a wrong one shows nothing',
    async () => {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      try {
        const page = await browser.newPage();
        await page.goto(`${admin}/`);
        await page.waitForSelector('#login:not([hidden])', { timeout: 10_000 });
        expect(await page.textContent('#updated')).toBe('the admin port needs its token (admin.token)');
        await page.fill('#token', 'not-the-admin-token-at-all');
        await page.click('#login button');
        await page.waitForFunction("document.getElementById('updated').textContent === 'wrong admin token'", undefined, {
          timeout: 10_000,
        });
        expect(await page.$$('#tokens tbody tr')).toHaveLength(0);
        await page.fill('#token', ADMIN_TOKEN);
        await page.click('#login button');
        await page.waitForSelector('#tokens tbody tr[data-token="octo"]', { timeout: 10_000 });
        expect(await page.isHidden('#login')).toBe(true);
        expect(await page.content()).not.toContain(POOL_TOKEN);
      } finally {
        await browser.close();
      }
    },
    30_000,
  );

  it.skipIf(CHROMIUM === undefined)(
    "the status page drops an answer to a wrong token that comes after the right token's: the data stays, the login stays hidden",
    async () => {
      const wrong = 'not-the-admin-token-at-all';
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      try {
        const page = await browser.newPage();
        let releaseWrong!: () => void;
        const rightShown = new Promise<void>((resolve) => (releaseWrong = resolve));
        const withWrong = (headers: Record<string, string>): boolean => headers.authorization === `Bearer ${wrong}`;
        // Counts the page's status fetches, and their answers once the page has handled them.
        await page.addInitScript(() => {
          const scope = globalThis as unknown as { fetch: typeof fetch; statusFetches: { asked: number; handled: number } };
          const counts = { asked: 0, handled: 0 };
          scope.statusFetches = counts;
          const original = scope.fetch.bind(scope);
          scope.fetch = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
            const answer = original(input, init);
            if (String(input).includes('/admin/status')) {
              counts.asked++;
              const handled = (): void => void setTimeout(() => counts.handled++, 0);
              answer.then(handled, handled);
            }
            return answer;
          };
        });
        // The answers to the wrong token are held until the right token's data is on the page.
        await page.route('**/admin/status', async (route) => {
          if (withWrong(route.request().headers())) await rightShown;
          await route.continue();
        });
        await page.goto(`${admin}/`);
        await page.waitForSelector('#login:not([hidden])', { timeout: 10_000 });
        await page.fill('#token', wrong);
        await page.click('#login button');
        await page.fill('#token', ADMIN_TOKEN);
        await page.click('#login button');
        await page.waitForSelector('#tokens tbody tr[data-token="octo"]', { timeout: 10_000 });
        const late = page.waitForResponse((res) => withWrong(res.request().headers()), { timeout: 10_000 });
        releaseWrong();
        expect((await late).status()).toBe(401);
        await page.waitForFunction(
          () => {
            const counts = (globalThis as unknown as { statusFetches: { asked: number; handled: number } }).statusFetches;
            return counts.handled === counts.asked;
          },
          undefined,
          { timeout: 10_000 },
        );
        expect(await page.isHidden('#login')).toBe(true);
        expect(await page.textContent('#updated')).toMatch(/^updated /);
      } finally {
        await browser.close();
      }
    },
    30_000,
  );
});

describe('etagere serve with the admin port beyond loopback', () => {
  it('hostile: ADMIN_HOST=0.0.0.0 without a token exits 2 with one line naming admin.token', async () => {
    const { cli } = await serveCli({ ADMIN_HOST: '0.0.0.0', ETAGERE_ADMIN_TOKEN: undefined });
    const { code } = await cli.exited;
    expect(code).toBe(2);
    const lines = cli.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/admin\.token: is not set and admin\.host is 0\.0\.0\.0/);
  });
});
