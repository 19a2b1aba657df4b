/**
 * Traces as a user sees them in a real OTLP/HTTP receiver: one trace from the client's span through
 * the proxy's server span to the upstream call, whose `traceparent` names the proxy's upstream span;
 * hits, revalidations, waits on a flight or a pool token traced too; the access line carries the
 * ids; nothing secret exported (the receiver feeds the secrets scan); tracing off changes nothing;
 * a hostile traceparent starts a new trace; a collector that is down costs no request.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { get } from '../helpers/http.js';
import { counterSum } from '../helpers/metrics-text.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const POOL_TOKEN = testSecret('tracing pool token', 'tracing_pool_token_7c2e9a41');
const KEY = testSecret('tracing consumer key', 'tracing_consumer_key_web_5d8b');
/** Shaped like GitHub's: with consumer keys on, only such a credential goes upstream as the client's own. */
const CLIENT_TOKEN = testSecret("tracing client's own token", 'ghp_tracingClientOwnToken3f61aaaabbbbccd');
const RESET = Math.floor(Date.now() / 1000) + 3600;
const LIMITS = {
  'x-ratelimit-limit': '5000',
  'x-ratelimit-remaining': '4990',
  'x-ratelimit-used': '10',
  'x-ratelimit-reset': String(RESET),
};

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';
const CLIENT_PARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;

let upstream: ScriptedUpstream;
let otlp: OtlpReceiver;
/** Requests for /repos/o/slow wait for this (a flight under way). */
let release: () => void = () => undefined;
let slow = Promise.resolve();

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  upstream = await startScriptedUpstream((req, res) => {
    const json = { 'content-type': 'application/json; charset=utf-8', ...LIMITS, 'x-ratelimit-resource': 'core' };
    if (req.url === '/rate_limit') {
      const core = { limit: 5000, remaining: 4990, used: 10, reset: RESET };
      res.writeHead(200, json).end(JSON.stringify({ resources: { core }, rate: core }));
    } else if (req.url?.startsWith('/repos/o/swr') === true) {
      res.writeHead(200, { ...json, etag: '"s"', 'cache-control': 'public, max-age=0, stale-while-revalidate=600' }).end('{}');
    } else if (req.url?.startsWith('/repos/o/etag') === true) {
      // Stale at once: every later request revalidates, and gets a 304.
      if (req.headers['if-none-match'] === '"v1"') res.writeHead(304, { etag: '"v1"', 'cache-control': 'max-age=0', ...LIMITS }).end();
      else res.writeHead(200, { ...json, etag: '"v1"', 'cache-control': 'max-age=0' }).end('{"v":1}');
    } else {
      const answer = (): void => void res.writeHead(200, { ...json, etag: '"x"', 'cache-control': 'public, max-age=60' }).end('{}');
      if (req.url?.startsWith('/repos/o/slow') === true) void slow.then(answer);
      else answer();
    }
  });
});
afterAll(async () => {
  await upstream.close();
  await otlp.close();
});

/** A proxy with a pool token and a consumer key, tracing to `endpoint` (none: off). */
function proxyTracing(tracing: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): Promise<TestProxy> {
  return startTestProxy(
    resolveSecrets(
      {
        ...extra,
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
        pool: { tokens: [{ name: 'alpha', value: POOL_TOKEN }], probe_at_start: false },
        consumers: { enabled: true, keys: [{ name: 'web', value: KEY }] },
        ...(tracing === undefined ? {} : { tracing }),
      },
      {},
    ),
  );
}

const pooled = (extra: Record<string, string> = {}): Record<string, string> => ({ 'x-etagere-key': KEY, ...extra });
const own = (extra: Record<string, string> = {}): Record<string, string> => ({ authorization: `token ${CLIENT_TOKEN}`, ...extra });

