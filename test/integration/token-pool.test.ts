/**
 * The token pool against the fake GitHub API with small quotas: the whole pool's quota is spent
 * without one upstream 403/429, the 151st request gets a 429 with a correct Retry-After and
 * service resumes by itself; dead tokens are dropped, secondary limits pause one token,
 * revalidations go to the token that stored the entry, consumer keys are enforced, and no token
 * value ever shows in logs, /admin or /metrics.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../helpers/cli.js';
import { get, post, type Answer } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { deadPort } from '../helpers/upstream.js';
import { counterSum } from '../helpers/metrics-text.js';

const TOKENS = { a: 'pool_secret_token_aaaa1111', b: 'pool_secret_token_bbbb2222', c: 'pool_secret_token_cccc3333' };
/** A client's own token, shaped like GitHub's: with consumer keys on, only such a credential goes upstream as the client's. */
const OWN = 'ghp_poolTestOwnTokenOctocat0000111122223';
const FAKE_TOKENS = parseTokenSpec(
  `${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo,${TOKENS.c}@carol:public_repo,demo_token_octocat_repo@octocat:repo,${OWN}@octocat:repo`,
);
const BAD = 'pool_secret_token_revoked9999';
const CONSUMER_KEY = 'consumer_key_web_5f2a9c';
const ALL_SECRETS = [...Object.values(TOKENS), BAD, CONSUMER_KEY];

interface TokenRow {
  name: string;
  state: string;
  limit: number | null;
  remaining: number | null;
  reset: number | null;
  in_flight: number;
  paused_until: string | null;
  last_error: string | null;
}

async function adminTokens(proxy: TestProxy): Promise<TokenRow[]> {
  const answer = await get(`${proxy.adminUrl}/admin/tokens`);
  expect(answer.status).toBe(200);
  return (JSON.parse(answer.body) as { tokens: TokenRow[] }).tokens;
}

const upstream = (fake: FakeUpstream, pool: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
  pool,
  ...extra,
});

const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];
async function start(raw: Record<string, unknown>): Promise<TestProxy> {
  const proxy = await startTestProxy(raw);
  proxies.push(proxy);
  return proxy;
}
async function fakeWith(opts: Parameters<typeof startFakeUpstream>[0]): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, ...opts });
  fakes.push(fake);
  return fake;
}

afterEach(async () => {
  // No token value in any log line, /admin answer or metric, whatever the test did.
  for (const proxy of proxies.splice(0)) {
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    const admin = (await get(`${proxy.adminUrl}/admin/tokens`)).body;
    await proxy.close();
    for (const secret of ALL_SECRETS) {
      expect(proxy.logText()).not.toContain(secret);
      expect(metrics).not.toContain(secret);
      expect(admin).not.toContain(secret);
    }
  }
  for (const fake of fakes.splice(0)) await fake.close();
});
afterAll(async () => {
  for (const fake of fakes) await fake.close();
});

