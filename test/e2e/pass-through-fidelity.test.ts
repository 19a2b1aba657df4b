/**
 * Pass-through fidelity: what a client gets through the proxy (policy none, and the default policy
 * on a cold miss) is what it would get from the upstream directly — status, body bytes and every
 * header of the fake's response-header table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const SAME_VALUE = [
  'content-type',
  'cache-control',
  'vary',
  'etag',
  'last-modified',
  'x-github-media-type',
  'access-control-expose-headers',
  'access-control-allow-origin',
  'strict-transport-security',
  'x-frame-options',
  'x-content-type-options',
  'x-xss-protection',
  'referrer-policy',
  'content-security-policy',
  'x-ratelimit-limit',
  'accept-ranges',
  'content-length',
  'x-oauth-scopes',
  'x-accepted-oauth-scopes',
] as const;

interface Case {
  name: string;
  path: string;
  auth?: string;
}

const basic = (user: string, token: string) => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

const CASES: Case[] = [
  { name: 'repo with token', path: '/repos/octocat/hello-world', auth: 'token demo_token_alice_repo' },
  { name: 'repo anonymous', path: '/repos/octocat/hello-world' },
  { name: 'private repo with scope', path: '/repos/etagere-org/internal-tools', auth: 'Bearer demo_token_alice_repo' },
  { name: 'private repo without scope (404)', path: '/repos/etagere-org/internal-tools', auth: 'token demo_token_bob_public' },
  { name: 'user record', path: '/users/alice', auth: 'token demo_token_bob_public' },
  { name: 'own profile via Basic', path: '/user', auth: basic('alice', 'demo_token_alice_repo') },
  { name: 'own repos', path: '/user/repos?per_page=100', auth: 'token demo_token_alice_repo' },
  { name: 'org list page', path: '/orgs/etagere-org/repos?per_page=100', auth: 'token demo_token_bob_public' },
  { name: 'unknown repo (404)', path: '/repos/octocat/no-such-repo', auth: 'token demo_token_alice_repo' },
  { name: 'bad token (401)', path: '/users/octocat', auth: 'token not_a_token' },
  { name: 'cyclist', path: '/bicyclists/helsinki' },
  { name: 'unknown city (404)', path: '/bicyclists/atlantis' },
];

interface Answer {
  status: number;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

async function get(base: string, testCase: Case): Promise<Answer> {
  const res = await request(base + testCase.path, {
    method: 'GET',
    headers: testCase.auth === undefined ? {} : { authorization: testCase.auth },
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, body, headers: res.headers };
}

const num = (v: string | string[] | undefined) => Number(Array.isArray(v) ? v[0] : v);

function expectSameAnswer(viaProxy: Answer, direct: Answer): void {
  expect(viaProxy.status).toBe(direct.status);
  expect(viaProxy.body.equals(direct.body)).toBe(true);
  for (const name of SAME_VALUE) expect([name, viaProxy.headers[name]]).toEqual([name, direct.headers[name]]);
  if (direct.headers['x-ratelimit-limit'] !== undefined) {
    for (const answer of [viaProxy, direct]) {
      const limit = num(answer.headers['x-ratelimit-limit']);
      expect(num(answer.headers['x-ratelimit-remaining']) + num(answer.headers['x-ratelimit-used'])).toBe(limit);
      expect(Number.isInteger(num(answer.headers['x-ratelimit-reset']))).toBe(true);
    }
  } else {
    for (const header of ['x-ratelimit-remaining', 'x-ratelimit-used', 'x-ratelimit-reset'])
      expect(viaProxy.headers[header]).toBeUndefined();
  }
}

describe.each([
  { policy: 'none' as const, label: 'policy none' },
  { policy: 'max-age' as const, label: 'default policy, first (miss) request' },
])('pass-through fidelity: $label', ({ policy }) => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000, tokenLimit: 100_000 });
    proxy = await startTestProxy({ upstreams: [{ name: 'api', prefix: '/', url: fake.url, cache: { policy } }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it.each(CASES)('$name: $path', async (testCase) => {
    fake.reset();
    const direct = await get(fake.url, testCase);
    fake.reset();
    const viaProxy = await get(proxy.url, testCase);
    expectSameAnswer(viaProxy, direct);
    if (policy === 'none') expect(viaProxy.headers['cache-status']).toBeUndefined();
    else if (direct.status === 200) expect(String(viaProxy.headers['cache-status'])).toMatch(/fwd=miss/);
    // Exactly one upstream request per proxied request, and it spent what a direct one spends.
    expect(fake.stats().total).toBe(1);
  });

  it('HEAD matches GET headers through the proxy', async () => {
    fake.reset();
    const res = await request(`${proxy.url}/repos/octocat/spoon-knife`, {
      method: 'HEAD',
      headers: { authorization: 'token demo_token_carol_repo' },
    });
    await res.body.dump();
    fake.reset();
    const direct = await get(fake.url, { name: 'x', path: '/repos/octocat/spoon-knife', auth: 'token demo_token_carol_repo' });
    expect(res.statusCode).toBe(200);
    for (const name of SAME_VALUE) expect([name, res.headers[name]]).toEqual([name, direct.headers[name]]);
  });
});
