/**
 * A consumer key is a consumer key wherever a client puts it: `Authorization: token <key>` (what
 * PyGithub's `login_or_token` and Octokit's `auth` send), `Bearer <key>`, the user or the password
 * of Basic credentials, or X-Etagere-Key. Each identifies its consumer and never leaves the proxy:
 * on the cached path (miss and hit), HEAD, the streaming forward (a Range request), pass-through
 * methods and GraphQL. A scripted upstream records every request it gets, headers and body.
 * Values that are near a key (a prefix, a suffix, another case) are not that key, and are refused:
 * with consumer keys on, only a GitHub-shaped credential goes upstream as the client's own.
 */
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { get, type Answer } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { counterBy } from '../helpers/metrics-text.js';

const POOL_TOKEN = testSecret('consumer-key-anywhere pool token', 'anywhere_pool_token_5b2e91');
const KEYS = {
  web: testSecret('consumer-key-anywhere key web', 'anywhere_key_web_Qx7c41d0'),
  batch: testSecret('consumer-key-anywhere key batch', 'anywhere_key_batch_Rm92f6aa'),
};
/** A client's own token: shaped like GitHub's (src/pool/rules/github-credential.ts), so it may go upstream. */
const OWN = testSecret('consumer-key-anywhere client token', 'ghp_anywhereOwnTokenC0ffee77aa11bb22cc33');
const RESET = Math.floor(Date.now() / 1000) + 3600;

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** Every credential position a client may put its key in. */
const POSITIONS: Array<[string, (key: string) => Record<string, string>]> = [
  ['Authorization: token', (key) => ({ authorization: `token ${key}` })],
  ['Authorization: Bearer', (key) => ({ authorization: `Bearer ${key}` })],
  ['the user of Basic credentials', (key) => ({ authorization: basic(key, '') })],
  ['the password of Basic credentials', (key) => ({ authorization: basic('octocat', key) })],
  ['X-Etagere-Key', (key) => ({ 'x-etagere-key': key })],
];

let upstream: ScriptedUpstream;
let proxy: TestProxy;
let client: Client;

beforeAll(async () => {
  upstream = await startScriptedUpstream((req, res) => {
    const graphql = req.url === '/graphql';
    const limits = {
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4990',
      'x-ratelimit-used': '10',
      'x-ratelimit-reset': String(RESET),
      'x-ratelimit-resource': graphql ? 'graphql' : 'core',
    };
    if (req.url === '/rate_limit') {
      const core = { limit: 5000, remaining: 4990, used: 10, reset: RESET };
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...limits });
      res.end(JSON.stringify({ resources: { core, graphql: core }, rate: core }));
      return;
    }
    if (graphql) {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...limits });
      res.end(JSON.stringify({ data: { viewer: { login: 'pool' } } }));
      return;
    }
    if (req.method === 'POST') {
      res.writeHead(201, { 'content-type': 'application/json; charset=utf-8', ...limits });
      res.end(JSON.stringify({ created: req.url }));
      return;
    }
    const body = JSON.stringify({ path: req.url });
    const range = req.headers.range !== undefined;
    res.writeHead(range ? 206 : 200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'public, max-age=60',
      etag: '"anywhere-v1"',
      ...(range ? { 'content-range': `bytes 0-0/${body.length}` } : {}),
      ...limits,
    });
    res.end(range ? body.slice(0, 1) : body);
  });
  proxy = await startTestProxy(
    resolveSecrets(
      {
        upstreams: [
          {
            name: 'github',
            prefix: '/',
            url: upstream.url,
            token_pool: true,
            pass_through: true,
            graphql: true,
            cache: { policy: 'max-age' },
          },
        ],
        pool: { tokens: [{ name: 'a', value: POOL_TOKEN }] },
        consumers: {
          enabled: true,
          keys: [
            { name: 'web', value: KEYS.web },
            { name: 'batch', value: KEYS.batch },
          ],
        },
      },
      {},
    ),
  );
  // One keep-alive connection: a key sent on it after another credential (and the other way round)
  // must still be told apart.
  client = new Client(proxy.url, { pipelining: 1 });
});
afterAll(async () => {
  await client?.close();
  await proxy?.close();
  await upstream?.close();
});