/** The spans of one trace, once the proxy closed (its shutdown exports what is queued). */
const traceOf = (traceId: string): ReceivedSpan[] => otlp.spans.filter((span) => span.traceId === traceId);
const named = (spans: ReceivedSpan[], name: string): ReceivedSpan[] => spans.filter((span) => span.name === name);
/** What the upstream received for a path, last first. */
const sentFor = (path: string) => upstream.seen.filter((seen) => seen.url === path).reverse();
/** The traceparent's parts: version, trace id, parent span id, flags. */
const parts = (traceparent: unknown): string[] => String(traceparent).split('-');

describe('a traced miss', () => {
  it("is one trace: the client's span, the proxy's server span, its upstream call, and the traceparent the upstream got", async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    const answer = await get(`${proxy.url}/repos/o/miss`, own({ traceparent: CLIENT_PARENT, tracestate: 'vendor=1' }));
    expect(answer.status).toBe(200);
    const line = proxy.logs().find((entry) => entry.msg === 'request' && entry.path === '/repos/o/miss')!;
    await proxy.close();

    const spans = traceOf(CLIENT_TRACE);
    const [server] = named(spans, 'GET /repos/{owner}/{repo}');
    const [call] = named(spans, 'upstream GET');
    expect(server).toMatchObject({ parentSpanId: CLIENT_SPAN, kind: 2 });
    expect(server!.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/repos/{owner}/{repo}',
      'http.response.status_code': 200,
      'url.path': '/repos/o/miss',
      'etagere.cache': 'miss',
      'etagere.upstream': 'github',
    });
    expect(server!.resource['service.name']).toBe('etagere');
    expect(call).toMatchObject({ parentSpanId: server!.spanId, kind: 3 });
    expect(call!.attributes).toMatchObject({
      'http.response.status_code': 200,
      'etagere.not_modified': false,
      'server.address': '127.0.0.1',
    });
    // The upstream's parent is the proxy's upstream span, in the client's trace; the client's tracestate goes on with its own credential.
    const sent = sentFor('/repos/o/miss')[0]!.headers;
    expect(parts(sent.traceparent)).toEqual(['00', CLIENT_TRACE, call!.spanId, '01']);
    expect(sent.tracestate).toBe('vendor=1');
    expect(line).toMatchObject({ trace_id: CLIENT_TRACE, span_id: server!.spanId });
  });

  it('on the pool: waits for a token in a span that names it, and sends GitHub the traceparent alone (no baggage, no tracestate)', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    const headers = pooled({
      traceparent: CLIENT_PARENT.replace(CLIENT_SPAN, '1111111111111111'),
      baggage: 'user=alice',
      tracestate: 'v=2',
    });
    expect((await get(`${proxy.url}/repos/o/pooled`, headers)).status).toBe(200);
    await proxy.close();

    const spans = traceOf(CLIENT_TRACE).filter(
      (span) => span.attributes['url.path'] === '/repos/o/pooled' || span.name === 'pool.token_wait',
    );
    const server = spans.find((span) => span.kind === 2 && span.attributes['url.path'] === '/repos/o/pooled')!;
    expect(server.attributes).toMatchObject({ 'etagere.consumer': 'web', 'etagere.token': 'alpha', 'etagere.cache': 'miss' });
    const wait = named(traceOf(CLIENT_TRACE), 'pool.token_wait').find((span) => span.parentSpanId === server.spanId)!;
    expect(wait.attributes['etagere.token']).toBe('alpha');
    const call = named(traceOf(CLIENT_TRACE), 'upstream GET').find((span) => span.parentSpanId === server.spanId)!;
    expect(call.attributes['etagere.token']).toBe('alpha');
    const sent = sentFor('/repos/o/pooled')[0]!.headers;
    expect(parts(sent.traceparent)).toEqual(['00', CLIENT_TRACE, call.spanId, '01']);
    expect(sent.baggage).toBeUndefined();
    expect(sent.tracestate).toBeUndefined();
    // Names only: no attribute holds the token, the consumer key or the client's own token.
    const exported = JSON.stringify(otlp.spans);
    for (const secret of [POOL_TOKEN, KEY, CLIENT_TOKEN]) expect(exported).not.toContain(secret);
  });

  it('without a client context starts a trace of its own, and a passed-through POST carries its span too', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    expect((await get(`${proxy.url}/repos/o/fresh-trace`, own())).status).toBe(200);
    const posted = await fetch(`${proxy.url}/repos/o/posted`, { method: 'POST', headers: own({ traceparent: CLIENT_PARENT }), body: '{}' });
    expect(posted.status).toBe(200);
    await posted.arrayBuffer();
    await proxy.close();

    const fresh = otlp.spans.find((span) => span.kind === 2 && span.attributes['url.path'] === '/repos/o/fresh-trace')!;
    expect(fresh.parentSpanId).toBeUndefined();
    expect(parts(sentFor('/repos/o/fresh-trace')[0]!.headers.traceparent)[1]).toBe(fresh.traceId);
    const post = named(traceOf(CLIENT_TRACE), 'upstream POST')[0]!;
    expect(parts(sentFor('/repos/o/posted')[0]!.headers.traceparent)).toEqual(['00', CLIENT_TRACE, post.spanId, '01']);
  });
});

