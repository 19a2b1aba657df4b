/**
 * Token rotation without restart, in process against the fake GitHub API. Under
 * a steady load, a reload (what SIGHUP calls) and edits of pool.tokens_file (seen by the file
 * watch, in place and by rename) add and remove tokens with 0 failed requests: /admin/tokens lists
 * the new members, the fake's per-credential counters show a removed token no longer used and an
 * added one used. A same-name new value keeps the member. With Redis, replicas reload too and a
 * removed token's shared state expires. A bad file keeps the old pool and says why, by line,
 * never by value.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { REMOVED_STATE_TTL_MS } from '../../src/pool/backends/shared-pool.js';
import { SECTION_MARK } from '../helpers/capture.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { scanForSecrets } from '../helpers/secrets-scan.js';
import { testSecret } from '../helpers/secrets.js';

const TOKENS = {
  a: testSecret('token-rotation a (alice)', 'rotation_pool_token_a_1f0e'),
  b: testSecret('token-rotation b (bob)', 'rotation_pool_token_b_2e1d'),
  c: testSecret('token-rotation c (carol)', 'rotation_pool_token_c_3d2c'),
  d: testSecret('token-rotation d (dave)', 'rotation_pool_token_d_4c3b'),
  a2: testSecret('token-rotation a re-minted (alice2)', 'rotation_pool_token_a2_5b4a'),
};
const LOGINS: Record<keyof typeof TOKENS, string> = { a: 'alice', b: 'bob', c: 'carol', d: 'dave', a2: 'alice2' };
const FAKE_TOKENS = parseTokenSpec(
  Object.entries(TOKENS)
    .map(([key, value]) => `${value}@${LOGINS[key as keyof typeof TOKENS]}:public_repo`)
    .join(','),
);
/** A malformed line's text that must never be repeated anywhere. */
const MALFORMED = testSecret('token-rotation malformed line value', 'rotation_malformed_secret_6a59');

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

function tokensFile(lines: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-rotation-'));
  dirs.push(dir);
  const file = join(dir, 'tokens');
  writeFileSync(file, lines);
  return file;
}

/** The file's lines for these members ("name=value"). */
const linesOf = (...names: Array<keyof typeof TOKENS>): string =>
  `# pool tokens\n${names.map((name) => `${name.replace('2', '')}=${TOKENS[name]}`).join('\n')}\n`;

/** A proxy built as `etagere serve` builds it: the file read by the config loader. */
async function proxyWith(fake: FakeUpstream, file: string, extra: Record<string, unknown> = {}): Promise<TestProxy> {
  const raw = resolveSecrets(
    {
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
      pool: { tokens_file: file },
      ...extra,
    },
    {},
  );
  const proxy = await startTestProxy(raw);
  proxies.push(proxy);
  return proxy;
}

async function fakeWith(opts: Parameters<typeof startFakeUpstream>[0] = {}): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, tokenLimit: 100_000, ...opts });
  fakes.push(fake);
  return fake;
}

async function memberNames(proxy: TestProxy): Promise<string[]> {
  const answer = await get(`${proxy.adminUrl}/admin/tokens`);
  return (JSON.parse(answer.body) as { tokens: Array<{ name: string }> }).tokens.map((token) => token.name);
}