async function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const res = await client.request({ method: method as 'GET', path, headers, body });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/** Requests per consumer so far, from /metrics. */
async function consumerRequests(): Promise<Record<string, number>> {
  const text = (await get(`${proxy.adminUrl}/metrics`)).body;
  return counterBy(text, 'etagere_consumer_requests_total', 'consumer');
}

/** Runs `act` and returns by how much each consumer's request count moved. */
async function countedAs(act: () => Promise<void>): Promise<Record<string, number>> {
  const before = await consumerRequests();
  await act();
  const after = await consumerRequests();
  const moved: Record<string, number> = {};
  for (const [name, count] of Object.entries(after)) if (count !== (before[name] ?? 0)) moved[name] = count - (before[name] ?? 0);
  return moved;
}

/** Whether a recorded request carries `secret`: as it is anywhere, or inside Basic credentials. */
function carries(request: ScriptedUpstream['seen'][number], secret: string): boolean {
  if (`${request.url}\n${JSON.stringify(request.headers)}\n${request.body}`.includes(secret)) return true;
  const auth = request.headers.authorization ?? '';
  const basicValue = /^\s*basic\s+(\S+)/i.exec(auth);
  return basicValue !== null && Buffer.from(basicValue[1]!, 'base64').toString('utf8').includes(secret);
}

/** The requests the upstream got since `from`; none may carry a consumer key. */
function seenSince(from: number): ScriptedUpstream['seen'] {
  const seen = upstream.seen.slice(from);
  for (const request of seen)
    for (const key of Object.values(KEYS)) expect(carries(request, key), `${request.method} ${request.url}`).toBe(false);
  return seen;
}

let unique = 0;
const fresh = (what: string): string => `/repos/octocat/${what}-${++unique}`;

describe.each(POSITIONS)('a consumer key sent as %s', (_position, place) => {
  it('GET and HEAD are served from the pool as that consumer (miss, then hit), and the key never reaches the upstream', async () => {
    const from = upstream.seen.length;
    const path = fresh('get');
    const moved = await countedAs(async () => {
      const miss = await send('GET', path, { accept: 'application/json', ...place(KEYS.batch) });
      expect(miss.status, miss.body).toBe(200);
      expect(miss.headers['x-etagere-token']).toBe('a');
      const hit = await send('GET', path, { accept: 'application/json', ...place(KEYS.batch) });
      expect(hit.status).toBe(200);
      expect(hit.headers['cache-status']).toMatch(/^etagere; hit/);
      const head = await send('HEAD', path, place(KEYS.batch));
      expect(head.status).toBe(200);
    });
    expect(moved).toEqual({ batch: 3 });
    const seen = seenSince(from);
    expect(seen.length).toBeGreaterThan(0);
    for (const request of seen) expect(request.headers.authorization).toBe(`token ${POOL_TOKEN}`);
  });

  it('the streaming forward (a Range request) goes on a pool token, without the key', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      const ranged = await send('GET', fresh('range'), { range: 'bytes=0-0', ...place(KEYS.web) });
      expect(ranged.status).toBe(206);
    });
    expect(moved).toEqual({ web: 1 });
    expect(seenSince(from).map((request) => request.headers.authorization)).toEqual([`token ${POOL_TOKEN}`]);
  });

  it('a passed-through POST never carries the key upstream', async () => {
    const from = upstream.seen.length;
    const created = await send('POST', fresh('issues'), { 'content-type': 'application/json', ...place(KEYS.web) }, '{"title":"t"}');
    expect(created.status).toBe(201);
    const seen = seenSince(from);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.method).toBe('POST');
    expect(seen[0]!.headers.authorization).toBeUndefined();
    expect(seen[0]!.body).toBe('{"title":"t"}');
  });

  it('a GraphQL query is run on a pool token as that consumer, without the key', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      const answered = await send(
        'POST',
        '/graphql',
        { 'content-type': 'application/json', ...place(KEYS.web) },
        // A variable of its own makes each call another query (a comment would not: GraphQL answers are cached by the printed document).
        JSON.stringify({ query: '{ viewer { login } }', variables: { unique: ++unique } }),
      );
      expect(answered.status, answered.body).toBe(200);
      expect(JSON.parse(answered.body)).toEqual({ data: { viewer: { login: 'pool' } } });
    });
    expect(moved).toEqual({ web: 1 });
    const seen = seenSince(from);
    expect(seen.map((request) => [request.url, request.headers.authorization])).toEqual([['/graphql', `token ${POOL_TOKEN}`]]);
  });
});