describe('token pool', () => {
  it('spends all of the pool without an upstream 403/429, then answers 429 with Retry-After, then resumes', async () => {
    const WINDOW = 5;
    const fake = await fakeWith({ tokenLimit: 50, windowSeconds: WINDOW });
    const proxy = await start(
      upstream(fake, {
        tokens: [
          { name: 'a', value: TOKENS.a },
          { name: 'b', value: TOKENS.b },
          { name: 'c', value: TOKENS.c },
        ],
      }),
    );
    const rows = await adminTokens(proxy);
    expect(rows.map((r) => [r.name, r.state, r.limit, r.remaining])).toEqual([
      ['a', 'ok', 50, 50],
      ['b', 'ok', 50, 50],
      ['c', 'ok', 50, 50],
    ]);

    // A stored entry to fall back on later, then 148 more uncached requests, 12 at a time.
    const warm = await get(`${proxy.url}/users/octocat`);
    expect(warm.status).toBe(200);
    const answers: Answer[] = [warm];
    for (let i = 0; i < 148; i += 12) {
      const batch = Array.from({ length: Math.min(12, 148 - i) }, (_, j) => get(`${proxy.url}/repos/etagere-org/repo-001?n=${i + j}`));
      answers.push(...(await Promise.all(batch)));
    }
    expect(answers).toHaveLength(149);
    expect(answers.filter((a) => a.status !== 200).map((a) => a.status)).toEqual([]);
    const last = answers.at(-1)!;
    expect(last.headers['x-ratelimit-limit']).toBe('150');
    expect(Number(last.headers['x-ratelimit-remaining'])).toBeLessThanOrEqual(150 - 140);
    expect(['a', 'b', 'c']).toContain(last.headers['x-etagere-token']);

    // GET /rate_limit describes the pool as one quota (answered by the proxy, free).
    const rateLimit = await get(`${proxy.url}/rate_limit`);
    expect(rateLimit.status).toBe(200);
    const core = JSON.parse(rateLimit.body).resources.core;
    expect(core).toEqual({ limit: 150, used: 149, remaining: 1, reset: expect.any(Number), resource: 'core' });
    expect(rateLimit.headers['x-ratelimit-remaining']).toBe('1');

    const r150 = await get(`${proxy.url}/repos/etagere-org/repo-002?n=150`);
    expect(r150.status).toBe(200);
    let stats = fake.stats();
    expect(stats.byStatus['403']).toBeUndefined();
    expect(stats.byStatus['429']).toBeUndefined();
    expect(stats.quotaSpent).toBe(150);

    // Request 151: nothing is left. The Retry-After is the time until the earliest reset.
    const resets = await Promise.all(
      Object.values(TOKENS).map(
        async (t) => JSON.parse((await get(`${fake.url}/rate_limit`, { authorization: `token ${t}` })).body).resources.core.reset as number,
      ),
    );
    const totalBefore = fake.stats().total;
    const r151 = await get(`${proxy.url}/repos/etagere-org/repo-003?n=151`);
    expect(r151.status).toBe(429);
    expect(JSON.parse(r151.body)).toMatchObject({ message: expect.stringMatching(/rate limit/i), documentation_url: expect.any(String) });
    const retryAfter = Number(r151.headers['retry-after']);
    const untilReset = Math.min(...resets) - Date.now() / 1000;
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor(untilReset));
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(untilReset) + 2);
    expect(r151.headers['x-ratelimit-remaining']).toBe('0');
    expect(fake.stats().total).toBe(totalBefore); // never forwarded

    // A stored entry is served stale instead, saying why; a client's own token is unaffected.
    const stale = await get(`${proxy.url}/users/octocat`, { 'cache-control': 'max-age=0' });
    expect(stale.status).toBe(200);
    expect(stale.headers['cache-status']).toMatch(/detail=pool-exhausted/);
    const own = await get(`${proxy.url}/users/octocat`, { authorization: 'token demo_token_octocat_repo' });
    expect(own.status).toBe(200);
    expect([own.headers['x-ratelimit-limit'], own.headers['x-ratelimit-remaining']]).toEqual(['50', '49']); // its own quota
    expect(own.headers['x-etagere-token']).toBeUndefined();

    // After the window, service resumes by itself.
    let resumed: Answer | undefined;
    await until(
      async () => {
        resumed = await get(`${proxy.url}/repos/etagere-org/repo-004?n=resume`);
        return resumed.status === 200;
      },
      (WINDOW + 6) * 1000,
      'the pool to come back after its reset',
    );
    stats = fake.stats();
    expect(stats.byStatus['403']).toBeUndefined();
    expect(stats.byStatus['429']).toBeUndefined();
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toMatch(/etagere_pool_rejections_total\{reason="exhausted"\} [1-9]/);
    expect(metrics).toMatch(/etagere_token_remaining\{token="a"\} \d+/);
  }, 40_000);

  it('drops a token the upstream rejects with 401, and the request still succeeds', async () => {
    const fake = await fakeWith({});
    // No probe at start: the first request itself meets the bad token ("bad" sorts first).
    const proxy = await start(
      upstream(fake, {
        probe_at_start: false,
        tokens: [
          { name: 'bad', value: BAD },
          { name: 'good', value: TOKENS.a },
        ],
      }),
    );
    const answer = await get(`${proxy.url}/users/alice`);
    expect(answer.status).toBe(200);
    expect(answer.headers['x-etagere-token']).toBe('good');
    const bad = (await adminTokens(proxy)).find((t) => t.name === 'bad')!;
    expect(bad.state).toBe('dead');
    expect(bad.last_error).toMatch(/401/);
    for (let i = 0; i < 5; i++) expect((await get(`${proxy.url}/users/bob?i=${i}`)).headers['x-etagere-token']).toBe('good');
    // The bad token met two 401s: the request's, and the GET /rate_limit that confirmed it (only a
    // confirmed 401 kills a token). Then it is never used again.
    expect(fake.stats().byStatus['401']).toBe(2);
    expect(fake.stats().byPath['/rate_limit']).toBe(1);
    expect((await get(`${proxy.adminUrl}/metrics`)).body).toContain('etagere_token_events_total{token="bad",event="dead"} 1');
    expect(proxy.logs().some((l) => l.tokenName === 'bad' && l.level === 'error')).toBe(true);

    // With the start-up probe, a bad token is dead before any client request.
    const probed = await start(
      upstream(fake, {
        tokens: [
          { name: 'bad', value: BAD },
          { name: 'good', value: TOKENS.b },
        ],
      }),
    );
    expect((await adminTokens(probed)).map((t) => t.state)).toEqual(['dead', 'ok']);
  });

  it('an injected secondary-limit 429 pauses only that token; the request succeeds on another', async () => {
    const fake = await fakeWith({});
    const proxy = await start(
      upstream(fake, {
        tokens: [
          { name: 'a', value: TOKENS.a },
          { name: 'b', value: TOKENS.b },
          { name: 'c', value: TOKENS.c },
        ],
      }),
    );
    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 429, retryAfter: 30, token: TOKENS.b });
    const seen: string[] = [];
    await until(
      async () => {
        const answer = await get(`${proxy.url}/repos/octocat/hello-world?i=${seen.length}`);
        expect(answer.status).toBe(200);
        seen.push(String(answer.headers['x-etagere-token']));
        return fake.stats().byStatus['429'] === 1;
      },
      5_000,
      'token b to meet its secondary limit',
    );
    const rows = await adminTokens(proxy);
    expect(rows.map((t) => t.state)).toEqual(['ok', 'paused', 'ok']);
    const pausedFor = (Date.parse(rows[1]!.paused_until!) - Date.now()) / 1000;
    expect(pausedFor).toBeGreaterThan(25);
    expect(pausedFor).toBeLessThanOrEqual(30);
    const after = await Promise.all(Array.from({ length: 12 }, (_, i) => get(`${proxy.url}/users/octocat?after=${i}`)));
    expect(after.every((r) => r.status === 200 && r.headers['x-etagere-token'] !== 'b')).toBe(true);
    expect(new Set(after.map((r) => r.headers['x-etagere-token']))).toEqual(new Set(['a', 'c']));
  });

  it('revalidates with the token that stored each entry: 200s only for real changes', async () => {
    const fake = await fakeWith({});
    const proxy = await start(
      upstream(fake, {
        tokens: [
          { name: 'a', value: TOKENS.a },
          { name: 'b', value: TOKENS.b },
          { name: 'c', value: TOKENS.c },
        ],
      }),
    );
    const paths = Array.from({ length: 9 }, (_, i) => `/repos/etagere-org/repo-0${String(i + 10)}`);
    const warm = await Promise.all(paths.map((p) => get(proxy.url + p)));
    expect(new Set(warm.map((w) => w.headers['x-etagere-token'])).size).toBeGreaterThan(1); // spread over tokens
    let mutations = 0;
    const before = fake.stats();
    for (let round = 0; round < 4; round++) {
      for (const path of paths.filter((_, i) => (i + round) % 3 === 0)) {
        await post(`${fake.url}/__fake/mutate`, { path });
        mutations++;
      }
      const answers = await Promise.all(paths.map((p) => get(proxy.url + p, { 'cache-control': 'max-age=0' })));
      expect(answers.every((a) => a.status === 200)).toBe(true);
    }
    const after = fake.stats();
    const delta = (s: string) => (after.byStatus[s] ?? 0) - (before.byStatus[s] ?? 0);
    expect(delta('200')).toBe(mutations);
    expect(delta('304')).toBe(paths.length * 4 - mutations);
    expect((await get(`${proxy.adminUrl}/metrics`)).body).toContain('etagere_token_switch_revalidations_total 0');
  });

  it('enforces consumer keys, counts use per consumer, and can let others through anonymously', async () => {
    const fake = await fakeWith({});
    const consumers = { enabled: true, keys: [{ name: 'web', value: CONSUMER_KEY }] };
    const proxy = await start(upstream(fake, { tokens: [{ name: 'a', value: TOKENS.a }] }, { consumers }));
    const refused: Array<Record<string, string>> = [{}, { 'x-etagere-key': 'nope' }];
    for (const headers of refused) {
      const answer = await get(`${proxy.url}/users/octocat`, headers);
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body)).toMatchObject({
        message: expect.stringMatching(/consumer key/),
        documentation_url: expect.any(String),
      });
    }
    const byHeader = await get(`${proxy.url}/users/octocat`, { 'x-etagere-key': CONSUMER_KEY });
    expect(byHeader.status).toBe(200);
    expect(byHeader.headers['x-etagere-token']).toBe('a');
    const byBasic = await get(`${proxy.url}/users/alice`, { authorization: `Basic ${Buffer.from(`${CONSUMER_KEY}:`).toString('base64')}` });
    expect(byBasic.status).toBe(200);
    expect(byBasic.headers['x-etagere-token']).toBe('a');
    // The consumer's key never reaches the upstream: only the pool token did (alice's: the free
    // start-up /rate_limit probe and the two requests).
    expect(fake.stats().byCredential).toEqual({ alice: 3 });
    expect(fake.stats().byPath['/rate_limit']).toBe(1);
    // A client's own token needs no key and keeps its own partition and headers.
    const own = await get(`${proxy.url}/users/octocat`, { authorization: `token ${OWN}` });
    expect(own.status).toBe(200);
    // A credential that is neither a key nor GitHub-shaped (a mistyped key) is refused and never sent.
    const before = fake.stats().total;
    const typo = await get(`${proxy.url}/users/octocat`, { authorization: `token ${CONSUMER_KEY}x` });
    expect(typo.status).toBe(401);
    expect(fake.stats().total).toBe(before);
    expect(own.headers['x-ratelimit-limit']).toBe('5000');
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'web' })).toBe(2);
    expect(metrics).toContain('etagere_consumer_rejections_total{consumer="-",reason="key"} 3');

    const lenient = await start(
      upstream(fake, { tokens: [{ name: 'a', value: TOKENS.a }] }, { consumers: { ...consumers, unknown: 'anonymous' } }),
    );
    const anon = await get(`${lenient.url}/users/bob`);
    expect(anon.status).toBe(200);
    expect(anon.headers['x-ratelimit-limit']).toBe('60');
    expect(anon.headers['x-etagere-token']).toBeUndefined();
  });

  it('gives each token its own partition when the tokens are not equivalent', async () => {
    const fake = await fakeWith({});
    const proxy = await start(
      upstream(fake, {
        equivalent: false,
        tokens: [
          { name: 'a', value: TOKENS.a },
          { name: 'b', value: TOKENS.b },
        ],
      }),
    );
    const first = await get(`${proxy.url}/users/carol`);
    const second = await get(`${proxy.url}/users/carol`);
    expect(first.headers['cache-status']).toMatch(/fwd=miss/);
    expect(second.headers['cache-status']).toMatch(/^etagere; hit/);
    expect(second.headers['x-etagere-token']).toBe(first.headers['x-etagere-token']);
    // A forced revalidation goes to the token that stored it and gets a free 304.
    const forced = await get(`${proxy.url}/users/carol`, { 'cache-control': 'max-age=0' });
    expect(forced.headers['cache-status']).toMatch(/fwd-status=304/);
    expect(forced.headers['x-etagere-token']).toBe(first.headers['x-etagere-token']);
  });

  it('`etagere serve` with ETAGERE_TOKENS and a tokens file, at debug level, never prints a token', async () => {
    const fake = await fakeWith({});
    const dir = mkdtempSync(join(tmpdir(), 'etagere-tokens-'));
    const file = join(dir, 'tokens');
    writeFileSync(file, `# pool tokens\nfile-c=${TOKENS.c}\n${BAD}\n`);
    const [port, adminPort] = [await deadPort(), await deadPort()];
    const cli = runCli(['serve'], {
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      UPSTREAM_URL: fake.url,
      ETAGERE_CONFIG: undefined,
      ETAGERE_TOKENS: `env-a=${TOKENS.a},${TOKENS.b}`,
      ETAGERE_TOKENS_FILE: file,
      LOG_LEVEL: 'debug',
    });
    try {
      await until(() => cli.stdout().includes('etagere listening'), 15_000, 'proxy to start');
      for (let i = 0; i < 6; i++)
        expect((await get(`http://127.0.0.1:${port}/users/octocat?i=${i}`, { 'x-etagere-key': CONSUMER_KEY })).status).toBe(200);
      expect((await get(`http://127.0.0.1:${port}/users/octocat`, { authorization: `token ${BAD}` })).status).toBe(401);
      const admin = JSON.parse((await get(`http://127.0.0.1:${adminPort}/admin/tokens`)).body) as { tokens: TokenRow[] };
      const names = admin.tokens.map((t) => t.name);
      expect(names.slice(0, 2)).toEqual(['env-a', expect.stringMatching(/^tok-[0-9a-f]{8}$/)]);
      expect(names[2]).toBe('file-c');
      expect(admin.tokens[3]!.state).toBe('dead');
      const metrics = (await get(`http://127.0.0.1:${adminPort}/metrics`)).body;
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      const output = cli.stdout() + cli.stderr() + metrics + JSON.stringify(admin);
      expect(output).toContain('token pool ready');
      for (const secret of ALL_SECRETS) expect(output).not.toContain(secret);
    } finally {
      cli.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true }); // the tokens file
    }
  }, 30_000);
});
