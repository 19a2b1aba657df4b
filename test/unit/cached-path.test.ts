/**
 * The cached path's orchestration without sockets: real in-memory tiers and coalescing, a
 * scripted upstream exchange, and a recording response. Covers what a user notices of the
 * pipeline: hits answered synchronously, stale-if-error, 304 merges, coalesced waiters, bodies
 * over the entry cap, and a pool with no token to give.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable, Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Got } from '../../src/cache/rules/classify.js';
import { createCoalescer } from '../../src/cache/store/coalesce.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { createPartitioner } from '../../src/cache/rules/key.js';
import { Cache } from '../../src/cache/store/cache.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { CachedPath } from '../../src/paths/rest/cached.js';
import type { RequestContext } from '../../src/paths/context.js';
import type { Credential } from '../../src/pool/consumers/credential.js';
import type { CodingForward } from '../../src/paths/rest/forward.js';
import type { Served } from '../../src/http/reply.js';
import { createUpstreamRuntime, type UpstreamRuntime } from '../../src/paths/upstreams.js';
import { createRewrittenBodies } from '../../src/cache/store/entry-form.js';

/** A response that records what the path wrote: status, headers, body. */
class RecordedResponse extends Writable {
  status = 0;
  headers: Record<string, string> = {};
  headersSent = false;
  private chunks: Buffer[] = [];

  writeHead(status: number, headers: readonly string[] | Record<string, string | string[] | number>): this {
    this.status = status;
    this.headersSent = true;
    if (Array.isArray(headers)) for (let i = 0; i < headers.length; i += 2) this.headers[headers[i]!] = headers[i + 1]!;
    else for (const [name, value] of Object.entries(headers)) this.headers[name] = String(value);
    return this;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.chunks.push(Buffer.from(chunk));
    done();
  }

  get body(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  /** Resolves once the whole answer has been written. */
  finished(): Promise<void> {
    return this.writableFinished ? Promise.resolve() : new Promise((resolve) => this.once('finish', () => resolve()));
  }
}

type Script = (stale: CacheEntry | undefined) => Got | Promise<Got>;

function response(status: number, body: string, headers: Record<string, string> = {}): Got {
  const now = Date.now();
  return {
    kind: 'fetched',
    fetched: {
      kind: 'response',
      status,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'public, max-age=60',
        etag: `"${body.length}"`,
        ...headers,
      },
      body: Buffer.from(body),
      requestTime: now,
      responseTime: now,
    },
    token: undefined,
    fetchedBy: { kind: 'anonymous' },
  };
}