describe('hits and revalidations', () => {
  it('a hit is a server span of its own trace, with no upstream call; a revalidation shows the 304', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    await get(`${proxy.url}/repos/o/hit`, own());
    const hitTrace = '1bf7651916cd43dd8448eb211c80319c';
    const hit = await get(`${proxy.url}/repos/o/hit`, own({ traceparent: `00-${hitTrace}-${CLIENT_SPAN}-01` }));
    expect(hit.status).toBe(200);
    await get(`${proxy.url}/repos/o/etag`, own());
    const revalidated = '2cf7651916cd43dd8448eb211c80319c';
    expect((await get(`${proxy.url}/repos/o/etag`, own({ traceparent: `00-${revalidated}-${CLIENT_SPAN}-01` }))).status).toBe(200);
    const lines = proxy.logs().filter((entry) => entry.msg === 'request');
    await proxy.close();

    const hitSpans = traceOf(hitTrace);
    expect(hitSpans.map((span) => span.name)).toEqual(['GET /repos/{owner}/{repo}']);
    expect(hitSpans[0]!.attributes['etagere.cache']).toBe('hit');
    expect(lines.find((entry) => entry.trace_id === hitTrace)).toMatchObject({ cache: 'hit', span_id: hitSpans[0]!.spanId });

    const again = traceOf(revalidated);
    const server = again.find((span) => span.kind === 2)!;
    expect(server.attributes['etagere.cache']).toBe('revalidated');
    expect(named(again, 'upstream GET')[0]!.attributes).toMatchObject({ 'http.response.status_code': 304, 'etagere.not_modified': true });
  });

  it('a stale entry revalidated in the background is a span of the request that served it stale, its upstream call below', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    await get(`${proxy.url}/repos/o/swr`, own());
    const staleTrace = '9cf7651916cd43dd8448eb211c80319c';
    const stale = await get(`${proxy.url}/repos/o/swr`, own({ traceparent: `00-${staleTrace}-${CLIENT_SPAN}-01` }));
    expect(stale.status).toBe(200);
    // Counted once its answer is in (and its span ends in the same turn): then the proxy may close.
    const counted = async (): Promise<number> =>
      counterSum((await get(`${proxy.adminUrl}/metrics`)).body, 'etagere_upstream_requests_total', { upstream: 'github' }) ?? 0;
    await until(async () => (await counted()) === 2, 5_000, 'the background revalidation');
    await proxy.close();
    const spans = traceOf(staleTrace);
    const server = spans.find((span) => span.kind === 2)!;
    expect(server.attributes['etagere.cache']).toBe('stale');
    const revalidate = named(spans, 'cache.revalidate')[0]!;
    expect(revalidate.parentSpanId).toBe(server.spanId);
    const call = named(spans, 'upstream GET')[0]!;
    expect(call.parentSpanId).toBe(revalidate.spanId);
    expect(parts(sentFor('/repos/o/swr')[0]!.headers.traceparent)).toEqual(['00', staleTrace, call.spanId, '01']);
  });

  it("a request that waits on another's flight shows the wait", async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    slow = new Promise<void>((resolve) => (release = resolve));
    const first = get(`${proxy.url}/repos/o/slow`, own());
    await until(() => upstream.seen.some((seen) => seen.url === '/repos/o/slow'), 5_000, 'the flight upstream');
    const waiter = '3df7651916cd43dd8448eb211c80319c';
    const second = get(`${proxy.url}/repos/o/slow`, own({ traceparent: `00-${waiter}-${CLIENT_SPAN}-01` }));
    await until(async () => (await get(`${proxy.adminUrl}/metrics`)).body.includes('etagere_coalesced_waiters 1'), 5_000, 'a waiter');
    release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    await proxy.close();

    const spans = traceOf(waiter);
    const server = spans.find((span) => span.kind === 2)!;
    expect(named(spans, 'cache.flight_wait')[0]).toMatchObject({
      parentSpanId: server.spanId,
      attributes: { 'etagere.flight': 'process' },
    });
    expect(named(spans, 'upstream GET')).toEqual([]);
  });
});

