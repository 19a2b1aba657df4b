/**
 * OIDC identities as consumers: a GitHub-Actions-style token, signed in the test and verified
 * against a real JWKS served on loopback (found through the issuer's discovery document), reads
 * its own repository and nothing else. Expired, not-yet-valid, wrong-audience, bad-signature,
 * unknown-issuer, `alg: none` and HMAC-with-the-public-key tokens get a 401 JSON saying which
 * check failed, with no upstream request; a rotated key is fetched on its unknown kid; the
 * identity is the consumer in metrics; no token reaches the upstream, the logs or the metrics.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Octokit } from '@octokit/rest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOidcVerifier, type OidcIssuer } from '../../src/pool/consumers/oidc.js';
import { get } from '../helpers/http.js';
import { counterSum } from '../helpers/metrics-text.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const AUDIENCE = 'https://etagere.example';
const POOL_TOKEN = testSecret('oidc-consumers pool token', 'oidc_pool_token_3b7f0c91');

/** An OIDC issuer on loopback: discovery, a JWKS it can rotate or take down, and a count of JWKS fetches. */
interface Issuer {
  url: string;
  keys: JWK[];
  up: boolean;
  jwksFetches: number;
  close(): Promise<void>;
}

async function startIssuer(): Promise<Issuer> {
  const issuer = { url: '', keys: [] as JWK[], up: true, jwksFetches: 0, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    if (!issuer.up) {
      res.writeHead(503).end();
      return;
    }
    if (req.url === '/.well-known/openid-configuration') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ issuer: issuer.url, jwks_uri: `${issuer.url}/jwks` }));
      return;
    }
    if (req.url === '/jwks') {
      issuer.jwksFetches++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: issuer.keys }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  issuer.close = () =>
    new Promise<undefined>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve(undefined));
    });
  return issuer;
}

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function signingKey(kid: string, alg: 'RS256' | 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** A GitHub-Actions-style token (repository, repository_owner, ...), signed with `key`, registered with the secrets scan. */
async function actionsToken(
  key: SigningKey,
  issuer: string,
  claims: Record<string, unknown> = {},
  options: { audience?: string; expiresIn?: number; notBefore?: number } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = await new SignJWT({ repository: 'acme/widget', repository_owner: 'acme', workflow: 'ci', ...claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setAudience(options.audience ?? AUDIENCE)
    .setSubject('repo:acme/widget:ref:refs/heads/main')
    .setIssuedAt(now - 10)
    .setNotBefore(options.notBefore ?? now - 10)
    .setExpirationTime(now + (options.expiresIn ?? 300))
    .sign(key.privateKey);
  return testSecret(`oidc-consumers token ${JSON.stringify(claims)}`, jwt);
}

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

let issuer: Issuer;
let rsa: SigningKey;
let ec: SigningKey;

const issuerConfig = (overrides: Partial<OidcIssuer> = {}): OidcIssuer => ({
  name: 'actions',
  issuer: issuer.url,
  audience: AUDIENCE,
  jwks_url: null,
  name_claim: 'repository',
  allow: [{ paths: ['/repos/${repository}/**'], methods: ['GET', 'HEAD'] }],
  required_claims: [{ claim: 'repository_owner', values: ['acme'] }],
  max_names: 100,
  ...overrides,
});

beforeAll(async () => {
  issuer = await startIssuer();
  rsa = await signingKey('rsa-1', 'RS256');
  ec = await signingKey('ec-1', 'ES256');
  issuer.keys = [rsa.publicJwk, ec.publicJwk];
});
afterAll(async () => {
  await issuer?.close();
});

describe('the OIDC verifier', () => {
  it('takes a valid token signed by a key of the JWKS, and remembers it', async () => {
    const verifier = createOidcVerifier([issuerConfig()]);
    const token = await actionsToken(ec, issuer.url);
    const first = await verifier.verify(token);
    expect(first).toMatchObject({ kind: 'consumer', identity: { name: 'acme/widget', account: 'actions' } });
    const fetches = issuer.jwksFetches;
    expect(verifier.verify(token)).toMatchObject({ kind: 'consumer' }); // at once: no promise, no fetch
    expect(issuer.jwksFetches).toBe(fetches);
    expect(verifier.memoBytes).toBeGreaterThan(0);
  });

  it('says which check a bad token failed', async () => {
    const verifier = createOidcVerifier([issuerConfig()]);
    const other = await signingKey('rsa-1', 'RS256'); // the same kid, another key
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, string]> = [
      [await actionsToken(rsa, issuer.url, {}, { expiresIn: -120 }), 'token expired'],
      [await actionsToken(rsa, issuer.url, {}, { notBefore: now + 300 }), 'token not yet valid'],
      [await actionsToken(rsa, issuer.url, {}, { audience: 'https://someone-else.example' }), 'wrong audience'],
      [await actionsToken(other, issuer.url), 'bad signature'],
      [await actionsToken(rsa, issuer.url, { repository_owner: 'evil' }), 'claim repository_owner not allowed'],
      [await actionsToken(rsa, issuer.url, { repository: undefined }), 'claim repository missing or not a name'],
      [
        testSecret(
          'oidc alg none',
          `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: issuer.url, aud: AUDIENCE, exp: now + 300, repository: 'acme/widget', repository_owner: 'acme' })}.`,
        ),
        'algorithm not allowed',
      ],
    ];
    // HS256 signed with the issuer's public key as the shared secret.
    const secret = new TextEncoder().encode(JSON.stringify(rsa.publicJwk));
    const hmac = await new SignJWT({ repository: 'acme/widget', repository_owner: 'acme' })
      .setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' })
      .setIssuer(issuer.url)
      .setAudience(AUDIENCE)
      .setExpirationTime(now + 300)
      .sign(secret);
    cases.push([testSecret('oidc hs256', hmac), 'algorithm not allowed']);
    for (const [token, check] of cases) expect(await verifier.verify(token), check).toEqual({ kind: 'refused', reason: 'token', check });
  });

  it('leaves a token of an issuer it does not know to the caller', async () => {
    const verifier = createOidcVerifier([issuerConfig()]);
    const token = await actionsToken(rsa, 'https://token.elsewhere.example');
    expect(verifier.ours(token)).toBe(false);
    expect(await verifier.verify(token)).toEqual({ kind: 'not-ours' });
  });

  it('refuses a claim value that would widen its scope', async () => {
    const verifier = createOidcVerifier([issuerConfig({ required_claims: [] })]);
    for (const repository of ['acme/*', 'acme/..', 'acme/widget/more'])
      expect(await verifier.verify(await actionsToken(rsa, issuer.url, { repository })), repository).toMatchObject({ kind: 'refused' });
    const bound = createOidcVerifier([issuerConfig({ required_claims: [], name_claim: 'workflow' })]);
    expect(await bound.verify(await actionsToken(rsa, issuer.url, { repository: 'acme/*' }))).toEqual({
      kind: 'refused',
      reason: 'claim',
      consumer: 'ci',
      claim: 'repository',
    });
  });

  it('fetches the JWKS again for an unknown kid (a rotated key)', async () => {
    const verifier = createOidcVerifier([issuerConfig()], { cooldownMs: 0 });
    expect(await verifier.verify(await actionsToken(rsa, issuer.url))).toMatchObject({ kind: 'consumer' });
    const rotated = await signingKey('rsa-2', 'RS256');
    issuer.keys = [rsa.publicJwk, ec.publicJwk, rotated.publicJwk];
    const before = issuer.jwksFetches;
    expect(await verifier.verify(await actionsToken(rotated, issuer.url, { workflow: 'rotated' }))).toMatchObject({ kind: 'consumer' });
    expect(issuer.jwksFetches).toBe(before + 1);
    issuer.keys = [rsa.publicJwk, ec.publicJwk];
  });

  it('fails closed when the issuer cannot be reached', async () => {
    const verifier = createOidcVerifier([issuerConfig()]);
    issuer.up = false;
    try {
      expect(await verifier.verify(await actionsToken(rsa, issuer.url, { workflow: 'down' }))).toEqual({
        kind: 'refused',
        reason: 'token',
        check: "could not verify the token: the issuer's keys could not be fetched",
      });
    } finally {
      issuer.up = true;
    }
  });
});

describe('an OIDC consumer through the proxy', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'public, max-age=60',
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '4990',
        'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
        'x-ratelimit-resource': 'core',
      });
      res.end(JSON.stringify({ full_name: req.url }));
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: upstream.url, token_pool: true, cache: { policy: 'max-age' } }],
      pool: { tokens: [{ name: 'a', value: POOL_TOKEN }], probe_at_start: false },
      consumers: { enabled: true, oidc: [issuerConfig()] },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('reads its own repository only, in X-Etagere-Key or as a Bearer token', async () => {
    const token = await actionsToken(rsa, issuer.url, { run: 'own-repo' });
    const own = await get(`${proxy.url}/repos/acme/widget/actions/runs`, { 'x-etagere-key': token });
    expect(own.status).toBe(200);
    const sent = upstream.seen.at(-1)!;
    expect(sent.headers.authorization).toBe(`token ${POOL_TOKEN}`);
    expect(JSON.stringify(sent.headers)).not.toContain(token);
    expect((await get(`${proxy.url}/repos/acme/widget`, { authorization: `Bearer ${token}` })).status).toBe(200);
    expect(JSON.stringify(upstream.seen.at(-1)!.headers)).not.toContain(token);
    const before = upstream.seen.length;
    const other = await get(`${proxy.url}/repos/acme/other`, { 'x-etagere-key': token });
    expect(other.status).toBe(403);
    expect(JSON.parse(other.body)).toMatchObject({ message: expect.stringContaining('"acme/widget"') as unknown });
    expect(upstream.seen.length).toBe(before);
  });

  it('works with Octokit', async () => {
    const token = await actionsToken(ec, issuer.url, { run: 'octokit' });
    // Octokit sends a JWT-shaped auth as `Authorization: bearer <token>`.
    const octokit = new Octokit({ baseUrl: proxy.url, auth: token, log: { debug() {}, info() {}, warn() {}, error() {} } });
    const { status, data } = await octokit.rest.repos.get({ owner: 'acme', repo: 'widget' });
    expect(status).toBe(200);
    expect(data).toMatchObject({ full_name: '/repos/acme/widget' });
    await expect(octokit.rest.repos.get({ owner: 'acme', repo: 'other' })).rejects.toMatchObject({ status: 403 });
    // Octokit still sends its auth in Authorization next to the header: neither goes upstream.
    const viaKeyHeader = await octokit.request('GET /repos/{owner}/{repo}/pulls', {
      owner: 'acme',
      repo: 'widget',
      headers: { authorization: '', 'x-etagere-key': token },
    });
    expect(viaKeyHeader.status).toBe(200);
    expect(JSON.stringify(upstream.seen.at(-1)!.headers)).not.toContain(token);
  });

  it('answers a bad token 401 JSON naming the failed check, never the token, and sends nothing upstream', async () => {
    const now = Math.floor(Date.now() / 1000);
    const stranger = await signingKey('rsa-1', 'RS256');
    const cases: Array<[string, string]> = [
      [await actionsToken(rsa, issuer.url, { run: 'expired' }, { expiresIn: -120 }), 'token expired'],
      [await actionsToken(rsa, issuer.url, { run: 'aud' }, { audience: 'https://other.example' }), 'wrong audience'],
      [await actionsToken(stranger, issuer.url, { run: 'forged' }), 'bad signature'],
      [await actionsToken(rsa, 'https://token.elsewhere.example', { run: 'unknown' }), 'unknown issuer'],
      [await actionsToken(rsa, issuer.url, { run: 'early' }, { notBefore: now + 300 }), 'token not yet valid'],
      [
        testSecret(
          'oidc proxy hs256',
          await new SignJWT({ repository: 'acme/widget', repository_owner: 'acme' })
            .setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' })
            .setIssuer(issuer.url)
            .setAudience(AUDIENCE)
            .setExpirationTime(now + 300)
            .sign(new TextEncoder().encode(JSON.stringify(rsa.publicJwk))),
        ),
        'algorithm not allowed',
      ],
      [testSecret('oidc proxy garbage', 'eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln'), 'malformed token'],
      [
        testSecret(
          'oidc proxy alg none',
          `${b64({ alg: 'none' })}.${b64({ iss: issuer.url, aud: AUDIENCE, exp: now + 300, repository: 'acme/widget', repository_owner: 'acme' })}.`,
        ),
        'algorithm not allowed',
      ],
    ];
    for (const [token, check] of cases) {
      const before = upstream.seen.length;
      const answer = await get(`${proxy.url}/repos/acme/widget`, { 'x-etagere-key': token });
      expect(answer.status, check).toBe(401);
      const body = JSON.parse(answer.body) as { message: string; documentation_url: string };
      expect(body.message).toBe(`Bad consumer token: ${check}`);
      expect(answer.body).not.toContain(token.split('.')[1]!);
      expect(upstream.seen.length, check).toBe(before);
    }
  });

  it('answers 403 naming the consumer when a claim value would widen its scope', async () => {
    const token = await actionsToken(rsa, issuer.url, { repository: 'acme/..', run: 'widen' });
    const before = upstream.seen.length;
    const answer = await get(`${proxy.url}/repos/acme/widget`, { 'x-etagere-key': token });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({
      message: expect.stringContaining('claim "repository" of consumer "acme/.."') as unknown,
    });
    expect(upstream.seen.length).toBe(before);
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { reason: 'claim' })).toBe(1);
  });

  it('is the consumer in metrics, and no token reaches the logs or the metrics', async () => {
    const token = await actionsToken(rsa, issuer.url, { run: 'metrics' });
    expect((await get(`${proxy.url}/repos/acme/widget/pulls`, { 'x-etagere-key': token })).status).toBe(200);
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'acme/widget' })).toBeGreaterThan(0);
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { consumer: '-', reason: 'token' })).toBeGreaterThanOrEqual(5);
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { consumer: 'acme/widget', reason: 'scope' })).toBeGreaterThan(0);
    const consumers = (await (await fetch(`${proxy.adminUrl}/admin/consumers`)).json()) as {
      consumers: Array<{ name: string; oidc: string | null; requests: number }>;
    };
    expect(consumers.consumers.map((c) => c.name)).toEqual(expect.arrayContaining(['acme/widget', 'actions']));
    // Each OIDC row says what it counts: a token name its requests, the issuer the quota of all its names.
    const row = (name: string) => consumers.consumers.find((c) => c.name === name)!;
    expect(row('acme/widget')).toMatchObject({ oidc: 'requests by name' });
    expect(row('acme/widget').requests).toBeGreaterThan(0);
    expect(row('actions')).toMatchObject({ oidc: 'quota by issuer', weight: expect.any(Number) });
    for (const text of [metrics, proxy.logText(), JSON.stringify(consumers)]) expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.eyJ/);
  });
});

