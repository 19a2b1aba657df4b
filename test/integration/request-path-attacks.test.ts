/**
 * Attacks on the request path, each attack first, against a scripted upstream whose every answer
 * the test controls:
 *   - the cache key is built from exactly the headers the upstream receives
 *   - a credential the upstream rejected never reads its entries again (max-stale, only-if-cached,
 *     stale-if-error)
 *   - an empty or blank Authorization counts as absent
 *   - pooled requests forward only an allowlist; pool consumers never see a pool token's scopes or
 *     expiry; the admin port answers only to a loopback (or configured) Host
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** GET with exactly these headers (node:http lets a test send Connection and Host as it likes). */
function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'GET', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Raw bytes in, everything until the server closes out (5 s deadline). */
function raw(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within 5 s; got ${JSON.stringify(text)}`));
    }, 5_000);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.on('error', () => undefined);
  });
}

const POOL_TOKEN = 'pool_token_attacks_0123456789';
const CLIENT_TOKEN = 'client_token_attacks_abcdefgh';
const OTHER_CLIENT = 'client_token_attacks_zyxwvuts';
const CONSUMER_KEY = 'consumer_key_attacks_secret';

/** Upstream state the tests steer. */
const revoked = new Set<string>();
const forbidden = new Set<string>();
let failing = false;

function upstreamAnswer(url: string, headers: IncomingHttpHeaders): { status: number; headers: Record<string, string>; body: string } {
  const json = { 'content-type': 'application/json; charset=utf-8' };
  const authorization = headers.authorization;
  if (url.startsWith('/private/')) {
    if (failing) return { status: 503, headers: json, body: '{"message":"Service Unavailable"}' };
    if (authorization !== undefined && revoked.has(authorization))
      return { status: 401, headers: json, body: '{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}' };
    if (forbidden.has(url)) return { status: 403, headers: json, body: '{"message":"Resource not accessible by personal access token"}' };
    const body = JSON.stringify({ secret: `private data of ${url} for ${authorization === undefined ? 'nobody' : 'a token'}` });
    // Stale at once (max-age=0): only max-stale, only-if-cached or stale-if-error can serve it.
    return { status: 200, headers: { ...json, 'cache-control': 'private, max-age=0', etag: `W/"${url.length}"` }, body };
  }
  if (url.startsWith('/versioned')) {
    const body = JSON.stringify({ version: headers['x-github-api-version'] ?? 'default', accept: headers.accept ?? 'default' });
    return { status: 200, headers: { ...json, 'cache-control': 'public, max-age=60', vary: 'Accept' }, body };
  }
  const tokenHeaders = {
    'x-oauth-scopes': 'repo, read:org',
    'github-authentication-token-expiration': '2030-01-01 00:00:00 UTC',
    'x-accepted-oauth-scopes': 'repo',
  };
  return {
    status: 200,
    headers: { ...json, 'cache-control': 'public, max-age=60', ...tokenHeaders },
    body: JSON.stringify({ url, seen: Object.keys(headers).sort() }),
  };
}

describe('the request path under attack', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  let keyed: TestProxy;
  const seenAt = (path: string) => upstream.seen.filter((seen) => seen.url === path);

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const answer = upstreamAnswer(req.url ?? '/', req.headers);
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    });
    const upstreams = [
      { name: 'api', prefix: '/', url: upstream.url, token_pool: true },
      { name: 'raw', prefix: '/raw', url: upstream.url, token_pool: true, cache: { policy: 'none' } },
    ];
    proxy = await startTestProxy({
      admin: { host: '127.0.0.1', port: 0, allowed_hosts: ['metrics.internal'] },
      pool: { tokens: [{ name: 'pool-one', value: POOL_TOKEN }], probe_at_start: false },
      upstreams,
    });
    keyed = await startTestProxy({
      pool: { tokens: [{ name: 'pool-one', value: POOL_TOKEN }], probe_at_start: false },
      consumers: { enabled: true, keys: [{ name: 'web', value: CONSUMER_KEY }], unknown: 'reject' },
      upstreams,
    });
  });
  afterAll(async () => {
    await proxy.close();
    await keyed.close();
    await upstream.close();
  });
  beforeEach(() => {
    revoked.clear();
    forbidden.clear();
    failing = false;
  });

  describe('the key is built from what the upstream sees', () => {
    it('X-GitHub-Api-Version named in Connection, with no-cache, does not poison the entry of that version', async () => {
      const version = '2026-03-10';
      const poison = await get(`${proxy.url}/versioned/a`, {
        'x-github-api-version': version,
        connection: 'close, X-GitHub-Api-Version',
        'cache-control': 'no-cache',
      });
      expect(poison.status).toBe(200);
      const honest = await get(`${proxy.url}/versioned/a`, { 'x-github-api-version': version });
      expect(JSON.parse(honest.body)).toEqual({ version, accept: 'default' });
    });

    it('an Accept media type named in Connection does not poison the entry of that media type', async () => {
      const accept = 'application/vnd.github.raw+json';
      await get(`${proxy.url}/versioned/b`, { accept, connection: 'close, Accept', 'cache-control': 'no-cache' });
      const honest = await get(`${proxy.url}/versioned/b`, { accept });
      expect(JSON.parse(honest.body)).toEqual({ version: 'default', accept });
    });

    it('hostile: the header named in Connection is neither forwarded nor keyed, for clients and the pool alike', async () => {
      await get(`${proxy.url}/versioned/c`, {
        authorization: `token ${CLIENT_TOKEN}`,
        'x-github-api-version': '2026-03-10',
        connection: 'keep-alive, x-github-api-version',
      });
      const sent = seenAt('/versioned/c');
      expect(sent).toHaveLength(1);
      expect(sent[0]!.headers['x-github-api-version']).toBeUndefined();
      // The default representation was stored under the default key: a plain request is a hit.
      const plain = await get(`${proxy.url}/versioned/c`, { authorization: `token ${CLIENT_TOKEN}` });
      expect(JSON.parse(plain.body)).toEqual({ version: 'default', accept: 'default' });
      expect(seenAt('/versioned/c')).toHaveLength(1);
    });

    it('pooled: a header the pool does not forward does not select an entry either', async () => {
      await get(`${proxy.url}/pooled/cookie`, { cookie: 'session=1' });
      const plain = await get(`${proxy.url}/pooled/cookie`);
      expect(plain.status).toBe(200);
      expect(seenAt('/pooled/cookie')).toHaveLength(1);
      expect(seenAt('/pooled/cookie')[0]!.headers.cookie).toBeUndefined();
    });
  });

  describe('a pooled request forwards only an allowlist of headers', () => {
    const hostile = {
      'x-http-method-override': 'DELETE',
      'x-original-url': '/admin/delete',
      'x-rewrite-url': '/admin/delete',
      forwarded: 'for=203.0.113.9;host=evil.example',
      'x-forwarded-for': '203.0.113.9',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'https',
      'x-real-ip': '203.0.113.9',
      cookie: 'session=abc',
      'x-github-otp': '123456',
      'x-custom': 'anything',
      'proxy-authorization': 'Basic Zm9vOmJhcg==',
    };
    // An Accept of its own representation (GitHub's default JSON is sent as no Accept: docs/caching.md).
    const wanted = { accept: 'application/vnd.github.full+json', 'user-agent': 'attacks-test', 'x-github-api-version': '2022-11-28' };

    it.each([
      ['the cached path', '/pooled/allow'],
      ['the streamed path (policy none)', '/raw/pooled/allow'],
    ])('on %s, method overrides, X-Original-URL, Forwarded and X-Forwarded-* stay at the proxy', async (_what, path) => {
      const answer = await get(`${proxy.url}${path}`, { ...hostile, ...wanted });
      expect(answer.status).toBe(200);
      const sent = upstream.seen.filter((seen) => seen.url === '/pooled/allow').at(-1)!;
      for (const name of Object.keys(hostile)) expect(sent.headers[name], name).toBeUndefined();
      for (const [name, value] of Object.entries(wanted)) expect(sent.headers[name]).toBe(value);
      expect(sent.headers.authorization).toBe(`token ${POOL_TOKEN}`);
    });

    it("a client's own credential still forwards its own headers (only the pool is restricted)", async () => {
      await get(`${proxy.url}/client/allow`, { authorization: `token ${CLIENT_TOKEN}`, 'x-custom': 'kept' });
      expect(seenAt('/client/allow')[0]!.headers['x-custom']).toBe('kept');
    });
  });

  describe("pool consumers never see a pool token's scopes or expiry", () => {
    it.each([
      ['a stored entry (miss, then hit)', '/pooled/scopes'],
      ['a streamed answer (policy none)', '/raw/pooled/scopes'],
    ])('%s', async (_what, path) => {
      for (let round = 0; round < 2; round++) {
        const answer = await get(`${proxy.url}${path}`);
        expect(answer.status).toBe(200);
        expect(answer.headers['x-oauth-scopes']).toBeUndefined();
        expect(answer.headers['github-authentication-token-expiration']).toBeUndefined();
        expect(answer.headers['x-accepted-oauth-scopes']).toBe('repo');
      }
    });

    it("a client with its own token still sees its token's scopes", async () => {
      const answer = await get(`${proxy.url}/client/scopes`, { authorization: `token ${CLIENT_TOKEN}` });
      expect(answer.headers['x-oauth-scopes']).toBe('repo, read:org');
    });
  });

  describe('a credential the upstream rejected never reads its entries again', () => {
    const auth = { authorization: `token ${CLIENT_TOKEN}` };
    const stored = async (path: string): Promise<void> => {
      const first = await get(`${proxy.url}${path}`, auth);
      expect(first.status).toBe(200);
      // Stored: max-stale serves it without the upstream.
      const before = seenAt(path).length;
      const again = await get(`${proxy.url}${path}`, { ...auth, 'cache-control': 'max-stale' });
      expect(again.status).toBe(200);
      expect(seenAt(path)).toHaveLength(before);
    };

    it('a revoked token gets no cached private data with max-stale after the upstream said 401', async () => {
      await stored('/private/a');
      revoked.add(auth.authorization);
      expect((await get(`${proxy.url}/private/a`, auth)).status).toBe(401);
      const stale = await get(`${proxy.url}/private/a`, { ...auth, 'cache-control': 'max-stale' });
      expect(stale.status).toBe(401);
      expect(stale.body).not.toContain('private data');
    });

    it('nor with only-if-cached, nor for its other entries ("Bad credentials" is about the credential)', async () => {
      await stored('/private/b');
      await stored('/private/c');
      revoked.add(auth.authorization);
      expect((await get(`${proxy.url}/private/b`, auth)).status).toBe(401);
      const cachedOnly = await get(`${proxy.url}/private/b`, { ...auth, 'cache-control': 'only-if-cached' });
      expect(cachedOnly.status).toBe(504);
      expect(cachedOnly.body).not.toContain('private data');
      const other = await get(`${proxy.url}/private/c`, { ...auth, 'cache-control': 'max-stale' });
      expect(other.body).not.toContain('private data');
      expect(other.status).toBe(401);
    });

    it('nor through stale-if-error when the upstream fails after the 401', async () => {
      await stored('/private/d');
      revoked.add(auth.authorization);
      expect((await get(`${proxy.url}/private/d`, auth)).status).toBe(401);
      revoked.clear();
      failing = true;
      const during = await get(`${proxy.url}/private/d`, auth);
      expect(during.body).not.toContain('private data');
      expect(during.status).toBeGreaterThanOrEqual(500);
    });

    it('a 403 without rate-limit meaning drops that entry of that credential', async () => {
      await stored('/private/e');
      forbidden.add('/private/e');
      expect((await get(`${proxy.url}/private/e`, auth)).status).toBe(403);
      const stale = await get(`${proxy.url}/private/e`, { ...auth, 'cache-control': 'max-stale' });
      expect(stale.body).not.toContain('private data');
    });

    it('hostile: one credential rejected leaves another credential (and a token that works again) untouched', async () => {
      const other = { authorization: `token ${OTHER_CLIENT}` };
      await get(`${proxy.url}/private/f`, other);
      await stored('/private/f');
      revoked.add(auth.authorization);
      expect((await get(`${proxy.url}/private/f`, auth)).status).toBe(401);
      const theirs = await get(`${proxy.url}/private/f`, { ...other, 'cache-control': 'max-stale' });
      expect(theirs.status).toBe(200);
      expect(theirs.body).toContain('private data');
      // The token works again: a fresh answer is stored and served as usual.
      revoked.clear();
      expect((await get(`${proxy.url}/private/f`, auth)).status).toBe(200);
      const calls = seenAt('/private/f').length;
      expect((await get(`${proxy.url}/private/f`, { ...auth, 'cache-control': 'max-stale' })).status).toBe(200);
      expect(seenAt('/private/f')).toHaveLength(calls);
    });
  });

  describe('an empty or blank Authorization counts as absent', () => {
    it.each([
      ['empty', ''],
      ['blank', '   '],
      ['a tab', '\t'],
    ])('%s Authorization with consumer keys required gets the 401 of a missing key, and nothing goes upstream', async (_what, value) => {
      const before = upstream.seen.length;
      const answer = await raw(keyed.url, `GET /pooled/blank HTTP/1.1\r\nHost: x\r\nAuthorization: ${value}\r\nConnection: close\r\n\r\n`);
      expect(answer.startsWith('HTTP/1.1 401')).toBe(true);
      expect(answer).toContain('"message"');
      expect(upstream.seen.length).toBe(before);
    });

    it('with consumer keys off, a blank Authorization travels on the pool, not as an anonymous client', async () => {
      await raw(proxy.url, 'GET /pooled/blank-open HTTP/1.1\r\nHost: x\r\nAuthorization:  \r\nConnection: close\r\n\r\n');
      expect(seenAt('/pooled/blank-open')[0]!.headers.authorization).toBe(`token ${POOL_TOKEN}`);
    });

    it('hostile: a known key next to a blank Authorization uses the pool; the key never travels', async () => {
      const answer = await get(`${keyed.url}/pooled/blank-key`, { authorization: '', 'x-etagere-key': CONSUMER_KEY });
      expect(answer.status).toBe(200);
      const sent = seenAt('/pooled/blank-key')[0]!;
      expect(sent.headers.authorization).toBe(`token ${POOL_TOKEN}`);
      expect(JSON.stringify(sent.headers)).not.toContain(CONSUMER_KEY);
    });
  });

  describe('the admin port answers only to a loopback or configured Host (DNS rebinding)', () => {
    it.each(['127.0.0.1', '127.0.0.1:9090', 'localhost', 'LOCALHOST:80', '[::1]', '[::1]:9090', 'metrics.internal:9090'])(
      'Host %s is served',
      async (host) => {
        const answer = await get(`${proxy.adminUrl}/healthz`, { host });
        expect(answer.status).toBe(200);
      },
    );

    it.each([
      'evil.example',
      'evil.example:9090',
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      'metrics.internal.evil.example',
      '10.0.0.5',
    ])('Host %s gets a 403 JSON and no metrics', async (host) => {
      for (const path of ['/metrics', '/admin/tokens', '/']) {
        const answer = await get(`${proxy.adminUrl}${path}`, { host });
        expect(answer.status).toBe(403);
        expect(answer.headers['content-type']).toMatch(/application\/json/);
        expect((JSON.parse(answer.body) as { message: string }).message).toMatch(/host/i);
        expect(answer.body).not.toContain('etagere_');
      }
    });

    it('hostile: a request without Host (HTTP/1.0) is refused too', async () => {
      const answer = await raw(proxy.adminUrl, 'GET /admin/tokens HTTP/1.0\r\n\r\n');
      expect(answer.startsWith('HTTP/1.1 403')).toBe(true);
      expect(answer).not.toContain('pool-one');
    });
  });

  it('the memos count in etagere_cache_bytes', async () => {
    await get(`${proxy.url}/client/memo`, { authorization: `token ${CLIENT_TOKEN}` });
    const metrics = await get(`${proxy.adminUrl}/metrics`);
    expect(metrics.body).toMatch(/etagere_cache_bytes\{tier="partition_memo"\} [1-9]/);
    expect(metrics.body).toMatch(/etagere_cache_bytes\{tier="route_memo"\} [1-9]/);
  });
});
