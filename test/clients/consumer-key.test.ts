/**
 * Real clients holding a consumer key where they would hold a GitHub token: PyGithub's
 * `Github(login_or_token=<key>)` (sends `Authorization: token <key>`) and `Github(<key>, "")`
 * (Basic, the key as the user, running pygithub_consumer.py beside this file), and Octokit's
 * `auth: <key>` and a `hook` that sets X-Etagere-Key. Each is served from the pool as its consumer,
 * and the fake's counters show that every request it saw carried a pool token: a key that reached
 * it would be counted as a token it does not know.
 *
 * The PyGithub part is skipped, saying why, where no python3 here can `import github`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Octokit } from '@octokit/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { clientEnv, expectAllThroughProxy, ghEnv, probe, runClient } from '../helpers/clients.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { counterSum } from '../helpers/metrics-text.js';

const SCRIPT = fileURLToPath(new URL('./pygithub_consumer.py', import.meta.url));
const PYTHON_ENV = clientEnv({ PYTHONNOUSERSITE: '1', PYTHONDONTWRITEBYTECODE: '1' });
const PYTHON = ['/usr/bin/python3', 'python3'].find((candidate) => probe(candidate, ['-c', 'import github'], PYTHON_ENV));
if (PYTHON === undefined)
  process.stderr.write(
    'PyGithub consumer-key test skipped: no python3 here can `import github` (apt-get install python3-github; tried /usr/bin/python3, python3)\n',
  );

const CURL = ['/usr/bin/curl', 'curl'].find((candidate) => probe(candidate, ['--version']));
const GH = ['/usr/bin/gh', 'gh'].find((candidate) => probe(candidate, ['--version']));
if (CURL === undefined) process.stderr.write('curl consumer-key test skipped: curl is not installed (apt-get install curl)\n');
if (GH === undefined) process.stderr.write('gh consumer-key test skipped: gh is not installed (apt-get install gh)\n');

const POOL = { one: 'consumer_clients_pool_token_one', two: 'consumer_clients_pool_token_two' };
const KEYS = {
  pygithub: testSecret('consumer-key clients: PyGithub key', 'pygithub_consumer_key_4d8e1f'),
  octokit: testSecret('consumer-key clients: Octokit key', 'octokit_consumer_key_9b3c7a'),
  cli: testSecret('consumer-key clients: curl and gh key', 'cli_consumer_key_2f6b0e5d'),
};
const POOL_LOGINS = ['bob', 'carol'];
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

let fake: FakeUpstream;
let proxy: TestProxy;
let orgRepos: number;

beforeAll(async () => {
  fake = await startFakeUpstream({ tokens: parseTokenSpec(`${POOL.one}@bob:public_repo,${POOL.two}@carol:public_repo`) });
  proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
    pool: {
      tokens: [
        { name: 'one', value: POOL.one },
        { name: 'two', value: POOL.two },
      ],
    },
    consumers: {
      enabled: true,
      keys: [
        { name: 'pygithub', value: KEYS.pygithub },
        { name: 'octokit', value: KEYS.octokit },
        { name: 'cli', value: KEYS.cli },
      ],
    },
  });
  const org = (await (await fetch(`${fake.url}/orgs/etagere-org`)).json()) as { public_repos: number };
  orgRepos = org.public_repos;
});
afterAll(async () => {
  await proxy?.close();
  await fake?.close();
});

/** Requests each consumer made so far, from /metrics. */
async function consumerRequests(name: string): Promise<number> {
  const text = (await get(`${proxy.adminUrl}/metrics`)).body;
  return counterSum(text, 'etagere_consumer_requests_total', { consumer: name }) ?? 0;
}

describe.skipIf(PYTHON === undefined)('PyGithub with a consumer key as its token', () => {
  it.each(['login_or_token', 'login_password'])(
    'Github(%s) reads through the pool as its consumer; the key never reaches GitHub',
    async (form) => {
      fake.reset();
      const before = await consumerRequests('pygithub');
      const ran = await runClient(PYTHON!, [SCRIPT, proxy.url, form, 'octocat', 'etagere-org'], {
        ...PYTHON_ENV,
        ETAGERE_KEY: KEYS.pygithub,
      });
      expect(ran.code, `pygithub_consumer.py failed:\n${ran.stderr}`).toBe(0);
      expect(JSON.parse(ran.stdout)).toEqual({ login: 'octocat', repos: orgRepos });
      // The user, the organization, and its repositories two a page: each request counted for the consumer.
      expect((await consumerRequests('pygithub')) - before).toBeGreaterThanOrEqual(2 + Math.ceil(orgRepos / 2));
      expectAllThroughProxy(fake, POOL_LOGINS);
    },
  );
});