describe('Redis and GraphQL', () => {
  it("a replica's L2 lookup is a span saying what it found", async () => {
    const redis = await startRedis();
    try {
      const [one, two] = [
        await proxyTracing({ endpoint: otlp.url }, { redis: { url: redis.url } }),
        await proxyTracing({ endpoint: otlp.url }, { redis: { url: redis.url } }),
      ];
      const lookups = '4ef7651916cd43dd8448eb211c80319c';
      const stored = '5ef7651916cd43dd8448eb211c80319c';
      await get(`${one.url}/repos/o/l2`, own({ traceparent: `00-${stored}-${CLIENT_SPAN}-01` }));
      // The first replica's entry is written to L2 after its answer: the second asks once it is there.
      const client = new Redis(redis.url);
      await until(async () => (await client.keys('*:e')).length > 0, 5_000, 'the entry in L2');
      client.disconnect();
      await get(`${two.url}/repos/o/l2`, own({ traceparent: `00-${lookups}-${CLIENT_SPAN}-01` }));
      await one.close();
      await two.close();
      expect(named(traceOf(stored), 'cache.l2_lookup')[0]!.attributes['etagere.l2']).toBe('miss');
      expect(named(traceOf(lookups), 'cache.l2_lookup')[0]!.attributes['etagere.l2']).toBe('hit');
    } finally {
      await redis.stop();
    }
  });

  it('a pooled GraphQL query is a span holding its upstream call', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    const graphqlTrace = '6ff7651916cd43dd8448eb211c80319c';
    const body = JSON.stringify({ query: 'query Viewer { viewer { login } }', operationName: 'Viewer' });
    const headers = pooled({ traceparent: `00-${graphqlTrace}-${CLIENT_SPAN}-01`, 'content-type': 'application/json' });
    const answer = await fetch(`${proxy.url}/graphql`, { method: 'POST', headers, body });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    await proxy.close();
    const spans = traceOf(graphqlTrace);
    const server = spans.find((span) => span.kind === 2)!;
    const query = named(spans, 'graphql query')[0]!;
    expect(query).toMatchObject({ parentSpanId: server.spanId, attributes: { 'graphql.operation.name': 'Viewer' } });
    expect(named(spans, 'upstream POST')[0]).toMatchObject({ parentSpanId: query.spanId, attributes: { 'etagere.token': 'alpha' } });
  });
});