/** A key set on loopback that can be broken on purpose, and a count of its fetches. */
interface FaultyJwks {
  url: string;
  fault: 'none' | 503 | 'bad-json' | 'not-a-key-set' | 'hang' | 'reset';
  keys: JWK[];
  fetches: number;
  close(): Promise<void>;
}

async function startFaultyJwks(): Promise<FaultyJwks> {
  const jwks: FaultyJwks = { url: '', fault: 'none', keys: [], fetches: 0, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    jwks.fetches++;
    if (jwks.fault === 'hang') return; // never answers: the fetch times out
    if (jwks.fault === 'reset') return void req.socket.destroy(); // a connection error
    if (jwks.fault === 503) return void res.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"unavailable"}');
    res.writeHead(200, { 'content-type': 'application/json' });
    if (jwks.fault === 'bad-json') return void res.end('{"keys": [');
    if (jwks.fault === 'not-a-key-set') return void res.end('{"keys": "none"}');
    res.end(JSON.stringify({ keys: jwks.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  jwks.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
  jwks.close = () =>
    new Promise<undefined>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve(undefined));
    });
  return jwks;
}

const UNFETCHED = "could not verify the token: the issuer's keys could not be fetched";

describe("an issuer's failing key set", () => {
  let jwks: FaultyJwks;
  let stranger: SigningKey;
  beforeAll(async () => {
    jwks = await startFaultyJwks();
    stranger = await signingKey('forger', 'RS256');
  });
  afterAll(async () => {
    await jwks?.close();
  });

  /** A token naming the configured issuer, signed by a key it never published, with a kid of its own. */
  const forged = async (nth: number): Promise<string> =>
    actionsToken({ ...stranger, kid: `forged-${nth}` }, issuer.url, { run: `forged-${nth}` });

  it.each([503, 'bad-json', 'not-a-key-set', 'hang', 'reset'] as const)(
    'answering %s, it is fetched at most 5 times for 200 forged tokens, each refused 401 from memory',
    async (fault) => {
      jwks.fault = fault;
      jwks.fetches = 0;
      const verifier = createOidcVerifier([issuerConfig({ jwks_url: jwks.url })], { timeoutMs: 300 });
      const tokens = await Promise.all(Array.from({ length: 200 }, (_, nth) => forged(nth)));
      // Half at once (they share one fetch), half one after the other (refused from memory).
      const results = await Promise.all(tokens.slice(0, 100).map((token) => verifier.verify(token)));
      for (const token of tokens.slice(100)) results.push(await verifier.verify(token));
      for (const result of results) expect(result).toEqual({ kind: 'refused', reason: 'token', check: UNFETCHED });
      expect(jwks.fetches).toBeGreaterThanOrEqual(1);
      expect(jwks.fetches).toBeLessThanOrEqual(5);
    },
  );

  it('an unreachable key set (connection refused) is remembered the same way', async () => {
    const closed = await startFaultyJwks();
    await closed.close();
    const verifier = createOidcVerifier([issuerConfig({ jwks_url: closed.url })]);
    for (let nth = 0; nth < 20; nth++)
      expect(await verifier.verify(await forged(nth))).toEqual({ kind: 'refused', reason: 'token', check: UNFETCHED });
  });

  it('is tried again after 30 s, then after 60, 120, 240 and 300 s while it keeps failing; once it answers, tokens verify', async () => {
    jwks.fault = 503;
    jwks.fetches = 0;
    jwks.keys = [rsa.publicJwk];
    let clock = Date.now();
    const verifier = createOidcVerifier([issuerConfig({ jwks_url: jwks.url })], { now: () => clock });
    const attempt = async (nth: number) => verifier.verify(await forged(nth));
    await attempt(0);
    expect(jwks.fetches).toBe(1);
    let nth = 1;
    for (const wait of [30_000, 60_000, 120_000, 240_000, 300_000, 300_000]) {
      const before = jwks.fetches;
      clock += wait - 1_000;
      await attempt(nth++);
      expect(jwks.fetches, `${wait - 1_000} ms after the last failure`).toBe(before);
      clock += 1_000;
      await attempt(nth++);
      expect(jwks.fetches, `${wait} ms after it`).toBe(before + 1);
    }
    jwks.fault = 'none';
    clock += 300_000;
    const valid = createOidcVerifier([issuerConfig({ jwks_url: jwks.url })]);
    expect(await valid.verify(await actionsToken(rsa, issuer.url, { run: 'back' }))).toMatchObject({ kind: 'consumer' });
    // The stamped verifier's wait is over: its fetch succeeds (the forged token's kid is still nobody's).
    const before = jwks.fetches;
    expect(await attempt(nth++)).toMatchObject({ check: "no key of the issuer's key set matches the token" });
    expect(jwks.fetches).toBe(before + 1);
  });

  it('keeps verifying with the keys it holds while the key set fails; an unknown kid costs at most one fetch per 30 s', async () => {
    jwks.fault = 'none';
    jwks.fetches = 0;
    jwks.keys = [rsa.publicJwk];
    let clock = Date.now();
    const verifier = createOidcVerifier([issuerConfig({ jwks_url: jwks.url })], { now: () => clock });
    expect(await verifier.verify(await actionsToken(rsa, issuer.url, { run: 'held-1' }))).toMatchObject({ kind: 'consumer' });
    expect(jwks.fetches).toBe(1);
    // Unknown kids within the cooldown: no fetch at all.
    for (let nth = 0; nth < 100; nth++)
      expect(await verifier.verify(await forged(nth))).toMatchObject({ check: "no key of the issuer's key set matches the token" });
    expect(jwks.fetches).toBe(1);
    // Past it, with the key set down: one fetch, then the failure is remembered.
    jwks.fault = 503;
    clock += 31_000;
    for (let nth = 100; nth < 200; nth++) expect(await verifier.verify(await forged(nth))).toMatchObject({ kind: 'refused' });
    expect(jwks.fetches).toBe(2);
    // A token signed with a key it holds still verifies meanwhile.
    expect(await verifier.verify(await actionsToken(rsa, issuer.url, { run: 'held-2' }))).toMatchObject({ kind: 'consumer' });
    expect(jwks.fetches).toBe(2);
  });

  it('through the proxy: 200 forged-token requests cost at most 5 fetches of a key set answering 503, nothing upstream', async () => {
    jwks.fault = 503;
    jwks.fetches = 0;
    const upstream = await startScriptedUpstream((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    const proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: upstream.url, token_pool: true }],
      pool: { tokens: [{ name: 'a', value: POOL_TOKEN }], probe_at_start: false },
      consumers: { enabled: true, oidc: [issuerConfig({ jwks_url: jwks.url })] },
    });
    try {
      const tokens = await Promise.all(Array.from({ length: 200 }, (_, nth) => forged(1_000 + nth)));
      for (let batch = 0; batch < 200; batch += 20) {
        const answers = await Promise.all(
          tokens.slice(batch, batch + 20).map((token) => get(`${proxy.url}/repos/acme/widget`, { 'x-etagere-key': token })),
        );
        for (const answer of answers) {
          expect(answer.status).toBe(401);
          expect(JSON.parse(answer.body)).toMatchObject({ message: `Bad consumer token: ${UNFETCHED}` });
        }
      }
      expect(jwks.fetches).toBeLessThanOrEqual(5);
      expect(upstream.seen).toHaveLength(0);
    } finally {
      await proxy.close();
      await upstream.close();
    }
  });
});
