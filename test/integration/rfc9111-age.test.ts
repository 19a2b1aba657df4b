/**
 * Under policy `rfc9111`: an Age the cache cannot trust makes the response
 * stale. RFC 9111 section 5.1 lets a cache use a list's first member or ignore an invalid value (a
 * SHOULD); a shared cache that ignored it would take a response of unknown age for a new one, so
 * etagere reads it conservatively, as the HTTP cache conformance tests ask: a value
 * that is not exactly one non-negative integer, or a list (`0, 0`, two field lines), counts as an
 * age past any freshness (the response is stored, and the next request revalidates). A valid Age
 * counts in the freshness check (section 4.2.3: corrected_initial_age). Every response here says
 * `max-age=3600`.
 *
 * Section 5.3 beside it: an Expires that is not a date ("0") "MUST" count as a time in the past, so
 * no heuristic freshness applies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

/** Path -> the Age field lines the upstream sends with it. */
const AGES: Record<string, string[]> = {
  '/list-first-3600': ['3600, 3600'],
  '/two-lines-7200-then-0': ['7200', '0'],
  '/list-zeros': ['0, 0'],
  '/list-0-then-7200': ['0, 7200'],
  '/two-lines-0-then-7200': ['0', '7200'],
  '/list-empty-member-first': [', 7200'],
  '/list-old-then-0': ['old, 0'],
  '/non-numeric': ['old'],
  '/negative': ['-7200'],
  '/parameter': ['7200;unit=s'],
  '/fraction': ['7200.5'],
  '/exponent': ['1e5'],
  '/hex': ['0x2000'],
  '/plain-1800': ['1800'],
  '/huge': ['99999999999999999999'],
};

describe('rfc9111: the Age a response arrives with (RFC 9111 section 5.1)', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;

  const get = async (path: string) => {
    const res = await request(`${proxy.url}${path}`);
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const hits = (path: string) => upstream.seen.filter((s) => s.url === path).length;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const path = (req.url ?? '').replace(/^\/heuristic/, '');
      const expires = /^\/expires\/(.*)$/.exec(path);
      if (expires !== null) {
        res.writeHead(200, {
          'content-type': 'application/json',
          'last-modified': new Date(Date.now() - 30 * 86_400_000).toUTCString(),
          expires: decodeURIComponent(expires[1]!),
          date: new Date().toUTCString(),
        });
        res.end('{"expires":"invalid"}');
        return;
      }
      const ages = AGES[path] ?? [];
      // A flat list of names and values: each `age` pair is its own field line.
      res.writeHead(200, [
        'content-type',
        'application/json',
        'cache-control',
        'max-age=3600',
        'etag',
        `"${path}"`,
        'date',
        new Date().toUTCString(),
        ...ages.flatMap((age) => ['age', age]),
      ]);
      res.end(JSON.stringify({ path }));
    });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'heuristic', prefix: '/heuristic', url: upstream.url, cache: { policy: 'rfc9111', heuristic_fraction: 0.1 } },
        { name: 'rfc', prefix: '/', url: upstream.url, cache: { policy: 'rfc9111' } },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  /** Stores `path`, then asks again: whether the second answer was a hit, and its Age. */
  const storeThenAsk = async (path: string) => {
    const first = await get(path);
    expect(first.status).toBe(200);
    expect(first.headers['cache-status']).toMatch(/stored/);
    const second = await get(path);
    expect(second.status).toBe(200);
    expect(second.body).toBe(first.body);
    return { hit: /^etagere; hit/.test(String(second.headers['cache-status'])), age: Number(second.headers.age), upstream: hits(path) };
  };

  it.each([
    ['/list-first-3600', '3600, 3600: a list'],
    ['/two-lines-7200-then-0', 'two field lines, 7200 then 0'],
    ['/list-empty-member-first', ', 7200: a list'],
    ['/huge', 'a value past 2^31: 2^31'],
    ['/list-zeros', '0, 0: a list, even of zeros'],
    ['/list-0-then-7200', '0, 7200: a list'],
    ['/two-lines-0-then-7200', 'two field lines, 0 then 7200'],
    ['/list-old-then-0', 'old, 0: a list with an invalid member'],
    ['/non-numeric', 'not a number'],
    ['/negative', 'negative'],
    ['/parameter', 'with a parameter'],
    ['/fraction', 'not an integer'],
    ['/exponent', 'an exponent is not delta-seconds'],
    ['/hex', 'hexadecimal is not delta-seconds'],
  ])('%s is stale at once (%s)', async (path) => {
    const { hit, upstream: upstreamRequests } = await storeThenAsk(path);
    expect(hit).toBe(false);
    expect(upstreamRequests).toBe(2);
  });

  it('a valid Age counts: Age 1800 is served fresh with an Age of at least 1800 and at most 1800 s left', async () => {
    const first = await get('/plain-1800');
    expect(first.headers['cache-status']).toMatch(/ttl=(1800|1799); stored/);
    const second = await get('/plain-1800');
    expect(second.headers['cache-status']).toMatch(/^etagere; hit; ttl=(1800|1799)$/);
    expect(Number(second.headers.age)).toBeGreaterThanOrEqual(1800);
  });

  it.each(['0', 'never', '99999', '2999-01-01', 'Fri, 01 Jan 2999 00:00:00 PST'])(
    'an Expires of %j is not an HTTP-date, so already expired: no heuristic freshness, even where it is on (section 5.3)',
    async (value) => {
      const path = `/heuristic/expires/${encodeURIComponent(value)}`;
      expect((await get(path)).headers['cache-status']).toMatch(/stored/);
      const second = await get(path);
      expect(second.headers['cache-status']).not.toMatch(/hit/);
      expect(hits(path)).toBe(2);
    },
  );

  it('a valid Expires in the future is explicit freshness (and wins over the heuristic)', async () => {
    const path = `/heuristic/expires/${encodeURIComponent(new Date(Date.now() + 600_000).toUTCString())}`;
    await get(path);
    expect((await get(path)).headers['cache-status']).toMatch(/^etagere; hit; ttl=(600|599|598)$/);
  });
});
