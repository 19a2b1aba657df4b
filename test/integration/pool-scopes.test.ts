/**
 * A pool whose tokens report different OAuth scopes (X-OAuth-Scopes) is not equivalent, whatever
 * `pool.equivalent` says: the proxy warns (token names and scopes, never values), gives each token
 * its own cache partition, tries a 404 that a token's scopes explain on a token with the scope,
 * and shows it on /admin/tokens and /admin/status. Tokens with the same scopes stay one partition.
 * A reload that changes a member's scopes changes the pool's equivalence both ways.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, post } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const TOKENS = {
  repo: testSecret('pool-scopes alice repo', 'pool_scopes_alice_repo_7c1e'),
  repo2: testSecret('pool-scopes alice repo second', 'pool_scopes_alice_repo2_8d2f'),
  pub: testSecret('pool-scopes alice public_repo', 'pool_scopes_alice_public_9e3a'),
};
const FAKE_TOKENS = parseTokenSpec(
  `${TOKENS.repo}@alice:repo+read:org,${TOKENS.repo2}@alice:read:org+repo,${TOKENS.pub}@alice:public_repo`,
);

interface TokensAnswer {
  equivalent: boolean;
  equivalent_configured: boolean;
  scopes_differ: boolean;
  scope_groups: Array<{ scopes: string[]; tokens: string[] }>;
  scopes_unchecked: string[];
  tokens: Array<{ name: string; scopes: string[] | null; scopes_from: string }>;
}

const dirs: string[] = [];
const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];

afterEach(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close();
  for (const fake of fakes.splice(0)) await fake.close();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function fake(): Promise<FakeUpstream> {
  const started = await startFakeUpstream({ tokens: FAKE_TOKENS, tokenLimit: 100_000 });
  fakes.push(started);
  return started;
}

function tokensFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-scopes-'));
  dirs.push(dir);
  const file = join(dir, 'tokens');
  writeFileSync(file, text);
  return file;
}

async function proxyWith(upstream: FakeUpstream, pool: Record<string, unknown>, policy = 'max-age'): Promise<TestProxy> {
  const raw = resolveSecrets(
    { upstreams: [{ name: 'github', prefix: '/', url: upstream.url, token_pool: true, cache: { policy } }], pool },
    {},
  );
  const proxy = await startTestProxy(raw);
  proxies.push(proxy);
  return proxy;
}

async function tokensOf(proxy: TestProxy): Promise<TokensAnswer> {
  return JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as TokensAnswer;
}

/** Every token value the test knows, which must appear in no log line and no admin answer. */
function expectNoValues(...texts: string[]): void {
  for (const text of texts) for (const value of Object.values(TOKENS)) expect(text).not.toContain(value);
}

const scopeWarnings = (proxy: TestProxy): Array<Record<string, unknown>> =>
  proxy.logs().filter((line) => String(line.msg).startsWith('pool tokens report different OAuth scopes'));

/** The fake's upstream requests so far for a path (every credential). */
function upstreamCalls(upstream: FakeUpstream, path: string): number {
  const stats = upstream.stats() as { byPath?: Record<string, number> };
  return stats.byPath?.[path] ?? 0;
}

/** A pool of a public_repo token and a repo token, once the proxy serves it as non-equivalent. */
async function mixedScopesPool() {
  const upstream = await fake();
  const proxy = await proxyWith(
    upstream,
    {
      tokens: [
        { name: 'alice-public', value: TOKENS.pub },
        { name: 'alice-repo', value: TOKENS.repo },
      ],
    },
    'revalidate',
  );
  await until(async () => !(await tokensOf(proxy)).equivalent, 10_000, 'the pool served as non-equivalent');
  return { upstream, proxy };
}

describe('pool tokens with the same OAuth scopes', () => {
  it('stay one cache partition: equivalent on /admin/tokens, no warning, one upstream request for repeated reads', async () => {
    const upstream = await fake();
    const proxy = await proxyWith(upstream, {
      tokens: [
        { name: 'alice-repo', value: TOKENS.repo },
        { name: 'alice-repo-2', value: TOKENS.repo2 },
      ],
    });
    const tokens = await tokensOf(proxy);
    expect(tokens).toMatchObject({ equivalent: true, equivalent_configured: true, scopes_differ: false });
    expect(tokens.tokens.map((token) => [token.name, token.scopes, token.scopes_from])).toEqual([
      ['alice-repo', ['read:org', 'repo'], 'x-oauth-scopes'],
      ['alice-repo-2', ['read:org', 'repo'], 'x-oauth-scopes'],
    ]);
    for (let round = 0; round < 4; round++) expect((await get(`${proxy.url}/repos/alice/secret-project`)).status).toBe(200);
    expect(upstreamCalls(upstream, '/repos/alice/secret-project')).toBe(1);
    const inspect = JSON.parse((await get(`${proxy.adminUrl}/admin/cache?path=/repos/alice/secret-project`)).body) as {
      entries: Array<{ partition: string; pool_token?: string }>;
    };
    expect(inspect.entries).toHaveLength(1);
    expect(inspect.entries[0]!.pool_token).toBeUndefined();
    expect(scopeWarnings(proxy)).toEqual([]);
  });
});

