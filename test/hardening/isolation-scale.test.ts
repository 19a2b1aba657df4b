/**
 * Credential isolation at scale: random request sequences (10,000 in `npm run soak`, 1,000 in
 * `npm test`) against TWO replicas that share
 * one real Redis (L2, single flight, token budget, partition secret), in front of the fake GitHub.
 *
 * Who asks: pool consumers (a pool of three tokens with different scopes and visibility, with
 * `equivalent: false`, so each token has its own partition), anonymous clients (a route without
 * the pool), and clients with their own credentials (tokens that can and cannot see the private
 * repositories, the same token as `token`, `Bearer` and Basic, an unknown token, a Basic one with
 * an unknown password). What they ask: private and public repositories, /user, lists; GET and
 * HEAD; unconditional, or with If-None-Match carrying the ETag of the same credential, of ANOTHER
 * credential, `*`, or a bogus one; sometimes `Cache-Control: no-cache`. Consecutive requests of a
 * sequence alternate between the replicas; many sequences run at once.
 *
 * Property: no answer carries data (status, body, ETag, X-OAuth-Scopes) that the requesting
 * credential would not get from the upstream directly. For a pool consumer the requesting
 * credential is the pool token the answer names in `x-etagere-token`. The fake is not mutated
 * during the run, so each credential's direct answers are fetched once up front (the oracle).
 *
 * ISOLATION_SEQUENCES and ISOLATION_SEED override the run size and the seed (printed).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { soakSize } from '../helpers/soak.js';
import { testSecret } from '../helpers/secrets.js';

const SEQUENCES = soakSize('ISOLATION_SEQUENCES', { soak: 10_000, quick: 1_000 });
const SEED = Number(process.env.ISOLATION_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CONCURRENCY = 48;

// Fake tokens: [login, scopes]. Who can see what (private repositories):
//   alice (repo):         alice/secret-project, etagere-org/internal-tools + roadmap (member)
//   alice (public_repo):  nothing private
//   bob (repo):           bob/diary
//   carol (repo):         nothing private here (owns none, member of nothing)
//   octocat (repo):       octocat/private-notes, etagere-org/* private (member)
const gh = (label: string): string => `ghp_${label}`.padEnd(40, '0');
const TOKENS = {
  poolAlice: testSecret('isolation-scale pool token alice (repo)', gh('IsoPoolAliceRepo')),
  poolBob: testSecret('isolation-scale pool token bob (public_repo)', gh('IsoPoolBobPublic')),
  poolOctocat: testSecret('isolation-scale pool token octocat (repo)', gh('IsoPoolOctocatRepo')),
  aliceRepo: testSecret('isolation-scale client token alice (repo)', gh('IsoClientAliceRepo')),
  alicePublic: testSecret('isolation-scale client token alice (public_repo)', gh('IsoClientAlicePublic')),
  bobRepo: testSecret('isolation-scale client token bob (repo)', gh('IsoClientBobRepo')),
  carolRepo: testSecret('isolation-scale client token carol (repo)', gh('IsoClientCarolRepo')),
  unknown: testSecret('isolation-scale unknown token', gh('IsoUnknownToken')),
};
const FAKE_TOKENS = parseTokenSpec(
  [
    `${TOKENS.poolAlice}@alice:repo+read:org`,
    `${TOKENS.poolBob}@bob:public_repo`,
    `${TOKENS.poolOctocat}@octocat:repo`,
    `${TOKENS.aliceRepo}@alice:repo`,
    `${TOKENS.alicePublic}@alice:public_repo`,
    `${TOKENS.bobRepo}@bob:repo`,
    `${TOKENS.carolRepo}@carol:repo`,
  ].join(','),
);
const POOL: Readonly<Record<string, string>> = {
  'pool-alice': TOKENS.poolAlice,
  'pool-bob': TOKENS.poolBob,
  'pool-octocat': TOKENS.poolOctocat,
};

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** Who asks. `pool`: no credential on the pooled route; `anonymous`: no credential on the route without a pool. */
type Who = { kind: 'pool' } | { kind: 'anonymous' } | { kind: 'client'; authorization: string };
const WHO: ReadonlyArray<{ label: string; who: Who }> = [
  { label: 'pool consumer', who: { kind: 'pool' } },
  { label: 'anonymous', who: { kind: 'anonymous' } },
  { label: 'token alice (repo)', who: { kind: 'client', authorization: `token ${TOKENS.aliceRepo}` } },
  { label: 'Bearer alice (repo)', who: { kind: 'client', authorization: `Bearer ${TOKENS.aliceRepo}` } },
  { label: 'Basic alice:alice (repo)', who: { kind: 'client', authorization: basic('alice', TOKENS.aliceRepo) } },
  { label: 'token alice (public_repo)', who: { kind: 'client', authorization: `token ${TOKENS.alicePublic}` } },
  { label: 'token bob (repo)', who: { kind: 'client', authorization: `token ${TOKENS.bobRepo}` } },
  { label: 'token carol (repo)', who: { kind: 'client', authorization: `token ${TOKENS.carolRepo}` } },
  { label: 'unknown token', who: { kind: 'client', authorization: `token ${TOKENS.unknown}` } },
  { label: 'Basic bob:<unknown>', who: { kind: 'client', authorization: basic('bob', TOKENS.unknown) } },
];

