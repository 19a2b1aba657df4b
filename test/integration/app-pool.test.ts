/**
 * GitHub App installations as pool members, against the fake
 * upstream's Apps. An App with two installations serves pooled consumers over both installations'
 * tokens (the fake counts requests by installation; /admin/tokens names `<app>-<id>`); tokens are
 * re-minted across a short expiry with 0 failed requests under load; a suspended or uninstalled
 * installation drops out while the others carry on (its 401s in flight are retried); with
 * `installations: all` a new installation joins; static tokens, a tokens file and an App compose
 * without dropping each other's members; an App-only pool is not ready before its first member
 * and a wrong key is a clear error line, a metric and a 503 JSON; and neither an installation
 * token, a JWT nor the private key reaches a log line, /metrics, /admin or an error body.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeInstallationInput, type FakeUpstream, type FakeUpstreamOptions } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import type { AppTiming } from '../../src/pool/members/app-members.js';
import { testAppKeys } from '../helpers/apps.js';
import { SECTION_MARK } from '../helpers/capture.js';
import { get, post } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { scanForSecrets } from '../helpers/secrets-scan.js';
import { testSecret } from '../helpers/secrets.js';

const APP_ID = 77001;
const keys = testAppKeys('integration/app-pool');
const wrongKeys = testAppKeys('integration/app-pool wrong key');
const STATIC = {
  dana: testSecret('app-pool static token (dana)', 'app_pool_static_token_dana_71c2'),
  erin: testSecret('app-pool file token (erin)', 'app_pool_file_token_erin_82d3'),
};
const ORG = { id: 1001, account: 'etagere-org' };
const ALICE = { id: 1002, account: 'alice' };
const OCTOCAT = { id: 1003, account: 'octocat' };

const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close();
  for (const fake of fakes.splice(0)) await fake.close();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function fakeWith(installations: FakeInstallationInput[], opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(`${STATIC.dana}@dana:public_repo,${STATIC.erin}@erin:public_repo`),
    tokenLimit: 100_000,
    apps: [{ id: APP_ID, slug: 'ci-app', publicKey: keys.publicKey, installations }],
    ...opts,
  });
  fakes.push(fake);
  return fake;
}

interface AppPool {
  installations?: 'all' | number[];
  key?: string;
  appId?: number;
  tokens?: Array<{ name: string; value: string }>;
  tokensFile?: string;
}

/** A proxy whose pool is the App `ci-app` (and the given tokens), in front of the fake's API. */
async function proxyWith(fake: FakeUpstream, pool: AppPool = {}, timing: AppTiming = {}): Promise<TestProxy> {
  const raw = resolveSecrets(
    {
      upstreams: [{ name: 'github', prefix: '/', url: fake.apiUrl, token_pool: true, cache: { policy: 'max-age' } }],
      pool: {
        apps: [
          {
            name: 'ci-app',
            app_id: pool.appId ?? APP_ID,
            private_key: pool.key ?? keys.privateKey,
            installations: pool.installations ?? [ORG.id, ALICE.id],
          },
        ],
        ...(pool.tokens === undefined ? {} : { tokens: pool.tokens }),
        ...(pool.tokensFile === undefined ? {} : { tokens_file: pool.tokensFile }),
      },
    },
    {},
  );
  const proxy = await startTestProxy(raw, { appTiming: timing });
  proxies.push(proxy);
  return proxy;
}

interface TokenRow {
  name: string;
  state: string;
  limit: number | null;
  used: number | null;
}

async function rows(proxy: TestProxy): Promise<TokenRow[]> {
  return (JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: TokenRow[] }).tokens;
}
const names = async (proxy: TestProxy): Promise<string> => (await rows(proxy)).map((row) => row.name).join(',');
const metricsOf = async (proxy: TestProxy): Promise<string> => (await get(`${proxy.adminUrl}/metrics`)).body;
const byInstallation = (fake: FakeUpstream, id: number): number => fake.stats().byInstallation[String(id)] ?? 0;
const mints = (fake: FakeUpstream, id: number): number => fake.stats().byPath[`/app/installations/${id}/access_tokens`] ?? 0;