/** Misses (each path once) from `concurrency` loops until stopped: every status, and the failures' bodies. */
function startLoad(urls: readonly string[], concurrency = 6) {
  let stopped = false;
  let seq = 0;
  const statuses: number[] = [];
  const failures: string[] = [];
  const loops = Array.from({ length: concurrency }, async (_, loop) => {
    while (!stopped) {
      const nth = seq++;
      const answer = await get(`${urls[(loop + nth) % urls.length]}/users/octocat?n=${nth}`);
      statuses.push(answer.status);
      if (answer.status !== 200) failures.push(`${answer.status} ${answer.body.slice(0, 200)}`);
    }
  });
  return {
    statuses,
    failures,
    /** Resolves once `count` more requests have been answered. */
    async answered(count: number): Promise<void> {
      const target = statuses.length + count;
      await until(() => statuses.length >= target, 15_000, `${count} more answers`);
    },
    async stop(): Promise<void> {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

const used = (fake: FakeUpstream, login: string): number => fake.stats().byCredential[login] ?? 0;

/** A removed member takes no request once those in flight are over; an added one takes some. */
async function expectSwitched(fake: FakeUpstream, load: ReturnType<typeof startLoad>, gone: string, joined: string): Promise<void> {
  await load.answered(40); // requests in flight on the removed member at the change are over
  const goneAt = used(fake, gone);
  const joinedAt = used(fake, joined);
  await load.answered(120);
  expect(used(fake, gone)).toBe(goneAt);
  expect(used(fake, joined)).toBeGreaterThan(joinedAt);
}

function reloadLines(proxy: TestProxy, msg: string): Array<Record<string, unknown>> {
  return proxy.logs().filter((line) => line.msg === msg);
}

describe('token rotation without restart (in process)', () => {
  it('SIGHUP and edits of the tokens file add and remove tokens under load with 0 failed requests', async () => {
    const fake = await fakeWith();
    const file = tokensFile(linesOf('a', 'b'));
    const proxy = await proxyWith(fake, file);
    expect(await memberNames(proxy)).toEqual(['a', 'b']);
    const load = startLoad([proxy.url]);
    await load.answered(60);
    expect(used(fake, 'bob')).toBeGreaterThan(0);

    // 1. SIGHUP (the function it calls): b leaves, c joins, a stays.
    writeFileSync(file, linesOf('a', 'c'));
    const outcome = await proxy.reloadTokens('signal');
    expect(outcome).toEqual({ result: 'ok', change: { added: ['c'], removed: ['b'], updated: [], kept: ['a'] } });
    expect(await memberNames(proxy)).toEqual(['a', 'c']);
    await expectSwitched(fake, load, 'bob', 'carol');

    // 2. The file edited in place: the watch reloads it (c leaves, d joins).
    writeFileSync(file, linesOf('a', 'd'));
    await until(async () => (await memberNames(proxy)).join() === 'a,d', 10_000, 'the watch to reload the edited file');
    await expectSwitched(fake, load, 'carol', 'dave');

    // 3. A new file renamed over the old one (editors, Kubernetes): b comes back, d leaves.
    const next = `${file}.new`;
    writeFileSync(next, linesOf('b', 'a'));
    renameSync(next, file);
    await until(async () => (await memberNames(proxy)).join() === 'b,a', 10_000, 'the watch to see the renamed file');
    await expectSwitched(fake, load, 'dave', 'bob');

    await load.stop();
    expect(load.failures).toEqual([]);
    expect(load.statuses.length).toBeGreaterThan(400);
    // Kept member a learnt all along: it was never reset to an unseen token.
    const rows = JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: Array<{ name: string; used: number }> };
    expect(rows.tokens.find((row) => row.name === 'a')!.used).toBeGreaterThan(0);

    const reloads = reloadLines(proxy, 'token pool reloaded');
    expect(reloads.map((line) => [line.trigger, line.added, line.removed, line.kept])).toEqual([
      ['signal', ['c'], ['b'], ['a']],
      ['file', ['d'], ['c'], ['a']],
      ['file', ['b'], ['d'], ['a']],
    ]);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toContain('etagere_token_reloads_total{result="ok"} 3');
    expect(metrics).toContain('etagere_token_reloads_total{result="failed"} 0');
    for (const value of Object.values(TOKENS)) expect(proxy.logText() + metrics).not.toContain(value);
  }, 60_000);

  it('a same-name new value is an update: the member keeps its name and budget, requests in flight finish on the old value', async () => {
    const fake = await fakeWith({ latencyMs: 30 });
    const file = tokensFile(linesOf('a', 'b'));
    const proxy = await proxyWith(fake, file);
    const load = startLoad([proxy.url], 8);
    await load.answered(40);
    writeFileSync(file, linesOf('a2', 'b')); // "a=<new value>"
    const outcome = await proxy.reloadTokens('signal');
    expect(outcome).toEqual({ result: 'ok', change: { added: [], removed: [], updated: ['a'], kept: ['b'] } });
    expect(await memberNames(proxy)).toEqual(['a', 'b']);
    await expectSwitched(fake, load, 'alice', 'alice2');
    await load.stop();
    expect(load.failures).toEqual([]);
    const line = reloadLines(proxy, 'token pool reloaded')[0]!;
    expect(line).toMatchObject({ updated: ['a'], kept: ['b'], added: [], removed: [] });
    expect(proxy.logText()).not.toContain(TOKENS.a2);
  }, 30_000);

  it('hostile: a bad file keeps the old pool and the log names the problem by line, never by value', async () => {
    const fake = await fakeWith();
    const file = tokensFile(linesOf('a', 'b'));
    const proxy = await proxyWith(fake, file);
    const load = startLoad([proxy.url], 4);
    await load.answered(20);
    const cases: Array<[string, string | undefined, string]> = [
      [
        `a=${TOKENS.a}\nc=${MALFORMED} with a space\n`,
        'tokens file line 2: the token must be 1-1024 printable characters without spaces',
        'malformed',
      ],
      [`a=${TOKENS.a}\n\nc=${TOKENS.a}\n`, 'tokens file line 3: the same token as tokens file line 1', 'duplicate value'],
      [`a=${TOKENS.a}\na=${TOKENS.c}\n`, 'tokens file line 2: duplicate token name "a"', 'duplicate name'],
      ['# emptied\n', 'the file has no tokens (it had 2)', 'empty'],
      ['', undefined, 'unreadable'],
    ];
    for (const [text, why, what] of cases) {
      if (what === 'unreadable') rmSync(file);
      else writeFileSync(file, text);
      const outcome = await proxy.reloadTokens('signal');
      expect(outcome.result, what).toBe('failed');
      const reason = (outcome as { why: string }).why;
      expect(reason, what).toContain(why ?? 'cannot read');
      if (what === 'unreadable') expect(reason).toContain('ENOENT');
      expect(await memberNames(proxy), what).toEqual(['a', 'b']);
    }
    // The file watch saw those edits too: each bad version is reported, and none changed the pool.
    writeFileSync(file, `a=${TOKENS.a}\nb=${MALFORMED}!bad name=\n`);
    await until(() => reloadLines(proxy, 'token pool reload failed: keeping the current tokens').some((l) => l.trigger === 'file'));
    expect(await memberNames(proxy)).toEqual(['a', 'b']);
    await load.answered(40);
    await load.stop();
    expect(load.failures).toEqual([]);

    const failures = reloadLines(proxy, 'token pool reload failed: keeping the current tokens');
    expect(failures.filter((line) => line.trigger === 'signal').map((line) => String(line.why).split(':')[0])).toEqual([
      'tokens file line 2',
      'tokens file line 3',
      'tokens file line 2',
      'the file has no tokens (it had 2)',
      `cannot read ${file}`,
    ]);
    expect(failures.every((line) => line.level === 'error')).toBe(true); // flushed at once
    expect(reloadLines(proxy, 'token pool reloaded')).toEqual([]);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toContain('etagere_token_reloads_total{result="ok"} 0');
    expect(metrics).toContain(`etagere_token_reloads_total{result="failed"} ${failures.length}`);

    // The secrets scan of the suite, run here on what this proxy said: no token, no malformed line.
    const admin = (await get(`${proxy.adminUrl}/admin/tokens`)).body;
    const scanDir = mkdtempSync(join(tmpdir(), 'etagere-rotation-scan-'));
    dirs.push(scanDir);
    writeFileSync(
      join(scanDir, 'capture.txt'),
      `${SECTION_MARK}log\n${proxy.logText()}${SECTION_MARK}metrics\n${metrics}${SECTION_MARK}admin\n${admin}`,
    );
    const secrets = [...Object.entries(TOKENS).map(([name, value]) => ({ name, value })), { name: 'malformed line', value: MALFORMED }];
    expect(scanForSecrets(scanDir, secrets).hits).toEqual([]);
  }, 30_000);

  it('hostile: SIGHUP without a tokens file reloads nothing and says so; the pool serves on', async () => {
    const fake = await fakeWith();
    const proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: { tokens: [{ name: 'a', value: TOKENS.a }] },
    });
    proxies.push(proxy);
    const outcome = await proxy.reloadTokens('signal');
    expect(outcome.result).toBe('skipped');
    expect(reloadLines(proxy, `token pool reload: nothing to reload (${(outcome as { why: string }).why})`)).toHaveLength(1);
    expect((await get(`${proxy.url}/users/octocat`)).status).toBe(200);
  });
});