const ENDPOINTS = [
  '/repos/alice/secret-project',
  '/repos/etagere-org/internal-tools',
  '/repos/octocat/private-notes',
  '/repos/bob/diary',
  '/repos/octocat/hello-world',
  '/repos/alice/dotfiles',
  '/user',
  '/user/repos',
  '/users/alice/repos',
  '/orgs/etagere-org/repos?type=private',
  '/orgs/etagere-org/repos?per_page=5&page=2',
] as const;
const PRIVATE = /secret-project|internal-tools|private-notes|diary|type=private|\/user/;

type Inm = 'none' | 'own' | 'other' | 'star' | 'bogus';

interface Step {
  who: number;
  endpoint: number;
  method: 'GET' | 'HEAD';
  /** Client credentials may use either route (the pooled one, or the one without a pool). */
  pooledRoute: boolean;
  inm: Inm;
  /** Picks the other credential whose ETag is sent when inm is 'other'. */
  other: number;
  noCache: boolean;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  who: fc.integer({ min: 0, max: WHO.length - 1 }),
  endpoint: fc.integer({ min: 0, max: ENDPOINTS.length - 1 }),
  method: fc.constantFrom('GET' as const, 'HEAD' as const),
  pooledRoute: fc.boolean(),
  inm: fc.constantFrom<Inm>('none', 'none', 'own', 'other', 'other', 'star', 'bogus'),
  other: fc.nat(),
  noCache: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});

