/**
 * Refresh ahead (`cache.refresh_ahead`) against the fake GitHub, whose authorised 304s spend no
 * quota: an entry read while fresh is revalidated shortly before it expires, so the read after its
 * lifetime is a fresh hit and nothing was billed; an entry nobody reads is left to expire; a purge
 * made while a refresh is upstream wins. Lifetimes are 4 s (`max_age_cap_seconds`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { counterBy } from '../helpers/metrics-text.js';
import { get, post } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';

const ALICE = { authorization: 'token demo_token_alice_repo' };
// Long enough that a refreshed entry (its Date in whole seconds: up to 1 s old on arrival) outlives the first lifetime.
const LIFETIME_MS = 4_000;

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function rig(credential: 'client' | 'pool', refreshAhead = true): Promise<{ fake: FakeUpstream; proxy: TestProxy }> {
  const fake = await startFakeUpstream({});
  const pooled = credential === 'pool';
  const proxy = await startTestProxy({
    upstreams: [
      {
        name: 'github',
        prefix: '/',
        url: fake.url,
        token_pool: pooled,
        cache: { max_age_cap_seconds: LIFETIME_MS / 1000, refresh_ahead: refreshAhead },
      },
    ],
    ...(pooled ? { pool: { tokens: [{ name: 'a', value: 'demo_token_alice_repo' }], probe_at_start: false } } : {}),
  });
  closers.push(async () => {
    await proxy.close();
    await fake.close();
  });
  return { fake, proxy };
}

async function refreshes(proxy: TestProxy): Promise<Record<string, number>> {
  const res = await request(`${proxy.adminUrl}/metrics`);
  return counterBy(await res.body.text(), 'etagere_refresh_ahead_total', 'result');
}

const headersOf = (credential: 'client' | 'pool'): Record<string, string> => (credential === 'client' ? ALICE : {});

describe('refresh ahead', () => {
  it.each(['client', 'pool'] as const)(
    'a hot entry (%s credential) is refreshed before it expires with a free 304, and the read after its lifetime is a fresh hit',
    async (credential) => {
      const { fake, proxy } = await rig(credential);
      const path = `${proxy.url}/repos/octocat/hello-world`;
      const first = await get(path, headersOf(credential));
      expect(first.status).toBe(200);
      const storedAt = Date.now();
      const spent = fake.stats().quotaSpent;
      expect(String((await get(path, headersOf(credential))).headers['cache-status'])).toMatch(/^etagere; hit/);
      await until(async () => ((await refreshes(proxy)).not_modified ?? 0) >= 1, 5_000, 'a refresh ahead');
      // It went out before the first lifetime ended, conditional, and was not billed.
      expect(Date.now() - storedAt).toBeLessThan(LIFETIME_MS);
      expect(fake.stats().notModified).toBe(1);
      expect(fake.stats().quotaSpent).toBe(spent);
      const upstreamBefore = fake.stats().total;
      await until(() => Date.now() > storedAt + LIFETIME_MS + 100, 5_000, 'the first lifetime to end');
      const after = await get(path, headersOf(credential));
      expect(after.status).toBe(200);
      expect(String(after.headers['cache-status'])).toMatch(/^etagere; hit/);
      expect(after.body).toBe(first.body);
      expect(fake.stats().total).toBe(upstreamBefore);
    },
    15_000,
  );

  it('an entry nobody reads again is not refreshed: it expires and the next read goes upstream', async () => {
    const { fake, proxy } = await rig('client');
    const storedAt = Date.now();
    expect((await get(`${proxy.url}/users/octocat`, ALICE)).status).toBe(200);
    await until(() => Date.now() > storedAt + LIFETIME_MS + 300, 5_000, 'the lifetime to end');
    expect(await refreshes(proxy)).toEqual({});
    expect(fake.stats().total).toBe(1);
    const again = await get(`${proxy.url}/users/octocat`, ALICE);
    expect(String(again.headers['cache-status'])).not.toMatch(/^etagere; hit/);
    expect(fake.stats().total).toBe(2);
  });

  it('a change upstream is picked up by the refresh (a 200 replaces the entry) and seen within the lifetime', async () => {
    const { fake, proxy } = await rig('client');
    const path = `${proxy.url}/repos/octocat/hello-world`;
    const first = await get(path, ALICE);
    await get(path, ALICE);
    await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/hello-world' });
    await until(async () => ((await refreshes(proxy)).modified ?? 0) >= 1, 5_000, 'a refresh that brings the change');
    const after = await get(path, ALICE);
    expect(String(after.headers['cache-status'])).toMatch(/^etagere; hit/);
    expect(after.body).not.toBe(first.body);
  });

  it('a purge made while a refresh is upstream wins: the refreshed answer is not served as fresh', async () => {
    const { fake, proxy } = await rig('client');
    const path = `${proxy.url}/repos/octocat/spoon-knife`;
    await get(path, ALICE);
    // The refresh's answer is held 600 ms upstream.
    await post(`${fake.url}/__fake/faults`, { faults: [{ kind: 'slow-headers', path: '/repos/octocat/spoon-knife', ms: 600 }] });
    await get(path, ALICE);
    const injected = async (): Promise<number> => {
      const res = await request(`${fake.url}/__fake/faults`);
      return ((await res.body.json()) as { faults: Array<{ injected: number }> }).faults[0]?.injected ?? 0;
    };
    await until(async () => (await injected()) >= 1, 5_000, 'the refresh to reach the upstream');
    const purged = await request(`${proxy.adminUrl}/admin/purge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ path: '/repos/octocat/spoon-knife' }),
    });
    expect(purged.statusCode).toBe(200);
    await purged.body.dump();
    expect(await refreshes(proxy)).toEqual({}); // the refresh was still upstream when the purge came
    await until(async () => Object.keys(await refreshes(proxy)).length > 0, 5_000, 'the refresh to come back');
    await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' });
    const before = fake.stats().total;
    const after = await get(path, ALICE);
    expect(after.status).toBe(200);
    expect(String(after.headers['cache-status'])).not.toMatch(/^etagere; hit/);
    expect(fake.stats().total).toBe(before + 1);
  });

  it('hostile: a client credential the upstream has rejected since the read is not used for the refresh', async () => {
    const { fake, proxy } = await rig('client');
    const path = `${proxy.url}/repos/octocat/hello-world`;
    await get(path, ALICE);
    await get(path, ALICE);
    await post(`${fake.url}/__fake/tokens`, { token: 'demo_token_alice_repo', revoked: true });
    // Another request on the revoked credential: 401 Bad credentials, which drops every entry of it.
    expect((await get(`${proxy.url}/users/octocat`, ALICE)).status).toBe(401);
    const upstream = fake.stats().total;
    await until(async () => ((await refreshes(proxy)).skipped ?? 0) >= 1, 5_000, 'the refresh to be skipped');
    expect(fake.stats().total).toBe(upstream);
  });

  it('without refresh_ahead (the default) a hot entry is not refreshed', async () => {
    const { fake, proxy } = await rig('client', false);
    const path = `${proxy.url}/repos/octocat/hello-world`;
    const storedAt = Date.now();
    await get(path, ALICE);
    await get(path, ALICE);
    await until(() => Date.now() > storedAt + LIFETIME_MS + 200, 5_000, 'the lifetime to end');
    expect(fake.stats().total).toBe(1);
    expect(await refreshes(proxy)).toEqual({});
  });
});