describe('hostile: values near a key, and keys in two places', () => {
  const near = (key: string): string[] => [
    key.slice(0, -1), // a prefix
    key.slice(1), // a suffix
    `${key}x`,
    `x${key}`,
    key.toUpperCase(),
    key.replace(/.$/, (last) => String.fromCharCode(last.charCodeAt(0) ^ 1)),
  ];

  it('a near-key in X-Etagere-Key is refused with 401 JSON and goes nowhere', async () => {
    const from = upstream.seen.length;
    for (const value of near(KEYS.web)) {
      const refused = await send('GET', fresh('near'), { 'x-etagere-key': value });
      expect(refused.status, value).toBe(401);
      expect(JSON.parse(refused.body)).toMatchObject({
        message: expect.stringMatching(/consumer key/),
        documentation_url: expect.any(String),
      });
    }
    expect(seenSince(from)).toHaveLength(0);
  });

  it('a near-key in Authorization is not that consumer, and is refused with 401 JSON: it never goes upstream', async () => {
    for (const value of near(KEYS.web))
      for (const authorization of [`token ${value}`, `Bearer ${value}`, basic(value, ''), basic('octocat', value)]) {
        const from = upstream.seen.length;
        const moved = await countedAs(async () => {
          for (const method of ['GET', 'POST']) {
            const answered = await send(
              method,
              fresh('near-auth'),
              { authorization, 'content-type': 'application/json' },
              method === 'POST' ? '{}' : undefined,
            );
            expect(answered.status, `${method} ${authorization}`).toBe(401);
            expect(JSON.parse(answered.body)).toMatchObject({ message: expect.stringMatching(/^Bad credentials: .*not sent upstream/) });
          }
        });
        expect(moved, authorization).toEqual({});
        expect(upstream.seen.slice(from), authorization).toHaveLength(0);
      }
  });

  it('a key with whitespace around it, or the scheme in another case, is still the key', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      for (const headers of [
        { authorization: `TOKEN ${KEYS.web}` } as Record<string, string>,
        { authorization: `bearer    ${KEYS.web}   ` },
        { authorization: `token ${KEYS.web} trailing-junk` },
        { authorization: KEYS.web },
        { authorization: `bAsIc ${Buffer.from(`${KEYS.web}:`).toString('base64')}` },
        { 'x-etagere-key': `  ${KEYS.web}\t` },
      ]) {
        const answered = await send('GET', fresh('spaced'), headers);
        expect(answered.status, JSON.stringify(headers)).toBe(200);
      }
    });
    expect(moved).toEqual({ web: 6 });
    for (const request of seenSince(from)) expect(request.headers.authorization).toBe(`token ${POOL_TOKEN}`);
  });

  it('a wrong X-Etagere-Key is refused whatever Authorization holds; a right key in Basic credentials next to a wrong one identifies', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      for (const headers of [
        { 'x-etagere-key': `${KEYS.web}x`, authorization: `token ${KEYS.batch}` } as Record<string, string>,
        { 'x-etagere-key': 'wrong-key', authorization: basic('wrong-key', KEYS.batch) },
        { 'x-etagere-key': 'wrong-key', authorization: `token ${OWN}` },
      ]) {
        const refused = await send('GET', fresh('mixed'), headers);
        expect(refused.status, JSON.stringify(headers)).toBe(401);
        expect(JSON.parse(refused.body)).toMatchObject({ message: expect.stringMatching(/^Unknown consumer key/) });
      }
      for (const headers of [{ authorization: basic(`${KEYS.web}x`, KEYS.batch) }, { authorization: basic(KEYS.batch, `${KEYS.web}x`) }]) {
        const answered = await send('GET', fresh('mixed'), headers);
        expect(answered.status, JSON.stringify(headers)).toBe(200);
      }
    });
    expect(moved).toEqual({ batch: 2 });
    const seen = seenSince(from);
    expect(seen).toHaveLength(2);
    for (const request of seen) expect(request.headers.authorization).toBe(`token ${POOL_TOKEN}`);
    for (const request of seen) expect(carries(request, 'wrong-key')).toBe(false);
  });

  it('GitHub credentials of every shape go upstream as the client’s own: tokens, Basic with a token, a GitHub App’s JWT', async () => {
    const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
    const appJwt = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64({ iat: 1, exp: 2, iss: 4242 })}.c2lnbmF0dXJl`;
    const forwarded = [
      `token ${OWN}`,
      `Bearer github_pat_11AAAAAAA0123456789abc_${'z'.repeat(59)}`,
      'token a94a8fe5ccb19ba61c4c0873d391e987982fbbd3',
      basic('x-access-token', `ghs_${'k'.repeat(36)}`),
      `Bearer ${appJwt}`,
    ];
    const from = upstream.seen.length;
    for (const authorization of forwarded) expect((await send('GET', fresh('shapes'), { authorization })).status, authorization).toBe(200);
    expect(seenSince(from).map((request) => request.headers.authorization)).toEqual(forwarded);
  });

  it('a right X-Etagere-Key next to an Authorization that is neither a key nor a GitHub credential: 401, nothing upstream', async () => {
    const from = upstream.seen.length;
    for (const authorization of [`token ${KEYS.web}x`, 'Bearer not-a-github-token', basic('octocat', 'hunter2')]) {
      const refused = await send('GET', fresh('key-and-foreign'), { 'x-etagere-key': KEYS.web, authorization });
      expect(refused.status, authorization).toBe(401);
    }
    expect(seenSince(from)).toHaveLength(0);
  });

  it('two keys: X-Etagere-Key names the consumer, and the other key does not go upstream either', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      const answered = await send('GET', fresh('two-keys'), { 'x-etagere-key': KEYS.web, authorization: `token ${KEYS.batch}` });
      expect(answered.status).toBe(200);
    });
    expect(moved).toEqual({ web: 1 });
    expect(seenSince(from).map((request) => request.headers.authorization)).toEqual([`token ${POOL_TOKEN}`]);
  });

  it('a client’s own token next to a key is the client’s, on every path, and the key stays behind', async () => {
    const from = upstream.seen.length;
    const moved = await countedAs(async () => {
      const own = { authorization: `token ${OWN}`, 'x-etagere-key': KEYS.web };
      expect((await send('GET', fresh('own'), own)).status).toBe(200);
      expect((await send('POST', fresh('own-post'), own, '{}')).status).toBe(201);
      const graphql = await send('POST', '/graphql', { ...own, 'content-type': 'application/json' }, '{"query":"{ viewer { login } }"}');
      expect(graphql.status).toBe(200);
    });
    expect(moved).toEqual({});
    const seen = seenSince(from);
    expect(seen.map((request) => request.headers.authorization)).toEqual([`token ${OWN}`, `token ${OWN}`, `token ${OWN}`]);
  });

  it('on one keep-alive connection, a client token, a key and the token again are each told apart', async () => {
    const from = upstream.seen.length;
    const sequence = [`token ${OWN}`, `token ${KEYS.web}`, `token ${OWN}`, `token ${KEYS.batch}`, `token ${KEYS.batch}`, `token ${OWN}`];
    const moved = await countedAs(async () => {
      for (const authorization of sequence) expect((await send('GET', fresh('conn'), { authorization })).status).toBe(200);
    });
    expect(moved).toEqual({ web: 1, batch: 2 });
    expect(seenSince(from).map((request) => request.headers.authorization)).toEqual([
      `token ${OWN}`,
      `token ${POOL_TOKEN}`,
      `token ${OWN}`,
      `token ${POOL_TOKEN}`,
      `token ${POOL_TOKEN}`,
      `token ${OWN}`,
    ]);
  });
});