describe('token rotation with the budget shared through Redis', () => {
  let redis: TestRedis | undefined;
  afterAll(async () => {
    await redis?.stop();
  });

  it('both replicas reload the file; the removed token stops, its shared state expires; a re-added one is kept again', async () => {
    redis = await startRedis();
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      const fake = await fakeWith();
      const file = tokensFile(linesOf('a', 'b'));
      const prefix = `rotation-${Date.now()}:`;
      const extra = { redis: { url: redis.url, key_prefix: prefix } };
      const [one, two] = [await proxyWith(fake, file, extra), await proxyWith(fake, file, extra)];
      const key = (name: string): string => `${prefix}v1:{pool}:t:${name}`;
      const load = startLoad([one.url, two.url]);
      await load.answered(60);
      expect(await client.exists(key('b'))).toBe(1);
      expect(await client.pttl(key('b'))).toBe(-1);

      writeFileSync(file, linesOf('a', 'c'));
      await one.reloadTokens('signal');
      await two.reloadTokens('signal'); // the watch may have reloaded it already: then nothing changes
      for (const proxy of [one, two]) expect(await memberNames(proxy)).toEqual(['a', 'c']);
      await expectSwitched(fake, load, 'bob', 'carol');
      await until(async () => (await client.pttl(key('b'))) > 0, 5_000, "b's shared state to get an expiry");
      const ttl = await client.pttl(key('b'));
      expect(ttl).toBeGreaterThan(REMOVED_STATE_TTL_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(REMOVED_STATE_TTL_MS);
      expect(await client.pttl(key('c'))).toBe(-1);
      expect(await client.hget(key('c'), 'core:known')).toBe('1');

      // b comes back before its state expired: it is a member again, its state no longer expires.
      writeFileSync(file, linesOf('a', 'c', 'b'));
      await one.reloadTokens('signal');
      await two.reloadTokens('signal');
      await until(async () => (await client.pttl(key('b'))) === -1, 5_000, "b's shared state to lose its expiry");
      await load.answered(60);
      await load.stop();
      expect(load.failures).toEqual([]);
      for (const proxy of [one, two]) expect(await memberNames(proxy)).toEqual(['a', 'c', 'b']);
    } finally {
      client.disconnect();
    }
  }, 60_000);
});