describe('hostile or absent trace context', () => {
  it.each([
    ['malformed', 'not-a-traceparent'],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${CLIENT_SPAN}-01`],
    ['all-zero span id', `00-${CLIENT_TRACE.replace('0a', '9a')}-${'0'.repeat(16)}-01`],
    ['huge', `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01-${'a'.repeat(8000)}`],
    ['version ff', `ff-${CLIENT_TRACE}-${CLIENT_SPAN}-01`],
  ])('a %s traceparent is ignored: a new trace starts, and the upstream never gets it', async (label, traceparent) => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    const path = `/repos/o/hostile-${label.replace(/\W+/g, '-')}`;
    expect((await get(`${proxy.url}${path}`, own({ traceparent }))).status).toBe(200);
    await proxy.close();
    const server = otlp.spans.find((span) => span.kind === 2 && span.attributes['url.path'] === path)!;
    expect(server.parentSpanId).toBeUndefined();
    expect(server.traceId).toMatch(/^[0-9a-f]{32}$/);
    const sent = String(sentFor(path)[0]!.headers.traceparent);
    expect(sent).not.toBe(traceparent);
    expect(parts(sent)[1]).toBe(server.traceId);
  });
});

describe('tracing off, or sampled out', () => {
  it('off (no endpoint): the upstream gets the client traceparent as it was, and access lines carry no trace id', async () => {
    const proxy = await proxyTracing(undefined);
    await get(`${proxy.url}/repos/o/off`, own({ traceparent: CLIENT_PARENT, baggage: 'user=alice' }));
    await get(`${proxy.url}/repos/o/off-pooled`, pooled({ traceparent: CLIENT_PARENT, baggage: 'user=alice' }));
    const lines = proxy.logs().filter((entry) => entry.msg === 'request');
    await proxy.close();
    expect(sentFor('/repos/o/off')[0]!.headers.traceparent).toBe(CLIENT_PARENT);
    // On the pool, as always: nothing of the client's trace context goes to GitHub.
    expect(sentFor('/repos/o/off-pooled')[0]!.headers.traceparent).toBeUndefined();
    expect(sentFor('/repos/o/off-pooled')[0]!.headers.baggage).toBeUndefined();
    for (const line of lines) expect(line.trace_id).toBeUndefined();
    expect(otlp.spans.some((span) => String(span.attributes['url.path']).startsWith('/repos/o/off'))).toBe(false);
  });

  it('sampled out (traceidratio 0): the trace goes on upstream unsampled, nothing is exported, no ids on the access line', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url, sampler: 'traceidratio', sampler_arg: 0 });
    await get(`${proxy.url}/repos/o/unsampled`, own({ traceparent: CLIENT_PARENT }));
    const line = proxy.logs().find((entry) => entry.msg === 'request' && entry.path === '/repos/o/unsampled')!;
    await proxy.close();
    const sent = parts(sentFor('/repos/o/unsampled')[0]!.headers.traceparent);
    expect(sent[1]).toBe(CLIENT_TRACE);
    expect(sent[2]).not.toBe(CLIENT_SPAN);
    expect(sent[3]).toBe('00');
    expect(line.trace_id).toBeUndefined();
    expect(otlp.spans.some((span) => span.attributes['url.path'] === '/repos/o/unsampled')).toBe(false);
  });
});

describe('a client that did not sample its trace', () => {
  it('is not recorded under the default parent-based sampler, and the upstream gets the trace unsampled with the proxy as parent', async () => {
    const proxy = await proxyTracing({ endpoint: otlp.url });
    const unsampledTrace = '7af7651916cd43dd8448eb211c80319c';
    await get(`${proxy.url}/repos/o/client-unsampled`, own({ traceparent: `00-${unsampledTrace}-${CLIENT_SPAN}-00` }));
    await proxy.close();
    const sent = parts(sentFor('/repos/o/client-unsampled')[0]!.headers.traceparent);
    expect(sent[1]).toBe(unsampledTrace);
    expect(sent[2]).toMatch(/^[0-9a-f]{16}$/);
    expect(sent[2]).not.toBe(CLIENT_SPAN);
    expect(sent[3]).toBe('00');
    expect(traceOf(unsampledTrace)).toEqual([]);
  });
});

describe('a collector that is down', () => {
  it('costs no request, and shutdown does not wait on it beyond its bound', async () => {
    const proxy = await proxyTracing({ endpoint: `http://127.0.0.1:${await deadPort()}` });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${proxy.url}/repos/o/down-${i}`, own())));
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200));
    const started = Date.now();
    await proxy.close();
    expect(Date.now() - started).toBeLessThan(8_000);
  });
});