describe('Octokit with a consumer key', () => {
  const forms: Array<[string, (baseUrl: string) => Octokit]> = [
    ['auth: <key>', (baseUrl) => new Octokit({ baseUrl, auth: KEYS.octokit, log: quiet })],
    [
      'a hook that sets X-Etagere-Key',
      (baseUrl) => {
        const octokit = new Octokit({ baseUrl, log: quiet });
        octokit.hook.before('request', (options) => {
          options.headers['x-etagere-key'] = KEYS.octokit;
        });
        return octokit;
      },
    ],
  ];
  it.each(forms)('%s: paginates through the pool as its consumer; the key never reaches GitHub', async (_form, make) => {
    fake.reset();
    const before = await consumerRequests('octokit');
    const octokit = make(proxy.url);
    const repos = await octokit.paginate(octokit.repos.listForOrg, { org: 'etagere-org', per_page: 30 });
    expect(repos).toHaveLength(orgRepos);
    const user = await octokit.users.getByUsername({ username: 'octocat' });
    expect(user.data.login).toBe('octocat');
    expect(['one', 'two']).toContain((user.headers as Record<string, unknown>)['x-etagere-token']);
    expect((await consumerRequests('octokit')) - before).toBe(Math.ceil(orgRepos / 30) + 1);
    expectAllThroughProxy(fake, POOL_LOGINS);
  });

  it('hostile: a wrong key as auth is refused by the proxy with 401, and nothing reaches GitHub', async () => {
    fake.reset();
    const octokit = new Octokit({ baseUrl: proxy.url, auth: `${KEYS.octokit}x`, log: quiet, request: { retries: 0 } });
    await expect(octokit.users.getByUsername({ username: 'octocat' })).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^Bad credentials: .*not sent upstream/),
    });
    expect(fake.stats().total).toBe(0);
  });
});

/**
 * Runs `script` with /bin/sh, the key in $ETAGERE_KEY: the key is never an argument (arguments are
 * captured for the secrets scan).
 */
function shell(script: string, args: readonly string[], env: Record<string, string> = {}) {
  return runClient('/bin/sh', ['-c', script, 'sh', ...args], clientEnv({ ETAGERE_KEY: KEYS.cli, ...env }));
}

describe.skipIf(CURL === undefined)('curl with a consumer key', () => {
  it.each([
    ['-u <key>:', '-u "$ETAGERE_KEY:"'],
    ['-H "Authorization: token <key>"', '-H "Authorization: token $ETAGERE_KEY"'],
    ['-H "X-Etagere-Key: <key>"', '-H "X-Etagere-Key: $ETAGERE_KEY"'],
  ])('%s is served from the pool as its consumer; the key never reaches GitHub', async (_form, option) => {
    fake.reset();
    const before = await consumerRequests('cli');
    const ran = await shell(`exec "$CURL" -q -sS --fail --max-time 10 ${option} "$1"`, [`${proxy.url}/users/octocat`], { CURL: CURL! });
    expect(ran.code, `curl failed: ${ran.stderr}`).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ login: 'octocat' });
    expect((await consumerRequests('cli')) - before).toBe(1);
    expectAllThroughProxy(fake, POOL_LOGINS);
  });
});

describe.skipIf(GH === undefined)('gh api with a consumer key', () => {
  let home: string;
  beforeAll(() => {
    home = mkdtempSync(join(tmpdir(), 'etagere-gh-key-'));
  });
  afterAll(() => {
    if (home !== undefined) rmSync(home, { recursive: true, force: true });
  });

  it.each([
    ['-H "X-Etagere-Key: <key>"', '-H "X-Etagere-Key: $ETAGERE_KEY"'],
    ['-H "Authorization: token <key>"', '-H "Authorization: token $ETAGERE_KEY"'],
  ])('%s paginates through the pool as its consumer; the key never reaches GitHub', async (_form, option) => {
    fake.reset();
    const before = await consumerRequests('cli');
    const url = `${proxy.url}/orgs/etagere-org/repos?per_page=30`;
    const ran = await shell(`exec "$GH" api --paginate ${option} "$1" --jq '.[].id'`, [url], {
      GH: GH!,
      ...ghEnv(home, { GH_HOST: new URL(proxy.url).host }),
    });
    expect(ran.code, `gh failed: ${ran.stderr}`).toBe(0);
    expect(ran.stdout.split('\n').filter((line) => line !== '')).toHaveLength(orgRepos);
    expect((await consumerRequests('cli')) - before).toBe(Math.ceil(orgRepos / 30));
    expectAllThroughProxy(fake, POOL_LOGINS);
  });
});