/** Misses (each path once) from `concurrency` loops until stopped: every status, the failures' bodies, the tokens named. */
function startLoad(url: string, concurrency = 6) {
  let stopped = false;
  let seq = 0;
  const statuses: number[] = [];
  const failures: string[] = [];
  const tokens = new Map<string, number>();
  const loops = Array.from({ length: concurrency }, async () => {
    while (!stopped) {
      const answer = await get(`${url}/users/octocat?n=${seq++}`);
      statuses.push(answer.status);
      const token = String(answer.headers['x-etagere-token'] ?? '');
      tokens.set(token, (tokens.get(token) ?? 0) + 1);
      if (answer.status !== 200) failures.push(`${answer.status} ${answer.body.slice(0, 200)}`);
    }
  });
  return {
    statuses,
    failures,
    tokens,
    async answered(count: number): Promise<void> {
      const target = statuses.length + count;
      await until(() => statuses.length >= target, 20_000, `${count} more answers`);
    },
    async stop(): Promise<void> {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

describe('GitHub App installations in the pool', () => {
  it('an App with 2 installations serves pooled consumers over both installations, named <app>-<installation id>', async () => {
    const fake = await fakeWith([ORG, ALICE]);
    const proxy = await proxyWith(fake);
    // Minted and probed before the proxy listens: their numbers are known.
    const members = await rows(proxy);
    expect(members.map((row) => [row.name, row.state, row.limit])).toEqual([
      ['ci-app-1001', 'ok', 100_000],
      ['ci-app-1002', 'ok', 100_000],
    ]);
    expect((await get(`${proxy.adminUrl}/readyz`)).status).toBe(200);

    const load = startLoad(proxy.url);
    await load.answered(120);
    await load.stop();
    expect(load.failures).toEqual([]);
    expect(byInstallation(fake, ORG.id)).toBeGreaterThan(10);
    expect(byInstallation(fake, ALICE.id)).toBeGreaterThan(10);
    expect([...load.tokens.keys()].sort()).toEqual(['ci-app-1001', 'ci-app-1002']);
    expect(fake.stats().byCredential['ci-app[bot]']).toBe(byInstallation(fake, ORG.id) + byInstallation(fake, ALICE.id));
    // Each installation's budget is learnt like any token's.
    for (const row of await rows(proxy)) expect(row.used).toBeGreaterThan(0);

    const metrics = await metricsOf(proxy);
    expect(metrics).toContain('etagere_app_token_mints_total{app="ci-app",result="ok"} 2');
    expect(metrics).toContain('etagere_app_installations{app="ci-app"} 2');
    expect(metrics).toContain('etagere_token_remaining{token="ci-app-1001"}');
    const minted = proxy.logs().filter((line) => line.msg === 'installation token minted');
    expect(minted.map((line) => [line.app, line.installation])).toEqual(
      expect.arrayContaining([
        ['ci-app', 1001],
        ['ci-app', 1002],
      ]),
    );

    // Hostile: an App-only endpoint answers 401 to a good installation token. That 401 is about the
    // request: it goes to the client, nothing is re-minted and no member leaves.
    const before = mints(fake, ORG.id) + mints(fake, ALICE.id);
    const appOnly = await get(`${proxy.url}/app`);
    expect(appOnly.status).toBe(401);
    expect(JSON.parse(appOnly.body)).toMatchObject({ message: expect.any(String), documentation_url: expect.any(String) });
    expect(mints(fake, ORG.id) + mints(fake, ALICE.id)).toBe(before);
    expect(await names(proxy)).toBe('ci-app-1001,ci-app-1002');
  }, 30_000);

  it('re-mints the tokens across a short expiry under load with 0 failed requests; each installation keeps its budget', async () => {
    const fake = await fakeWith([ORG, ALICE], { installationTokenSeconds: 2 });
    const proxy = await proxyWith(fake);
    const load = startLoad(proxy.url);
    // Each installation's token is replaced at half its lifetime: three tokens each, two of them re-mints.
    await until(() => mints(fake, ORG.id) >= 3 && mints(fake, ALICE.id) >= 3, 20_000, 'three tokens per installation');
    await load.answered(60);
    await load.stop();
    expect(load.failures).toEqual([]);
    expect(load.statuses.length).toBeGreaterThan(100);
    const after = await rows(proxy);
    expect(after.map((row) => [row.name, row.state])).toEqual([
      ['ci-app-1001', 'ok'],
      ['ci-app-1002', 'ok'],
    ]);
    // The budget is the installation's: a refresh is an update of the member, not a new unseen one.
    expect(after.every((row) => (row.used ?? 0) > 10)).toBe(true);
    expect(proxy.logs().filter((line) => line.msg === 'installation token refreshed').length).toBeGreaterThanOrEqual(4);
    expect(await metricsOf(proxy)).toMatch(/etagere_app_token_mints_total\{app="ci-app",result="ok"\} ([6-9]|\d{2,})\n/);
  }, 40_000);

  it('a suspended and an uninstalled installation drop out while the other carries on; their 401s in flight are retried', async () => {
    const fake = await fakeWith([ORG, ALICE, OCTOCAT], { latencyMs: 5 });
    const proxy = await proxyWith(fake, { installations: [ORG.id, ALICE.id, OCTOCAT.id] });
    const load = startLoad(proxy.url, 8);
    await load.answered(60);
    expect(byInstallation(fake, ALICE.id)).toBeGreaterThan(0);
    expect(byInstallation(fake, OCTOCAT.id)).toBeGreaterThan(0);

    // Suspended: its tokens answer 401 at once, and minting is refused (403).
    await post(`${fake.url}/__fake/installations/${ALICE.id}`, { suspended: true });
    await until(async () => (await names(proxy)) === 'ci-app-1001,ci-app-1003', 15_000, 'the suspended installation to leave');
    // Uninstalled: 401, and minting is 404.
    expect((await fetch(`${fake.url}/__fake/installations/${OCTOCAT.id}`, { method: 'DELETE' })).status).toBe(200);
    await until(async () => (await names(proxy)) === 'ci-app-1001', 15_000, 'the uninstalled installation to leave');

    await load.answered(40);
    const [aliceAt, octocatAt, orgAt] = [byInstallation(fake, ALICE.id), byInstallation(fake, OCTOCAT.id), byInstallation(fake, ORG.id)];
    await load.answered(100);
    await load.stop();
    expect(byInstallation(fake, ALICE.id)).toBe(aliceAt);
    expect(byInstallation(fake, OCTOCAT.id)).toBe(octocatAt);
    expect(byInstallation(fake, ORG.id)).toBeGreaterThan(orgAt);
    // No consumer saw a 401 or any failure: a 401 met in flight re-minted, found the installation revoked, and went to another token.
    expect(load.failures).toEqual([]);
    expect(fake.stats().byStatus['401']).toBeGreaterThan(0);

    const dropped = proxy.logs().filter((line) => typeof line.msg === 'string' && line.msg.endsWith(': dropped'));
    expect(dropped.map((line) => line.installation).sort()).toEqual([ALICE.id, OCTOCAT.id]);
    for (const line of dropped) expect(line).toMatchObject({ level: 'warn', app: 'ci-app', kind: 'installation' });
    const metrics = await metricsOf(proxy);
    expect(metrics).toContain('etagere_app_token_mints_total{app="ci-app",result="revoked"} 2');
    expect(metrics).toContain('etagere_app_installations{app="ci-app"} 1');
    // A revoked installation is not a dead token: no 401 was confirmed on a member still in the pool.
    expect(metrics).not.toMatch(/etagere_token_events_total\{token="ci-app-1001",event="dead"\}/);
  }, 60_000);

  it('with installations: all, a new installation joins at the next listing and takes requests', async () => {
    const fake = await fakeWith([ORG]);
    const proxy = await proxyWith(fake, { installations: 'all' }, { relistIntervalMs: 150 });
    expect(await names(proxy)).toBe('ci-app-1001');
    const load = startLoad(proxy.url);
    await load.answered(30);
    await post(`${fake.url}/__fake/installations`, { app: APP_ID, id: OCTOCAT.id, account: 'octocat' });
    await until(async () => (await names(proxy)) === 'ci-app-1001,ci-app-1003', 10_000, 'the new installation to join');
    // Probed as it joined: its numbers are known.
    await until(async () => (await rows(proxy)).find((row) => row.name === 'ci-app-1003')?.limit === 100_000, 5_000, 'its probe');
    await until(() => byInstallation(fake, OCTOCAT.id) > 5, 15_000, 'requests on the new installation');
    await load.stop();
    expect(load.failures).toEqual([]);
    const metrics = await metricsOf(proxy);
    expect(metrics).toMatch(/etagere_app_installation_lists_total\{app="ci-app",result="ok"\} \d+/);
    expect(metrics).toContain('etagere_app_installations{app="ci-app"} 2');
  }, 40_000);

  it('SIGHUP lists the installations again at once (between the 5-minute listings)', async () => {
    const fake = await fakeWith([ORG]);
    const proxy = await proxyWith(fake, { installations: 'all' });
    await post(`${fake.url}/__fake/installations`, { app: APP_ID, id: ALICE.id, account: 'alice' });
    const outcome = await proxy.reloadTokens('signal');
    expect(outcome.result).toBe('skipped'); // no tokens file: only the Apps had something to do
    await until(async () => (await names(proxy)) === 'ci-app-1001,ci-app-1002', 10_000, 'the listing SIGHUP asked for');
    expect(proxy.logs().some((line) => line.msg === 'GitHub Apps: listing installations again' && line.trigger === 'signal')).toBe(true);
  });

  it('static tokens, a tokens file and an App together: a file reload keeps the App members, a re-mint keeps the tokens', async () => {
    const fake = await fakeWith([ORG], { installationTokenSeconds: 2 });
    const dir = mkdtempSync(join(tmpdir(), 'etagere-app-pool-'));
    dirs.push(dir);
    const file = join(dir, 'tokens');
    writeFileSync(file, '');
    const proxy = await proxyWith(fake, { installations: [ORG.id], tokens: [{ name: 'dana', value: STATIC.dana }], tokensFile: file });
    expect(await names(proxy)).toBe('dana,ci-app-1001');
    const load = startLoad(proxy.url);
    await load.answered(60);
    expect(fake.stats().byCredential.dana).toBeGreaterThan(0);
    expect(byInstallation(fake, ORG.id)).toBeGreaterThan(0);

    writeFileSync(file, `erin=${STATIC.erin}\n`);
    const outcome = await proxy.reloadTokens('signal');
    // The reload tells of the tokens only; the App's member stays as it was.
    expect(outcome).toEqual({ result: 'ok', change: { added: ['erin'], removed: [], updated: [], kept: ['dana'] } });
    expect(await names(proxy)).toBe('dana,erin,ci-app-1001');

    // The App's next re-mint changes only its own member.
    const minted = mints(fake, ORG.id);
    await until(() => mints(fake, ORG.id) > minted + 1, 10_000, 'two re-mints');
    expect(await names(proxy)).toBe('dana,erin,ci-app-1001');
    await load.answered(90);
    await load.stop();
    expect(load.failures).toEqual([]);
    expect(fake.stats().byCredential.erin).toBeGreaterThan(0);
    expect([...load.tokens.keys()].sort()).toEqual(['ci-app-1001', 'dana', 'erin']);
  }, 40_000);

  it('an App-only pool is not ready before its first token; the member joins once minting works, and serves', async () => {
    const fake = await fakeWith([ORG], {
      faults: [{ kind: 'status', status: 503, path: `/app/installations/${ORG.id}/access_tokens` }],
    });
    const proxy = await proxyWith(fake, { installations: [ORG.id] }, { retryMs: 100 });
    expect(await names(proxy)).toBe('');
    expect((await get(`${proxy.adminUrl}/readyz`)).status).toBe(503);
    const early = await get(`${proxy.url}/users/octocat`);
    expect(early.status).toBe(503);
    expect(JSON.parse(early.body)).toMatchObject({ message: expect.any(String), documentation_url: expect.any(String) });
    expect(await metricsOf(proxy)).toMatch(/etagere_app_token_mints_total\{app="ci-app",result="error"\} [1-9]/);

    expect((await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' })).status).toBe(200);
    await until(async () => (await get(`${proxy.adminUrl}/readyz`)).status === 200, 10_000, 'readiness after the first mint');
    expect(await names(proxy)).toBe('ci-app-1001');
    expect((await get(`${proxy.url}/users/octocat?after=1`)).status).toBe(200);
  }, 30_000);

  it.each([
    ['a key that is not the App’s', { key: wrongKeys.privateKey }, /the App JWT was refused/],
    ['an unknown App', { appId: 99_999 }, /no GitHub App has this app_id/],
  ])('hostile: %s is an error line and a metric naming the App; the proxy stays unready and answers 503 JSON', async (_name, pool, why) => {
    const fake = await fakeWith([ORG]);
    const proxy = await proxyWith(fake, { installations: 'all', ...pool });
    const refused = proxy.logs().filter((line) => line.level === 'error' && line.app === 'ci-app');
    expect(refused.length).toBeGreaterThan(0);
    expect(String(refused[0]!.msg)).toMatch(why);
    expect(refused[0]).toMatchObject({ kind: 'app', installation: null });
    expect(await metricsOf(proxy)).toContain('etagere_app_installation_lists_total{app="ci-app",result="refused"} 1');
    expect((await get(`${proxy.adminUrl}/readyz`)).status).toBe(503);
    const answer = await get(`${proxy.url}/users/octocat`);
    expect(answer.status).toBe(503);
    expect(Object.keys(JSON.parse(answer.body) as object).sort()).toEqual(['documentation_url', 'message']);
  });
});

describe('the secrets of GitHub Apps', () => {
  it('neither an installation token, a JWT nor the private key reaches a log line, /metrics, /admin or an error body', async () => {
    // Every credential the proxy sends (installation tokens, JWTs), seen on undici's diagnostics channel.
    const sent = new Set<string>();
    const onRequest = (message: unknown): void => {
      const headers = (message as { request: { headers?: unknown } }).request.headers;
      if (!Array.isArray(headers)) return;
      for (let i = 0; i + 1 < headers.length; i += 2) {
        if (String(headers[i]).toLowerCase() === 'authorization') sent.add(String(headers[i + 1]).replace(/^\S+ /, ''));
      }
    };
    subscribe('undici:request:create', onRequest);
    try {
      const fake = await fakeWith([ORG, ALICE], { installationTokenSeconds: 2 });
      const proxy = await proxyWith(fake);
      const errors: string[] = [];
      const load = startLoad(proxy.url);
      await until(() => mints(fake, ORG.id) >= 2, 10_000, 'a re-mint');
      await post(`${fake.url}/__fake/installations/${ALICE.id}`, { suspended: true });
      await until(async () => (await names(proxy)) === 'ci-app-1001', 10_000, 'the suspended installation to leave');
      await load.answered(30);
      // The load runs until four installation tokens went upstream (mints alone do not say they were used).
      await until(
        () => [...sent].filter((value) => value.startsWith('ghs_')).length >= 4,
        10_000,
        'four installation tokens used upstream',
      );
      await load.stop();
      errors.push(...load.failures, (await get(`${proxy.url}/app`)).body, (await get(`${proxy.url}/app/installations`)).body);
      const wrong = await proxyWith(fake, { key: wrongKeys.privateKey });
      errors.push((await get(`${wrong.url}/users/octocat`)).body);

      const installationTokens = [...sent].filter((value) => value.startsWith('ghs_'));
      const jwts = [...sent].filter((value) => value.startsWith('eyJ'));
      expect(installationTokens.length).toBeGreaterThanOrEqual(4);
      expect(jwts.length).toBeGreaterThanOrEqual(2);
      const admin = async (app: TestProxy): Promise<string> =>
        (
          await Promise.all(
            ['/metrics', '/admin/tokens', '/admin/status', '/admin/consumers', '/readyz', '/'].map((path) => get(`${app.adminUrl}${path}`)),
          )
        )
          .map((answer) => `${JSON.stringify(answer.headers)}\n${answer.body}`)
          .join('\n');
      const dir = mkdtempSync(join(tmpdir(), 'etagere-app-pool-scan-'));
      dirs.push(dir);
      writeFileSync(
        join(dir, 'capture.txt'),
        [proxy, wrong].map((app, index) => `${SECTION_MARK}log ${index}\n${app.logText()}${SECTION_MARK}admin ${index}\n`).join('') +
          `${SECTION_MARK}errors\n${errors.join('\n')}\n${SECTION_MARK}admin answers\n${await admin(proxy)}\n${await admin(wrong)}\n`,
      );
      const secrets = [
        ...installationTokens.map((value, index) => ({ name: `installation token #${index + 1}`, value })),
        ...jwts.map((value, index) => ({ name: `App JWT #${index + 1}`, value })),
        ...[...keys.secretLines, ...wrongKeys.secretLines].map((value, index) => ({ name: `private key line #${index + 1}`, value })),
      ];
      expect(scanForSecrets(dir, secrets).hits).toEqual([]);
    } finally {
      unsubscribe('undici:request:create', onRequest);
    }
  }, 40_000);
});