describe('pool tokens with different OAuth scopes', () => {
  it('are warned about by name and scopes, served as non-equivalent, and shown on /admin/tokens and /admin/status, never by value', async () => {
    const upstream = await fake();
    const proxy = await proxyWith(upstream, {
      tokens: [
        { name: 'alice-repo', value: TOKENS.repo },
        { name: 'alice-public', value: TOKENS.pub },
      ],
    });
    await until(() => scopeWarnings(proxy).length > 0, 10_000, 'the scope warning');
    const warnings = scopeWarnings(proxy);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.level).toBe('warn');
    expect(warnings[0]!.scopeGroups).toEqual([
      { tokens: ['alice-repo'], scopes: ['read:org', 'repo'] },
      { tokens: ['alice-public'], scopes: ['public_repo'] },
    ]);
    const tokens = await tokensOf(proxy);
    expect(tokens).toMatchObject({
      equivalent: false,
      equivalent_configured: true,
      scopes_differ: true,
      scope_groups: [
        { scopes: ['read:org', 'repo'], tokens: ['alice-repo'] },
        { scopes: ['public_repo'], tokens: ['alice-public'] },
      ],
      scopes_unchecked: [],
    });
    const status = JSON.parse((await get(`${proxy.adminUrl}/admin/status`)).body) as { equivalence: TokensAnswer };
    expect(status.equivalence).toMatchObject({ equivalent: false, scopes_differ: true });
    const page = (await get(`${proxy.adminUrl}/`)).body;
    expect(page).toContain('scopes-differ');
    expectNoValues(proxy.logText(), JSON.stringify(tokens), JSON.stringify(status));
  });

  it('never answer a private repository with one token’s 404 when another token would answer 200', async () => {
    const { proxy } = await mixedScopesPool();
    // Misses (a query each) and revalidations: the pool spreads them over both tokens.
    const statuses: number[] = [];
    for (let round = 0; round < 8; round++) statuses.push((await get(`${proxy.url}/repos/alice/secret-project?n=${round % 4}`)).status);
    expect(statuses).toEqual(Array.from({ length: 8 }, () => 200));
    const inspect = JSON.parse((await get(`${proxy.adminUrl}/admin/cache?path=/repos/alice/secret-project`)).body) as {
      entries: Array<{ status: number; pool_token?: string }>;
    };
    expect(inspect.entries.length).toBeGreaterThan(0);
    for (const entry of inspect.entries) expect(entry).toMatchObject({ status: 200, pool_token: 'alice-repo' });
    // A repository nobody can see is still a 404 (asked of both tokens).
    expect((await get(`${proxy.url}/repos/alice/no-such-repo`)).status).toBe(404);
  });
});

describe('a 404 tried on the token with the scope', () => {
  it('is the answer when that token cannot be had (paused by a secondary limit), not a 429', async () => {
    const { upstream, proxy } = await mixedScopesPool();
    await post(`${upstream.url}/__fake/secondary`, { count: 100, status: 403, retryAfter: 600, token: TOKENS.repo });
    const answers = [];
    for (let round = 0; round < 3; round++) answers.push((await get(`${proxy.url}/repos/alice/secret-project?paused=${round}`)).status);
    expect(answers).toEqual([404, 404, 404]);
  });
});

describe('a reload that changes a member’s scopes', () => {
  it('makes the pool non-equivalent, with a warning, and equivalent again when they agree', async () => {
    const upstream = await fake();
    const file = tokensFile(`b=${TOKENS.repo2}\n`);
    const proxy = await proxyWith(upstream, { tokens: [{ name: 'a', value: TOKENS.repo }], tokens_file: file });
    expect(await tokensOf(proxy)).toMatchObject({ equivalent: true, scopes_differ: false });

    writeFileSync(file, `b=${TOKENS.pub}\n`);
    await proxy.reloadTokens('signal');
    await until(() => scopeWarnings(proxy).length > 0, 10_000, 'the scope warning');
    const differ = await tokensOf(proxy);
    expect(differ).toMatchObject({ equivalent: false, scopes_differ: true });
    expect(differ.tokens.find((token) => token.name === 'b')?.scopes).toEqual(['public_repo']);
    expect(scopeWarnings(proxy)[0]!.scopeGroups).toEqual([
      { tokens: ['a'], scopes: ['read:org', 'repo'] },
      { tokens: ['b'], scopes: ['public_repo'] },
    ]);

    writeFileSync(file, `b=${TOKENS.repo2}\n`);
    await proxy.reloadTokens('signal');
    expect(await tokensOf(proxy)).toMatchObject({ equivalent: true, scopes_differ: false });
    await until(
      () => proxy.logs().some((line) => String(line.msg).startsWith('pool tokens report the same OAuth scopes again')),
      10_000,
      'the agreement logged',
    );
    expect(scopeWarnings(proxy)).toHaveLength(1);
    expectNoValues(proxy.logText(), JSON.stringify(await tokensOf(proxy)));
  });
});

describe('the fake upstream', () => {
  it('sends a token its X-OAuth-Scopes, and a private repository’s 404 its X-Accepted-OAuth-Scopes', async () => {
    const upstream = await fake();
    const pub = await get(`${upstream.url}/repos/alice/secret-project`, { authorization: `token ${TOKENS.pub}` });
    expect(pub.status).toBe(404);
    expect(pub.headers['x-oauth-scopes']).toBe('public_repo');
    expect(pub.headers['x-accepted-oauth-scopes']).toBe('repo');
    const repo = await get(`${upstream.url}/repos/alice/secret-project`, { authorization: `token ${TOKENS.repo}` });
    expect(repo.status).toBe(200);
    expect(repo.headers['x-oauth-scopes']).toBe('repo, read:org');
    expect(repo.headers['x-accepted-oauth-scopes']).toBe('repo');
  });
});
