/**
 * Purge and inspect on the admin port, and their commands: what /admin/cache shows of
 * each entry (its partition kind, representation, age, TTL, ETag, size, who fetched it), never a
 * credential, a partition hash or a secret, and never the body of a client credential's entry;
 * /admin/cache/stats; `etagere purge` and `etagere cache inspect` against a running proxy.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EntryView } from '../../src/cache/rules/inspect.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { runCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const POOL_TOKEN = 'demo_token_bob_public';
const CLIENT_TOKEN = 'demo_token_alice_repo';
const PARTITION_SECRET = testSecret('partition secret of the cache-admin test', 'cache-admin-partition-secret-0123');
const WEBHOOK_SECRET = testSecret('webhook secret of the cache-admin test', 'cache-admin-webhook-secret-4567');
const HELLO = '/repos/octocat/hello-world';

async function inspect(proxy: TestProxy, query: string): Promise<{ status: number; text: string; entries: EntryView[] }> {
  const res = await request(`${proxy.adminUrl}/admin/cache?${query}`);
  const text = await res.body.text();
  return { status: res.statusCode, text, entries: res.statusCode === 200 ? (JSON.parse(text) as { entries: EntryView[] }).entries : [] };
}

describe('/admin/cache, /admin/cache/stats, etagere purge and etagere cache inspect', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'github', prefix: '/', url: fake.url, token_pool: true },
        { name: 'anon', prefix: '/anon', strip_prefix: true, url: fake.url },
      ],
      pool: { tokens: [{ name: 'bob-pool', value: POOL_TOKEN }] },
      cache: { partition_secret: PARTITION_SECRET },
      webhooks: { secret: WEBHOOK_SECRET },
    });
    await get(proxy.url + HELLO); // the pool
    // A representation of its own (application/vnd.github+json would share the entry without Accept: docs/caching.md).
    await get(proxy.url + HELLO, { accept: 'application/vnd.github.full+json', 'x-github-api-version': '2022-11-28' });
    await get(`${proxy.url}${HELLO}?per_page=5`, { authorization: `token ${CLIENT_TOKEN}` }); // a client's own credential
    await get(`${proxy.url}/anon${HELLO}`); // nobody's credential
    for (let round = 0; round < 3; round++) await get(proxy.url + HELLO);
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('lists every entry of a path: partition kind, representation, age, TTL, ETag, size, fetcher', async () => {
    const { status, entries } = await inspect(proxy, `path=${encodeURIComponent(HELLO)}`);
    expect(status).toBe(200);
    expect(entries).toHaveLength(3);
    const pool = entries.filter((entry) => entry.partition === 'pool');
    expect(pool.map((entry) => entry.accept).sort()).toEqual(['application/vnd.github.full+json', null].sort());
    expect(pool.find((entry) => entry.accept !== null)?.api_version).toBe('2022-11-28');
    for (const entry of pool) {
      expect(entry).toMatchObject({ upstream: 'github', path: HELLO, status: 200, fetched_by: 'pool token bob-pool' });
      expect(entry.etag).toMatch(/^W\//);
      expect(entry.size).toBeGreaterThan(1000);
      expect(entry.ttl).toBeGreaterThan(0);
      expect(entry.age).toBeGreaterThanOrEqual(0);
      expect(entry).not.toHaveProperty('body');
    }
    const own = entries.find((entry) => entry.partition === 'credential')!;
    expect(own.query).toBe('per_page=5');
    expect(own.fetched_by).toMatch(/^credential [A-Za-z0-9_-]{8}$/);
    const anonymous = await inspect(proxy, `path=${encodeURIComponent(`/anon${HELLO}`)}&upstream=anon`);
    expect(anonymous.entries.map((entry) => [entry.partition, entry.fetched_by])).toEqual([['anonymous', 'anonymous']]);
  });

  it("shows bodies only when asked, and never the body of a client credential's entry; never a secret", async () => {
    const { text, entries } = await inspect(proxy, `path=${encodeURIComponent(HELLO)}&body=1`);
    for (const entry of entries.filter((one) => one.partition === 'pool'))
      expect(entry.body).toContain('"full_name":"octocat/hello-world"');
    const own = entries.find((entry) => entry.partition === 'credential')!;
    expect(own.body).toBeNull();
    expect(own.body_withheld).toMatch(/never shown/);
    for (const secret of [POOL_TOKEN, CLIENT_TOKEN, PARTITION_SECRET, WEBHOOK_SECRET]) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/c:[A-Za-z0-9_-]{22}/); // no partition hash either
    expect(text).not.toContain('"private":true'); // alice's own listing is not shown
  });

  it('refuses a bad inspection; stats give entries, bytes and the busiest paths', async () => {
    expect((await inspect(proxy, '')).status).toBe(400);
    expect((await inspect(proxy, 'path=no-slash')).status).toBe(400);
    expect((await inspect(proxy, `path=${HELLO}&upstream=nope`)).status).toBe(404);
    const res = await request(`${proxy.adminUrl}/admin/cache/stats?top=3`);
    const stats = (await res.body.json()) as {
      entries: number;
      bytes: number;
      top_by_hits: Array<{ upstream: string; path: string; hits: number }>;
      top_by_upstream: Array<{ path: string; upstream_requests: number; quota_spent: number }>;
    };
    expect(stats.entries).toBeGreaterThanOrEqual(4);
    expect(stats.bytes).toBeGreaterThan(4000);
    expect(stats.top_by_hits[0]).toMatchObject({ upstream: 'github', path: HELLO });
    expect(stats.top_by_hits[0]!.hits).toBeGreaterThanOrEqual(3);
    expect(stats.top_by_upstream.find((row) => row.path === HELLO)?.upstream_requests).toBeGreaterThanOrEqual(2);
    expect(stats.top_by_hits.length).toBeLessThanOrEqual(3);
  });

  it('etagere cache inspect, cache stats and purge print a table or text, and JSON with --json', { timeout: 60_000 }, async () => {
    const table = runCli(['cache', 'inspect', HELLO, '--admin', proxy.adminUrl]);
    expect((await table.exited).code).toBe(0);
    const lines = table.stdout().split('\n');
    expect(lines[0]).toMatch(/^UPSTREAM +PATH +PARTITION +STATUS +AGE +TTL +SIZE +ETAG/);
    expect(lines.filter((line) => line.startsWith(`github    ${HELLO}`))).toHaveLength(3);
    expect(table.stdout()).toContain('in-memory cache (L1)');
    const inspected = runCli(['cache', 'inspect', HELLO, '--json', '--admin', proxy.adminUrl]);
    expect((await inspected.exited).code).toBe(0);
    expect((JSON.parse(inspected.stdout()) as { entries: unknown[] }).entries).toHaveLength(3);

    const stats = runCli(['cache', 'stats', '--top', '2', '--admin', proxy.adminUrl]);
    expect((await stats.exited).code).toBe(0);
    expect(stats.stdout()).toMatch(/^\d+ entries in L1, [\d.]+ KiB, \d+ marked scopes?\n/);
    expect(stats.stdout()).toMatch(
      /busiest paths by hits\nHITS +UPSTREAM REQS +QUOTA SPENT +UPSTREAM +PATH\n +\d+ +\d+ +\d+ +github +\/repos\/octocat/,
    );
    const statsJson = runCli(['cache', 'stats', '--json', '--admin', proxy.adminUrl]);
    expect((await statsJson.exited).code).toBe(0);
    expect(JSON.parse(statsJson.stdout())).toMatchObject({
      entries: expect.any(Number) as unknown,
      top_by_hits: expect.any(Array) as unknown,
    });

    const purged = runCli(['purge', '--prefix', '/repos/octocat/', '--upstream', 'github', '--json', '--admin', proxy.adminUrl]);
    expect((await purged.exited).code).toBe(0);
    expect(JSON.parse(purged.stdout())).toMatchObject({ upstreams: ['github'], prefix: '/repos/octocat', marked: 3 });
    const purgedText = runCli(['purge', '--path', HELLO, '--admin', proxy.adminUrl]);
    expect((await purgedText.exited).code).toBe(0);
    expect(purgedText.stdout()).toMatch(
      /^marked \d+ entries stale under path \/repos\/octocat\/hello-world, upstreams github, anon; purge sent to this process\n$/,
    );
    const after = await inspect(proxy, `path=${encodeURIComponent(HELLO)}`);
    expect(after.entries.every((entry) => entry.ttl <= 0)).toBe(true); // kept, stale
    const read = await get(proxy.url + HELLO);
    expect(read.headers['cache-status']).toMatch(/fwd=stale; fwd-status=304/); // revalidated: a free 304
  });

  it('the commands fail clearly: a usage error exits 2, an unreachable admin port 1', async () => {
    const both = runCli(['purge', '--path', '/x', '--prefix', '/y', '--admin', proxy.adminUrl]);
    expect((await both.exited).code).toBe(2);
    expect(both.stderr()).toContain('exactly one of --path, --prefix and --tag');
    const away = runCli(['purge', '--path', '/x', '--admin', 'http://127.0.0.1:9']);
    expect((await away.exited).code).toBe(1);
    expect(away.stderr()).toBe(
      'etagere: no proxy answers at http://127.0.0.1:9 (ECONNREFUSED): start one, or give its admin port with --admin URL\n',
    );
    const refused = runCli(['cache', 'inspect', 'no-slash', '--admin', proxy.adminUrl]);
    expect((await refused.exited).code).toBe(1);
    expect(refused.stderr()).toMatch(/^etagere: the admin port answered 400: give \?path=[^\n]*\n$/);
  }, 30_000);
});