interface Direct {
  status: number;
  body: string;
  etag: string | undefined;
  scopes: string | undefined;
}

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v.join(', ') : v);
const opaque = (etag: string): string => etag.trim().replace(/^W\//, '');

/** The direct answer of the fake for each upstream credential (an Authorization value, or '' for none) and endpoint. */
type Oracle = Map<string, Direct>;
const oracleKey = (authorization: string, endpoint: string): string => `${authorization}\n${endpoint}`;

describe('credential isolation at scale: 2 replicas, one Redis, pool and client credentials', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let replicas: TestProxy[] = [];
  let agent: Agent;
  const oracle: Oracle = new Map();

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ tokens: FAKE_TOKENS, anonymousLimit: 100_000_000, tokenLimit: 100_000_000, orgRepoCount: 8 });
    const config = {
      upstreams: [
        // Stored answers go stale after 1 s: the run revalidates (and merges 304s) all the time.
        { name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { max_age_cap_seconds: 1 } },
        { name: 'plain', prefix: '/plain', url: fake.url, strip_prefix: true },
      ],
      pool: { equivalent: false, tokens: Object.entries(POOL).map(([name, value]) => ({ name, value })) },
      // No partition secret configured: the replicas agree on one through Redis.
      redis: { url: redis.url, key_prefix: `iso-scale-${SEED}:` },
    };
    replicas = [await startTestProxy(config), await startTestProxy(config)];
    for (const replica of replicas) await until(async () => replica.redisUp() === true, 5_000, 'a replica to reach Redis');
    agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });

    // The oracle: every upstream credential's direct answer to every endpoint.
    const credentials = [
      '',
      ...Object.values(POOL).map((t) => `token ${t}`),
      ...WHO.flatMap((w) => (w.who.kind === 'client' ? [w.who.authorization] : [])),
    ];
    await Promise.all(
      credentials.flatMap((authorization) =>
        ENDPOINTS.map(async (endpoint) => {
          const res = await request(fake.url + endpoint, { headers: authorization === '' ? {} : { authorization }, dispatcher: agent });
          oracle.set(oracleKey(authorization, endpoint), {
            status: res.statusCode,
            body: await res.body.text(),
            etag: one(res.headers.etag),
            scopes: one(res.headers['x-oauth-scopes']),
          });
        }),
      ),
    );
  }, 60_000);

  afterAll(async () => {
    await agent?.close();
    for (const replica of replicas) await replica.close();
    await fake?.close();
    await redis?.stop();
  });

  it(`${SEQUENCES} random sequences: no answer ever carries what the requesting credential may not see`, async () => {
    const started = performance.now();
    const sequences = fc.sample(fc.array(stepArb, { minLength: 2, maxLength: 6 }), { numRuns: SEQUENCES, seed: SEED });
    const leaks: string[] = [];
    const wrong: string[] = [];
    let requests = 0;
    let privateOk = 0;
    let notModified = 0;
    let foreignEtagAsked = 0;
    let hits = 0;
    const statuses = new Map<number, number>();

    /** The upstream credentials whose direct answer for `endpoint` is a 200 with an ETag. */
    const etagsOf = (endpoint: string): Array<{ authorization: string; etag: string }> => {
      const out: Array<{ authorization: string; etag: string }> = [];
      for (const [key, direct] of oracle) {
        const [authorization, ep] = key.split('\n') as [string, string];
        if (ep === endpoint && direct.status === 200 && direct.etag !== undefined) out.push({ authorization, etag: direct.etag });
      }
      return out;
    };
    const etagTable = new Map(ENDPOINTS.map((e) => [e, etagsOf(e)]));

    const runStep = async (seq: number, index: number, step: Step): Promise<void> => {
      const { label, who } = WHO[step.who]!;
      const endpoint = ENDPOINTS[step.endpoint]!;
      const replica = replicas[(seq + index) % 2]!;
      // Pool consumers use the pooled route, anonymous clients the plain one, clients either.
      const pooledRoute = who.kind === 'pool' || (who.kind === 'client' && step.pooledRoute);
      const url = `${replica.url}${pooledRoute ? '' : '/plain'}${endpoint}`;
      const own = who.kind === 'client' ? who.authorization : '';
      const headers: Record<string, string> = who.kind === 'client' ? { authorization: who.authorization } : {};
      if (step.noCache) headers['cache-control'] = 'no-cache';

      // Whose ETag goes into If-None-Match.
      const candidates = etagTable.get(endpoint)!;
      let inmFrom: string | undefined;
      if (step.inm === 'own' && who.kind !== 'pool') {
        const direct = oracle.get(oracleKey(own, endpoint))!;
        if (direct.etag !== undefined) headers['if-none-match'] = direct.etag;
        inmFrom = own;
      } else if (step.inm === 'own' || step.inm === 'other') {
        // A pool consumer's "own" ETag is one a pool token got; 'other' is any other credential's.
        const pool = Object.values(POOL).map((t) => `token ${t}`);
        const pickFrom = candidates.filter((c) => (step.inm === 'own' ? pool.includes(c.authorization) : c.authorization !== own));
        const pick = pickFrom.length === 0 ? undefined : pickFrom[step.other % pickFrom.length]!;
        if (pick !== undefined) {
          headers['if-none-match'] = pick.etag;
          inmFrom = pick.authorization;
          if (pick.authorization !== own) foreignEtagAsked++;
        }
      } else if (step.inm === 'star') headers['if-none-match'] = '*';
      else if (step.inm === 'bogus') headers['if-none-match'] = 'W/"00000000000000000000"';

      const res = await request(url, { method: step.method, headers, dispatcher: agent });
      // The pooled route rewrites the API addresses in bodies to the replica (rewrite_body_urls): compare in the upstream's terms.
      const received = await res.body.text();
      const body = pooledRoute ? received.replaceAll(`"${replica.url}`, `"${fake.url}`) : received;
      requests++;
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      const etag = one(res.headers.etag);
      const tokenName = one(res.headers['x-etagere-token']);
      if (one(res.headers['cache-status'])?.startsWith('etagere; hit') === true) hits++;
      const what = `seed ${SEED} sequence ${seq} step ${index}: ${step.method} ${pooledRoute ? '' : '/plain'}${endpoint} as ${label} on replica ${(seq + index) % 2} (inm=${step.inm}${inmFrom === undefined ? '' : ` from ${inmFrom === own ? 'self' : 'another credential'}`}, noCache=${step.noCache}) -> ${res.statusCode}${tokenName === undefined ? '' : ` via ${tokenName}`}`;

      // The credential the answer must match: the client's own, none, or the pool token it names.
      let upstreamAuth: string | undefined = own;
      if (who.kind === 'pool') {
        const value = tokenName === undefined ? undefined : POOL[tokenName];
        upstreamAuth = value === undefined ? undefined : `token ${value}`;
      }
      if (upstreamAuth === undefined) {
        // Only an answer that carries nothing may come without a token name: the same error every pool token gets.
        const same = Object.values(POOL).map((t) => oracle.get(oracleKey(`token ${t}`, endpoint))!);
        const carriesNothing =
          res.statusCode >= 400 && same.every((d) => d.status === res.statusCode && (step.method === 'HEAD' || d.body === body));
        if (!carriesNothing) leaks.push(`${what}: a pool answer that names no pool token`);
        return;
      }
      const direct = oracle.get(oracleKey(upstreamAuth, endpoint))!;
      if (res.statusCode === 200 || res.statusCode === 304) {
        if (direct.status !== 200) {
          leaks.push(`${what}: the credential gets ${direct.status} directly`);
          return;
        }
        if (etag !== undefined && etag !== direct.etag) leaks.push(`${what}: ETag of another credential`);
        const scopes = one(res.headers['x-oauth-scopes']);
        if (scopes !== undefined && scopes !== direct.scopes) leaks.push(`${what}: X-OAuth-Scopes of another credential`);
        if (PRIVATE.test(endpoint)) privateOk++;
      }
      if (res.statusCode === 200) {
        if (step.method === 'GET' && body !== direct.body) leaks.push(`${what}: body differs from the credential's direct answer`);
        if (step.method === 'HEAD' && body !== '') wrong.push(`${what}: HEAD with a body`);
        if (etag === undefined) wrong.push(`${what}: 200 without its ETag`);
      } else if (res.statusCode === 304) {
        notModified++;
        const inm = headers['if-none-match'];
        if (inm === undefined) wrong.push(`${what}: 304 to an unconditional request`);
        else if (inm !== '*' && opaque(inm) !== opaque(direct.etag ?? ''))
          leaks.push(`${what}: 304 confirms an ETag the credential does not get`);
        if (body !== '') wrong.push(`${what}: 304 with a body`);
      } else if (res.statusCode === 401 || res.statusCode === 404) {
        if (direct.status !== res.statusCode) wrong.push(`${what}: the credential gets ${direct.status} directly`);
        if (step.method === 'GET' && body !== direct.body) leaks.push(`${what}: error body differs from the direct one`);
      } else {
        wrong.push(`${what}: unexpected status (${body.slice(0, 200)})`);
      }
    };

    let next = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const seq = next++;
        if (seq >= sequences.length) return;
        const steps = sequences[seq]!;
        for (let i = 0; i < steps.length; i++) await runStep(seq, i, steps[i]!);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (performance.now() - started) / 1000;

    const upstreamFromProxies = fake.stats().total - oracle.size;
    const byStatus = [...statuses]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}:${n}`)
      .join(' ');
    console.log(
      `isolation at scale: ${sequences.length} sequences, ${requests} requests, 2 replicas + Redis, leaks ${leaks.length}, ` +
        `other failures ${wrong.length}, ${seconds.toFixed(1)} s (seed ${SEED}; statuses ${byStatus}; 304s ${notModified}; ` +
        `foreign ETags sent ${foreignEtagAsked}; cache hits ${hits}; upstream requests ${upstreamFromProxies})`,
    );
    expect(leaks.slice(0, 20), `${leaks.length} leaks`).toEqual([]);
    expect(wrong.slice(0, 20), `${wrong.length} wrong answers`).toEqual([]);
    // The run reached private data, answered 304s, and the cache answered part of it itself.
    expect(privateOk).toBeGreaterThan(requests / 10);
    expect(notModified).toBeGreaterThan(requests / 50);
    expect(hits).toBeGreaterThan(requests / 10);
  }, 180_000);
});
