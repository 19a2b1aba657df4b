/**
 * Property: whatever sequence of requests, credentials, methods and conditional/no-cache headers
 * goes through one long-lived proxy, a 200 always carries exactly the body the fake gives the SAME
 * credential directly, and nothing the fake refuses (401/404) ever comes back as a 200.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const basic = (user: string, token: string) => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

const CREDENTIALS: ReadonlyArray<{ label: string; authorization: string | undefined }> = [
  { label: 'none', authorization: undefined },
  { label: 'token A (alice, repo)', authorization: 'token demo_token_alice_repo' },
  { label: 'token B (bob, no repo)', authorization: 'token demo_token_bob_public' },
  { label: 'Basic alice:A', authorization: basic('alice', 'demo_token_alice_repo') },
  { label: 'Basic bob:B', authorization: basic('bob', 'demo_token_bob_public') },
];

const ENDPOINTS = [
  '/repos/octocat/hello-world',
  '/repos/etagere-org/internal-tools',
  '/repos/alice/secret-project',
  '/orgs/etagere-org/repos?per_page=100',
  '/user',
  '/user/repos',
  '/users/alice/repos',
  '/users/bob',
] as const;

type Inm = 'none' | 'current' | 'star' | 'bogus';

interface Step {
  cred: number;
  endpoint: (typeof ENDPOINTS)[number];
  method: 'GET' | 'HEAD';
  noCache: boolean;
  inm: Inm;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  cred: fc.integer({ min: 0, max: CREDENTIALS.length - 1 }),
  endpoint: fc.constantFrom(...ENDPOINTS),
  method: fc.constantFrom('GET' as const, 'HEAD' as const),
  noCache: fc.boolean(),
  inm: fc.constantFrom<Inm>('none', 'current', 'star', 'bogus'),
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function send(url: string, method: 'GET' | 'HEAD', headers: Record<string, string>): Promise<Answer> {
  const res = await request(url, { method, headers });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

const opaque = (etag: string) => etag.replace(/^W\//, '');

describe('credential isolation (property)', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 10_000_000, tokenLimit: 10_000_000 });
    proxy = await startTestProxy({ upstreams: [{ name: 'api', prefix: '/', url: fake.url }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('a proxied 200 is always the body the same credential gets directly', async () => {
    let directRequests = 0;
    let proxiedRequests = 0;
    let privateOk = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 5, maxLength: 15 }), async (steps) => {
        for (const step of steps) {
          const { authorization } = CREDENTIALS[step.cred]!;
          const auth: Record<string, string> = authorization === undefined ? {} : { authorization };
          const direct = await send(fake.url + step.endpoint, 'GET', auth);
          directRequests++;
          const currentEtag = typeof direct.headers.etag === 'string' ? direct.headers.etag : undefined;

          const headers: Record<string, string> = { ...auth };
          if (step.noCache) headers['cache-control'] = 'no-cache';
          if (step.inm === 'current' && currentEtag !== undefined) headers['if-none-match'] = currentEtag;
          if (step.inm === 'star') headers['if-none-match'] = '*';
          if (step.inm === 'bogus') headers['if-none-match'] = 'W/"0000000000000000"';
          const viaProxy = await send(proxy.url + step.endpoint, step.method, headers);
          proxiedRequests++;
          if (viaProxy.status === 200 && /internal-tools|secret-project/.test(step.endpoint)) privateOk++;
          const what = `${step.method} ${step.endpoint} as ${CREDENTIALS[step.cred]!.label} (inm=${step.inm}, noCache=${step.noCache})`;

          if (viaProxy.status === 200) {
            expect(direct.status, `${what}: proxy said 200, fake said ${direct.status}`).toBe(200);
            if (step.method === 'GET') expect(viaProxy.body, `${what}: body differs from the direct answer`).toBe(direct.body);
            else expect(viaProxy.body).toBe('');
            if (currentEtag !== undefined) expect(viaProxy.headers.etag, `${what}: etag`).toBe(currentEtag);
          }
          if (direct.status === 401 || direct.status === 404) {
            expect(viaProxy.status, `${what}: fake refused with ${direct.status}`).toBe(direct.status);
            if (step.method === 'GET') expect(viaProxy.body).toBe(direct.body);
          }
          if (viaProxy.status === 304) {
            expect(direct.status, `${what}: 304 for something the fake refuses`).toBe(200);
            const inm = headers['if-none-match'];
            expect(inm, `${what}: 304 without a validator`).toBeDefined();
            if (inm !== '*') expect(opaque(inm!), `${what}: 304 for a validator that does not match`).toBe(opaque(currentEtag ?? ''));
            expect(viaProxy.body).toBe('');
          }
          expect([200, 304, 401, 404], `${what}: unexpected status`).toContain(viaProxy.status);
        }
      }),
      { numRuns: 60 },
    );
    // The runs did reach private records, and the cache answered part of the traffic itself.
    expect(privateOk).toBeGreaterThan(0);
    const upstreamFromProxy = fake.stats().total - directRequests;
    expect(upstreamFromProxy).toBeGreaterThan(0);
    expect(upstreamFromProxy).toBeLessThan(proxiedRequests);
  });
});