describe('cached path orchestration (in-memory tiers, scripted exchange)', () => {
  let tiers: Cache;
  let upstream: UpstreamRuntime;
  let script: Script;
  let exchanges: Array<CacheEntry | undefined>;
  /** The consumer each exchange went upstream for (its share and max_per_hour are charged: pooled-fetch.ts). */
  let chargedTo: Array<string | undefined>;
  /** What the path handed to the streaming forward (a client that refused a stored coding). */
  let forwarded: Array<{ accept: string | undefined; coding: CodingForward | undefined }>;
  let serve: (ctx: RequestContext) => Served | Promise<Served>;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const config = parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: 'http://127.0.0.1:9' }] });
    const metrics = createMetrics({ defaultMetrics: false });
    const logger = createLogger({ level: 'silent' });
    tiers = new Cache({ l1: true, maxBytes: 1 << 20, maxEntryBytes: 1 << 16, lockMs: 1000 }, metrics, logger, undefined);
    upstream = createUpstreamRuntime(
      config.upstreams[0]!,
      { publicUrl: null, trustForwarded: false },
      { rewritten: createRewrittenBodies(1 << 20), decoded: createRewrittenBodies(1 << 20) },
    );
    exchanges = [];
    chargedTo = [];
    forwarded = [];
    script = () => response(200, '{"v":1}');
    const path = new CachedPath({
      cache: tiers,
      coalescer: createCoalescer(tiers, metrics, 0),
      exchange: async (ctx, stale) => {
        exchanges.push(stale);
        chargedTo.push(ctx.cred.kind === 'pool' ? ctx.cred.consumer : undefined);
        return script(stale);
      },
      partitioner: createPartitioner('a test secret'),
      pool: undefined,
      logger,
      forward: async (ctx, coding) => {
        forwarded.push({ accept: ctx.req.headers['accept-encoding'], coding });
        ctx.res.writeHead(200, { 'cache-status': 'forwarded' });
        ctx.res.end('forwarded');
        return { outcome: 'bypass', upstreamStatus: 200, token: undefined };
      },
    });
    serve = (ctx) => path.serve(ctx);
  });

  afterEach(async () => {
    vi.useRealTimers();
    await upstream.client.close();
  });

  const context = (headers: Record<string, string> = {}, cred: Credential = { kind: 'anonymous' }, method: 'GET' | 'HEAD' = 'GET') => {
    const res = new RecordedResponse();
    const req = { headers, method } as unknown as IncomingMessage;
    const ctx: RequestContext = {
      req,
      res: res as unknown as ServerResponse,
      id: 'req-1',
      upstream,
      pathname: '/repos/o/r',
      search: '',
      path: '/repos/o/r',
      method,
      route: '/repos/:owner/:repo',
      cred,
    };
    return { ctx, res };
  };

  const get = async (headers?: Record<string, string>, cred?: Credential) => {
    const { ctx, res } = context(headers, cred);
    const served: Served = await serve(ctx);
    await res.finished();
    return { served, res };
  };

  it('stores a miss and answers the next request from L1, synchronously, without the upstream', async () => {
    const miss = await get();
    expect(miss.served.outcome).toBe('miss');
    expect(miss.res.headers['cache-status']).toContain('fwd=miss');
    const { ctx, res } = context();
    const served = serve(ctx);
    expect(served).not.toBeInstanceOf(Promise); // the hit path never waits
    expect((served as Served).outcome).toBe('hit');
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"v":1}');
    expect(res.headers['x-request-id']).toBe('req-1');
    expect(exchanges).toHaveLength(1);
  });

  it('serves the stale entry when the upstream fails (stale-if-error), and says so', async () => {
    await get();
    vi.setSystemTime(Date.now() + 120_000);
    script = () => ({
      kind: 'fetched',
      fetched: { kind: 'failed', failure: { status: 502, detail: 'ECONNRESET' } },
      token: undefined,
      fetchedBy: { kind: 'anonymous' },
    });
    const { served, res } = await get();
    expect(served.outcome).toBe('stale');
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"v":1}');
    expect(res.headers['cache-status']).toContain('detail=stale-if-error');
  });

  it('answers 502 in GitHub error shape when the upstream fails and nothing is stored', async () => {
    script = () => ({
      kind: 'fetched',
      fetched: { kind: 'failed', failure: { status: 502, detail: 'ECONNREFUSED' } },
      token: undefined,
      fetchedBy: { kind: 'anonymous' },
    });
    const { served, res } = await get();
    expect(served.outcome).toBe('error');
    expect(res.status).toBe(502);
    expect(JSON.parse(res.body)).toMatchObject({ message: expect.stringContaining('ECONNREFUSED'), documentation_url: expect.any(String) });
  });

  it('revalidates an expired entry with its validator and merges the 304 into it', async () => {
    await get();
    vi.setSystemTime(Date.now() + 120_000);
    script = (stale) => {
      expect(stale?.etag).toBe('"7"');
      return response(304, '', { etag: '"7"', 'cache-control': 'public, max-age=60', 'x-merged': 'yes' });
    };
    const { served, res } = await get();
    expect(served.outcome).toBe('revalidated');
    expect(served.upstreamStatus).toBe(304);
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"v":1}');
    expect(res.headers['x-merged']).toBe('yes');
    expect(res.headers['cache-status']).toContain('fwd=stale; fwd-status=304');
    // The merged entry is fresh again: the next request is a hit.
    expect((await get()).served.outcome).toBe('hit');
  });

  it('coalesces concurrent misses onto one exchange: one miss, the rest coalesced', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    script = async () => {
      await held;
      return response(200, '{"v":2}');
    };
    const pending = Array.from({ length: 5 }, () => get());
    release();
    const results = await Promise.all(pending);
    expect(exchanges).toHaveLength(1);
    expect(results.map((r) => r.served.outcome).sort()).toEqual(['coalesced', 'coalesced', 'coalesced', 'coalesced', 'miss']);
    for (const result of results) expect(result.res.body).toBe('{"v":2}');
  });

  it('streams a body over the entry cap to the first request; a waiter fetches for itself; nothing is stored', async () => {
    const big = 'x'.repeat(100);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    script = async () => {
      await held;
      return {
        kind: 'fetched',
        fetched: {
          kind: 'too-large',
          status: 200,
          headers: { 'content-type': 'text/plain' },
          head: [Buffer.from(big.slice(0, 70))],
          rest: Readable.from([Buffer.from(big.slice(70))]),
        },
        token: undefined,
        fetchedBy: { kind: 'anonymous' },
      };
    };
    const first = get();
    const second = get();
    release();
    const [firstResult, secondResult] = await Promise.all([first, second]);
    expect(firstResult.res.body).toBe(big);
    expect(secondResult.res.body).toBe(big);
    expect(firstResult.served.outcome).toBe('bypass');
    expect(firstResult.res.headers['cache-status']).toContain('detail=too-large');
    expect(exchanges).toHaveLength(2);
    expect(tiers.l1!.size).toBe(0);
  });

  it('answers 429 with Retry-After when no pool token can take the request, or the stale entry when there is one', async () => {
    script = () => ({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 30 });
    const pool: Credential = { kind: 'pool', consumer: undefined };
    const refused = await get({}, pool);
    expect(refused.res.status).toBe(429);
    expect(refused.res.headers['retry-after']).toBe('30');
    expect(refused.served.outcome).toBe('error');

    script = () => response(200, '{"v":3}');
    await get({}, pool);
    vi.setSystemTime(Date.now() + 120_000);
    script = () => ({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 30 });
    const stale = await get({}, pool);
    expect(stale.res.status).toBe(200);
    expect(stale.res.body).toBe('{"v":3}');
    expect(stale.res.headers['cache-status']).toContain('detail=pool-exhausted');
    expect(stale.served.outcome).toBe('stale');
  });

  it.each(['share', 'points'] as const)("never hands one consumer's refusal (%s) to another consumer coalesced onto it", async (reason) => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    script = async () => {
      calls++;
      if (calls === 1) {
        await held;
        return { kind: 'unavailable', reason, retryAfterSeconds: 60 };
      }
      return response(200, '{"v":4}');
    };
    const greedy = get({}, { kind: 'pool', consumer: 'greedy' });
    const polite = get({}, { kind: 'pool', consumer: 'polite' });
    release();
    const [refused, served] = await Promise.all([greedy, polite]);
    expect(refused.res.status).toBe(429);
    expect(JSON.parse(refused.res.body)).toMatchObject({
      message: expect.stringMatching(reason === 'points' ? /points .* are owed to other consumers/ : /fair share/) as unknown,
    });
    expect(served.res.status).toBe(200);
    expect(served.res.body).toBe('{"v":4}');
    expect(exchanges).toHaveLength(2);
  });

  it('a forced revalidation goes upstream for the consumer that forced it, with the others it coalesced joining free', async () => {
    const polite: Credential = { kind: 'pool', consumer: 'polite' };
    const abuser: Credential = { kind: 'pool', consumer: 'abuser' };
    await get({}, polite); // the entry is stored, fresh for a minute
    chargedTo.length = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    script = async () => {
      await held;
      return response(304, '', { etag: '"7"' });
    };
    const forced = [
      get({ 'cache-control': 'max-age=0' }, abuser),
      get({ 'cache-control': 'no-cache' }, abuser), // honoured: no validator of its own
      get({ pragma: 'no-cache' }, abuser),
    ];
    // A fresh read by another consumer meanwhile is a hit: it joins nothing and is charged nothing.
    expect((await get({}, polite)).served.outcome).toBe('hit');
    const joined = get({ 'cache-control': 'max-age=0' }, polite); // forced by the polite one too: joins the flight in progress
    release();
    const answers = await Promise.all([...forced, joined]);
    expect(answers.map((answer) => answer.res.status)).toEqual([200, 200, 200, 200]);
    expect(chargedTo).toEqual(['abuser']); // one upstream request, the abuser's
  });

  it('a stale-while-revalidate revalidation in the background goes upstream for the consumer whose read started it', async () => {
    script = () => response(200, '{"v":1}', { 'cache-control': 'public, max-age=60, stale-while-revalidate=600' });
    await get({}, { kind: 'pool', consumer: 'polite' });
    vi.setSystemTime(Date.now() + 120_000);
    chargedTo.length = 0;
    script = () => response(304, '', { etag: '"7"', 'cache-control': 'public, max-age=60, stale-while-revalidate=600' });
    const stale = await get({}, { kind: 'pool', consumer: 'reader' });
    expect(stale.served.outcome).toBe('stale');
    await vi.waitFor(() => expect(chargedTo).toEqual(['reader']));
  });

  it('answers only-if-cached with a 504 when nothing usable is stored, without asking the upstream', async () => {
    const { served, res } = await get({ 'cache-control': 'only-if-cached' });
    expect(res.status).toBe(504);
    expect(served.outcome).toBe('miss');
    expect(exchanges).toHaveLength(0);
  });

  describe('an entry the proxy may not decode (no-transform) and a client that refused its coding', () => {
    const body = '{"v":"no-transform"}';
    const gzipped = gzipSync(Buffer.from(body));
    const noTransform = (): Got => {
      const got = response(200, '', { 'content-encoding': 'gzip', 'cache-control': 'public, max-age=60, no-transform' });
      if (got.kind !== 'fetched' || got.fetched.kind !== 'response') throw new Error('unexpected');
      return { ...got, fetched: { ...got.fetched, body: gzipped }, decoded: Buffer.from(body) };
    };

    it('forwards the refusing client (hit or miss), while gzip clients and clients without Accept-Encoding get the stored gzip', async () => {
      script = noTransform;
      const miss = await get({ 'accept-encoding': 'identity' });
      expect(exchanges).toHaveLength(1); // the entry was fetched (in gzip) and stored for the others
      expect(miss.served.outcome).toBe('bypass');
      expect(miss.res.body).toBe('forwarded');
      expect(forwarded).toEqual([{ accept: 'identity', coding: { prefer: undefined } }]);
      for (const headers of [{ 'accept-encoding': 'gzip' }, {}] as Array<Record<string, string>>) {
        const { ctx, res } = context(headers);
        const served = serve(ctx);
        expect(served).not.toBeInstanceOf(Promise); // still the synchronous hit path
        expect((served as Served).outcome).toBe('hit');
        expect(res.headers['content-encoding']).toBe('gzip');
        expect(res.headers.vary).toMatch(/Accept-Encoding/);
      }
      const refused = await get({ 'accept-encoding': 'gzip;q=0' });
      expect(refused.res.body).toBe('forwarded');
      expect(forwarded).toHaveLength(2);
      expect(exchanges).toHaveLength(1);
    });

    it('answers only-if-cached with a 504 instead of going upstream', async () => {
      script = noTransform;
      await get({ 'accept-encoding': 'gzip' });
      const { served, res } = await get({ 'accept-encoding': 'identity', 'cache-control': 'only-if-cached' });
      expect(res.status).toBe(504);
      expect(JSON.parse(res.body)).toHaveProperty('documentation_url');
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(served.outcome).toBe('miss');
      expect(res.headers['cache-status']).toContain('detail=only-if-cached');
      expect(forwarded).toHaveLength(0);
    });

    it('never forwards for an entry the proxy may decode: a refusing client gets it decoded', async () => {
      script = () => {
        const got = noTransform();
        if (got.kind !== 'fetched' || got.fetched.kind !== 'response') throw new Error('unexpected');
        return { ...got, fetched: { ...got.fetched, headers: { ...got.fetched.headers, 'cache-control': 'public, max-age=60' } } };
      };
      const { res } = await get({ 'accept-encoding': 'identity' });
      expect(res.body).toBe(body);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(forwarded).toHaveLength(0);
    });
  });
});
