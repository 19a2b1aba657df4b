/**
 * The proxy in front of a misbehaving upstream (the fake's fault mode, docs/fake-upstream.md):
 * for every fault kind, with and without a stored entry, the client gets the stored entry
 * (stale-if-error, said so in Cache-Status) or a GitHub-shaped error; never a hang, never a
 * crash, never a broken body stored or served. Then thousands of faulted requests (10,000 in
 * `npm run soak`), and a check that sockets, timers and heap come back to where they were.
 */
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent, Pool, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/main/app.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream, type FaultRuleInput } from '../../fake-github/index.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { soakSize } from '../helpers/soak.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

/** Upstream timeouts of the proxies here: small, so that slow faults cost well under a second. */
const TIMEOUTS = { connect_ms: 1_000, headers_ms: 400, body_ms: 400 };
const MAX_ENTRY = 64 * 1024;
/** No request may take longer than this: past it, the test fails as a hang. */
const DEADLINE_MS = 8_000;

const STALE = /^etagere; fwd=stale; fwd-status=(\d{3}); ttl=-?\d+; detail=stale-if-error$/;
/** Fetched and stored, fresh for the upstream's 60 s (less the second-granular Date's share). */
const STORED = /^etagere; fwd=miss; fwd-status=200; ttl=(59|60); stored$/;

interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
}

describe('proxy under upstream faults', () => {
  let fake: FakeUpstream;
  let gone: FakeUpstream;
  let held: ScriptedUpstream;
  /** Answers the scripted upstream holds back until a test releases them. */
  const heldAnswers: Array<() => void> = [];
  let proxy: TestProxy;
  const client = new Agent({ keepAliveTimeout: 1_000 });

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1e9, tokenLimit: 1e9 });
    gone = await startFakeUpstream({ anonymousLimit: 1e9 });
    const dead = await deadPort();
    held = await startScriptedUpstream((req, res) => {
      const big = req.url === '/big';
      const body = big ? Buffer.alloc(1024 * 1024, 'x') : Buffer.from('{"small":true}');
      const answer = (): void => {
        res.writeHead(200, {
          'content-type': big ? 'text/plain' : 'application/json',
          'content-length': body.length,
          'cache-control': 'max-age=60',
        });
        res.end(body);
      };
      if (big) heldAnswers.push(answer);
      else answer();
    });
    proxy = await startTestProxy({
      cache: { max_entry_bytes: MAX_ENTRY },
      upstreams: [
        // Default policy: entries are fresh for 60 s, so a broken body that got stored would be
        // served as a hit. Cold paths go here.
        { name: 'gh', prefix: '/', url: fake.url, timeouts: TIMEOUTS },
        // Entries always need revalidation: every request goes upstream, a stored entry is there
        // to fall back on. Warm paths go here.
        { name: 'stale', prefix: '/stale', strip_prefix: true, url: fake.url, timeouts: TIMEOUTS, cache: { max_age_cap_seconds: 0 } },
        { name: 'gone', prefix: '/gone', strip_prefix: true, url: gone.url, timeouts: TIMEOUTS, cache: { max_age_cap_seconds: 0 } },
        { name: 'dead', prefix: '/dead', strip_prefix: true, url: `http://127.0.0.1:${dead}`, timeouts: TIMEOUTS },
        // One connection only: a connection the proxy fails to give back shows as a hang. No retry:
        // a headers timeout retried would wait 2 x headers_ms before the flight ends.
        {
          name: 'held',
          prefix: '/held',
          strip_prefix: true,
          url: held.url,
          connections: 1,
          retries: 0,
          timeouts: { ...TIMEOUTS, headers_ms: 5_000 },
        },
      ],
    });
  });

  afterEach(async () => {
    await clearFaults(); // a failed test leaves no rule behind for the next one
  });

  afterAll(async () => {
    await proxy?.close();
    await client.close();
    await fake?.close();
    await gone?.close().catch(() => undefined); // closed by a test already
    for (const answer of heldAnswers.splice(0)) answer();
    await held?.close();
  });

  const get = async (path: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): Promise<Got> => {
    const res = await request(`${proxy.url}${path}`, { method, headers, dispatcher: client, signal: AbortSignal.timeout(DEADLINE_MS) });
    const body = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: res.headers, body, text: body.toString('utf8') };
  };
  const direct = async (path: string): Promise<string> => (await fetch(`${fake.url}${path}`)).text();
  const setFaults = async (faults: FaultRuleInput[]): Promise<void> => {
    const res = await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults }) });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const clearFaults = async (): Promise<void> => {
    expect((await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' })).status).toBe(200);
  };
  const upstreamHits = (path: string): number => fake.stats().byPath[path] ?? 0;
  const expectGitHubError = (answer: Got, status: number): void => {
    expect(answer.status, answer.text).toBe(status);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    const body = JSON.parse(answer.text) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['documentation_url', 'message']);
    expect(typeof body.message).toBe('string');
  };

  /**
   * Each kind: the rule, what a client gets without a stored entry, and the upstream status
   * Cache-Status reports when a stored entry is served instead.
   */
  const KINDS: Array<{ rule: FaultRuleInput; cold: number; fwd: number }> = [
    { rule: { kind: 'refuse' }, cold: 502, fwd: 502 },
    { rule: { kind: 'reset-headers' }, cold: 502, fwd: 502 },
    { rule: { kind: 'reset-body' }, cold: 502, fwd: 502 },
    { rule: { kind: 'truncate' }, cold: 502, fwd: 502 },
    { rule: { kind: 'slow-headers' }, cold: 504, fwd: 504 },
    // undici's body timer ticks at about half a second: pieces 3 s apart are sure to trip it.
    { rule: { kind: 'slow-body', ms: 30_000 }, cold: 504, fwd: 504 },
    { rule: { kind: 'bad-json' }, cold: 502, fwd: 502 },
    // The upstream's own 5xx reaches the client as it is (a GitHub-shaped JSON error).
    { rule: { kind: 'status', status: 500 }, cold: 500, fwd: 500 },
    { rule: { kind: 'status', status: 503 }, cold: 503, fwd: 503 },
  ];

  const KIND_CASES = KINDS.map((k, i) => ({ ...k, i, name: `${k.rule.kind}${k.rule.status ?? ''}` }));
  describe.each(KIND_CASES)('$name', ({ rule, cold, fwd, i: index }) => {
    // Distinct resources per kind, so that one kind's entries never help another's.
    const coldPath = `/repos/etagere-org/repo-${String(index + 1).padStart(3, '0')}`;
    const warmPath = `/repos/etagere-org/repo-${String(index + 31).padStart(3, '0')}`;

    it('without a stored entry: a GitHub-shaped error, and nothing is stored', async () => {
      await setFaults([rule]);
      const before = upstreamHits(coldPath);
      const answer = await get(coldPath);
      expectGitHubError(answer, cold);
      expect(upstreamHits(coldPath) - before).toBeLessThanOrEqual(1);
      await clearFaults();
      // The next request goes upstream and gets the whole body.
      const hitsBefore = fake.stats().total;
      const next = await get(coldPath);
      expect(next.status).toBe(200);
      expect(next.headers['cache-status']).toMatch(STORED);
      expect(fake.stats().total).toBe(hitsBefore + 1);
      expect(JSON.parse(next.text)).toEqual(JSON.parse(await direct(coldPath)));
    });

    it('with a stored entry: the entry, marked stale-if-error; it survives the fault', async () => {
      const stored = await get(`/stale${warmPath}`);
      expect(stored.status).toBe(200);
      expect(stored.headers['cache-status']).toMatch(/^etagere; fwd=miss; fwd-status=200; ttl=-?\d+; stored$/);
      await setFaults([rule]);
      const answer = await get(`/stale${warmPath}`);
      expect(answer.status).toBe(200);
      expect(answer.headers['cache-status']).toMatch(STALE);
      expect(STALE.exec(String(answer.headers['cache-status']))![1]).toBe(String(fwd));
      expect(answer.text).toBe(stored.text);
      expect(answer.headers.etag).toBe(stored.headers.etag);
      // HEAD is answered from the same entry.
      const head = await get(`/stale${warmPath}`, {}, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.headers['cache-status']).toMatch(STALE);
      await clearFaults();
      const next = await get(`/stale${warmPath}`);
      expect(next.status).toBe(200);
      expect(next.headers['cache-status']).toMatch(/^etagere; fwd=stale; fwd-status=304;/);
      expect(next.text).toBe(stored.text);
    });
  });

  it('slow-body within the timeouts: the whole body arrives late and is stored', async () => {
    const path = '/repos/etagere-org/repo-020';
    await setFaults([{ kind: 'slow-body', ms: 600 }]); // 10 pieces, 60 ms apart: under body_ms
    const started = Date.now();
    const answer = await get(path);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    await clearFaults();
    expect(answer.status).toBe(200);
    expect(answer.headers['cache-status']).toMatch(STORED);
    expect(JSON.parse(answer.text)).toEqual(JSON.parse(await direct(path)));
    expect((await get(path)).headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+$/);
  });

  it('huge: streamed to the client whole, never stored (with and without a stored entry)', async () => {
    const bytes = 1024 * 1024;
    const coldPath = '/repos/etagere-org/repo-021';
    const warmPath = '/stale/repos/etagere-org/repo-051';
    const stored = await get(warmPath);
    await setFaults([{ kind: 'huge', bytes }]);
    for (const path of [coldPath, warmPath]) {
      const answer = await get(path);
      expect(answer.status).toBe(200);
      expect(answer.body.length).toBe(bytes);
      expect(answer.headers['cache-status']).toBe('etagere; fwd=miss; fwd-status=200; detail=too-large');
      expect(JSON.parse(answer.text)).toHaveProperty('huge');
    }
    await clearFaults();
    const cold = await get(coldPath);
    expect(cold.headers['cache-status']).toMatch(STORED);
    expect(cold.body.length).toBeLessThan(MAX_ENTRY);
    const warm = await get(warmPath);
    expect(warm.headers['cache-status']).toMatch(/^etagere; fwd=stale; fwd-status=304;/);
    expect(warm.text).toBe(stored.text);
  });

  it('coalesced waiters share a fault: all get the error or the entry, none hangs', async () => {
    await setFaults([{ kind: 'reset-body' }]);
    const cold = await Promise.all(Array.from({ length: 20 }, () => get('/repos/etagere-org/repo-022')));
    for (const answer of cold) expectGitHubError(answer, 502);
    await setFaults([{ kind: 'slow-headers' }]);
    const stored = await get('/stale/repos/etagere-org/repo-052').catch(() => undefined);
    expect(stored?.status).toBe(504); // nothing stored yet
    await clearFaults();
    await get('/stale/repos/etagere-org/repo-052');
    await setFaults([{ kind: 'slow-headers' }]);
    const warm = await Promise.all(Array.from({ length: 20 }, () => get('/stale/repos/etagere-org/repo-052')));
    await clearFaults();
    for (const answer of warm) {
      expect(answer.status).toBe(200);
      expect(answer.headers['cache-status']).toMatch(/fwd=stale; fwd-status=504; .*detail=stale-if-error/);
    }
  });

  /** GET or HEAD on another proxy: the answer, or the client-side error that took its place. */
  const ask = async (base: string, path: string, method: 'GET' | 'HEAD'): Promise<Got | string> => {
    try {
      const res = await request(`${base}${path}`, { method, dispatcher: client, signal: AbortSignal.timeout(DEADLINE_MS) });
      const body = Buffer.from(await res.body.arrayBuffer());
      return { status: res.statusCode, headers: res.headers, body, text: body.toString('utf8') };
    } catch (err) {
      return `${(err as Error).name}: ${(err as { code?: string }).code ?? (err as Error).message}`;
    }
  };
  const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'max-age=60' };

  it('waiters coalesced on a too-large answer fetch for themselves: a fault on that fetch is a 502, never a cut connection', async () => {
    // The flight's answer, held until the waiters have joined, is over the entry cap: it streams
    // to its own client only and nothing is stored. Every later fetch fails in the middle of its
    // body. A waiter used to be forwarded as a plain stream: it got the headers, then a cut
    // connection (or, for a bad-json fault, a 200 with a broken body), where its own answer was
    // due: the 10,000-request soak below saw one such client socket error now and then.
    const big = Buffer.from(JSON.stringify({ big: 'x'.repeat(2 * MAX_ENTRY) }));
    const small = Buffer.from(JSON.stringify({ small: true, pad: 'y'.repeat(200) }));
    let release: (() => void) | undefined;
    const up = await startScriptedUpstream((_req, res) => {
      if (release === undefined) {
        release = () => {
          res.writeHead(200, { ...JSON_HEADERS, 'content-length': big.length });
          res.end(big);
        };
        return;
      }
      res.writeHead(200, { ...JSON_HEADERS, 'content-length': small.length });
      res.write(small.subarray(0, 10), () => setImmediate(() => res.socket?.resetAndDestroy()));
    });
    const joinProxy = await startTestProxy({
      cache: { max_entry_bytes: MAX_ENTRY },
      upstreams: [{ name: 'join', prefix: '/', url: up.url, timeouts: TIMEOUTS }],
    });
    try {
      const first = ask(joinProxy.url, '/join', 'GET');
      await until(() => release !== undefined, DEADLINE_MS, 'the upstream to receive the first request');
      const waiters = Promise.all([
        ask(joinProxy.url, '/join', 'GET'),
        ask(joinProxy.url, '/join', 'GET'),
        ask(joinProxy.url, '/join', 'HEAD'),
      ]);
      await until(() => joinProxy.inFlight() === 4, DEADLINE_MS, 'the waiters to join the flight');
      release!();
      const leader = await first;
      if (typeof leader === 'string') throw new Error(`the first client got ${leader}`);
      expect(leader.status).toBe(200);
      expect(leader.body.length).toBe(big.length);
      expect(leader.headers['cache-status']).toBe('etagere; fwd=miss; fwd-status=200; detail=too-large');
      const [get1, get2, head] = await waiters;
      for (const waiter of [get1, get2]) {
        if (typeof waiter === 'string') throw new Error(`a waiter got ${waiter}`);
        expectGitHubError(waiter, 502);
      }
      if (typeof head === 'string') throw new Error(`the HEAD waiter got ${head}`);
      expect(head.status).toBe(502);
      expect(up.seen).toHaveLength(4); // the flight, then one fetch per waiter
    } finally {
      await joinProxy.close();
      await up.close();
    }
  });

  it('a HEAD over the entry cap is answered with its headers; the body, which it never carries, is not waited for', async () => {
    // The answer's body comes in halves, then the upstream connection is reset. A HEAD answer is
    // complete without it, so the client gets a 200 (it used to wait for the last byte, then get a
    // cut connection), and a GET still gets the cut: its body cannot be completed.
    const big = Buffer.from(JSON.stringify({ big: 'x'.repeat(2 * MAX_ENTRY) }));
    const up = await startScriptedUpstream((_req, res) => {
      res.writeHead(200, { ...JSON_HEADERS, 'content-length': big.length });
      res.write(big.subarray(0, big.length / 2), () => setTimeout(() => res.socket?.resetAndDestroy(), 100));
    });
    const headProxy = await startTestProxy({
      cache: { max_entry_bytes: MAX_ENTRY },
      upstreams: [{ name: 'head', prefix: '/', url: up.url, timeouts: TIMEOUTS }],
    });
    try {
      const head = await ask(headProxy.url, '/head', 'HEAD');
      if (typeof head === 'string') throw new Error(`the HEAD got ${head}`);
      expect(head.status).toBe(200);
      expect(head.headers['content-length']).toBe(String(big.length));
      expect(head.headers['cache-status']).toBe('etagere; fwd=miss; fwd-status=200; detail=too-large');
      // Documented: a streamed body that fails is cut, never ended short.
      expect(typeof (await ask(headProxy.url, '/head', 'GET')), 'a GET of that body is cut').toBe('string');
      await until(() => headProxy.inFlight() === 0, DEADLINE_MS, 'nothing left in flight');
    } finally {
      await headProxy.close();
      await up.close();
    }
  });

  it('a client that leaves before a too-large answer arrives does not pin the upstream connection', async () => {
    // The answer, over the entry cap, comes after its client has gone: the proxy must drop the
    // body, not leave it unread (undici's body timeout does not run on a paused body, so the
    // connection would be held for good and every later request would queue behind it).
    const leave = new AbortController();
    const left = request(`${proxy.url}/held/big`, { dispatcher: client, signal: leave.signal }).catch((err: Error) => err.name);
    await until(() => heldAnswers.length === 1, DEADLINE_MS, 'the upstream to receive the request');
    leave.abort();
    expect(await left).toBe('AbortError');
    await until(() => proxy.inFlight() === 0, DEADLINE_MS, 'the proxy to see its client leave');
    heldAnswers.shift()!(); // 1 MiB, over the entry cap, for nobody
    const small = await get('/held/small');
    expect(small.status).toBe(200);
    expect(JSON.parse(small.text)).toEqual({ small: true });
  });

  it('connection refused (a closed port): 502 without an entry, the entry with one', async () => {
    const never = await get('/dead/users/octocat');
    expectGitHubError(never, 502);
    expect(JSON.parse(never.text).message).toContain('ECONNREFUSED');

    const stored = await get('/gone/repos/octocat/hello-world');
    expect(stored.status).toBe(200);
    await gone.close(); // nothing listens on its port any more
    const answer = await get('/gone/repos/octocat/hello-world');
    expect(answer.status).toBe(200);
    expect(answer.headers['cache-status']).toMatch(/^etagere; fwd=stale; fwd-status=502; ttl=-?\d+; detail=stale-if-error$/);
    expect(answer.text).toBe(stored.text);
    const cold = await get('/gone/users/bob');
    expectGitHubError(cold, 502);
    expect(JSON.parse(cold.text).message).toContain('ECONNREFUSED');
  });
});

/** 10,000 in `npm run soak`, 2,000 in `npm test`; UPSTREAM_FAULT_REQUESTS sets another count. */
const TOTAL = soakSize('UPSTREAM_FAULT_REQUESTS', { soak: 10_000, quick: 2_000 });

describe(`proxy under ${TOTAL} faulted requests`, () => {
  const CONCURRENCY = 32;
  const CONNECTIONS = 16;
  /** Mostly fast kinds; a few slow and huge ones; about a fifth of requests are not faulted. */
  const MIX: FaultRuleInput[] = [
    { kind: 'refuse', rate: 0.12 },
    { kind: 'reset-headers', rate: 0.12 },
    { kind: 'reset-body', rate: 0.12 },
    { kind: 'truncate', rate: 0.12 },
    { kind: 'status', status: 503, rate: 0.1 },
    { kind: 'status', status: 500, rate: 0.02 },
    { kind: 'bad-json', rate: 0.1 },
    { kind: 'huge', bytes: 256 * 1024, rate: 0.01 },
    { kind: 'slow-headers', rate: 0.003 },
    { kind: 'slow-body', ms: 2_000, rate: 0.003 },
  ];

  let fake: FakeUpstream;
  let app: App;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1e9 });
    // Logs go nowhere (a capture would grow the heap being measured) but are still produced.
    const sink = new Writable({ write: (_c, _e, cb) => cb() });
    const logger = createLogger({ level: 'info', destination: sink as unknown as Parameters<typeof createLogger>[0]['destination'] });
    const config = parseConfig({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      cache: { max_entry_bytes: MAX_ENTRY },
      upstreams: [
        // negative_seconds 0: the COLD paths' 404s are never stored, so every request of theirs goes upstream to be faulted.
        {
          name: 'gh',
          prefix: '/',
          url: fake.url,
          connections: CONNECTIONS,
          timeouts: TIMEOUTS,
          cache: { max_age_cap_seconds: 0, negative_seconds: 0 },
        },
      ],
    });
    app = await startApp(config, { logger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  /** Stored once, then revalidated on every request: a fault is answered from the entry. */
  const WARM = [
    ...Array.from({ length: 40 }, (_, i) => `/repos/etagere-org/repo-${String(i + 1).padStart(3, '0')}`),
    '/users/octocat',
    '/users/alice',
    '/users/bob',
    '/orgs/etagere-org/repos?per_page=5',
    '/bicyclists/helsinki',
  ];
  /** Never stored (the fake answers 404, and 404s are not kept here): a fault reaches the client as an error. */
  const COLD = Array.from({ length: 50 }, (_, i) => `/repos/etagere-org/missing-${i}`);
  const pathOf = (i: number): string => (i % 4 === 3 ? COLD[i % COLD.length]! : WARM[i % WARM.length]!);

  type Outcome = { status: number } | { error: string };

  /** `count` requests at CONCURRENCY through a fresh client pool, closed at the end. */
  const run = async (count: number): Promise<Outcome[]> => {
    const pool = new Pool(app.url, { connections: CONCURRENCY });
    const outcomes: Outcome[] = [];
    let next = 0;
    const one = async (requestIndex: number): Promise<Outcome> => {
      const method = requestIndex % 10 === 9 ? 'HEAD' : 'GET';
      // Every 50th client gives up after 20 ms: the proxy must clean up after it too.
      const patience = requestIndex % 50 === 49 ? 20 : DEADLINE_MS;
      try {
        const res = await pool.request({ path: pathOf(requestIndex), method, signal: AbortSignal.timeout(patience) });
        const body = Buffer.from(await res.body.arrayBuffer());
        if (method === 'GET') {
          // Whatever the status, a client never receives a broken JSON body.
          const json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
          if (res.statusCode >= 400 && (typeof json.message !== 'string' || typeof json.documentation_url !== 'string')) {
            return { error: `not GitHub-shaped: ${res.statusCode}` };
          }
        }
        return { status: res.statusCode };
      } catch (err) {
        const failure = err as Error & { code?: string };
        if (patience < DEADLINE_MS && (failure.name === 'TimeoutError' || failure.name === 'AbortError'))
          return { error: 'client-gave-up' };
        return { error: `${failure.name}: ${failure.code ?? failure.message}` };
      }
    };
    const workers = Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const requestIndex = next++;
        if (requestIndex >= count) return;
        outcomes.push(await one(requestIndex));
      }
    });
    await Promise.all(workers);
    await pool.close();
    return outcomes;
  };

  const connections = (server: { getConnections(cb: (err: Error | null, count: number) => void): void }): Promise<number> =>
    new Promise((resolve) => server.getConnections((_e, n) => resolve(n)));

  /** Waits until nothing is in flight and every client connection is gone, then measures. */
  const settle = async (gc: (() => void) | undefined) => {
    await until(() => app.inFlight() === 0, 10_000, 'no request in flight');
    await until(async () => (await connections(app.server)) === 0, 10_000, 'client connections closed');
    // The proxy keeps at most CONNECTIONS keep-alive sockets to the upstream.
    await until(async () => (await connections(fake.server)) <= CONNECTIONS, 10_000, 'upstream sockets within the pool size');
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((r) => setImmediate(r));
      gc?.();
    }
    const resources: Record<string, number> = {};
    for (const resource of process.getActiveResourcesInfo()) resources[resource] = (resources[resource] ?? 0) + 1;
    const memory = process.memoryUsage();
    return {
      resources,
      handles: process.getActiveResourcesInfo().length,
      heapMiB: memory.heapUsed / 2 ** 20,
      externalMiB: (memory.external + memory.arrayBuffers) / 2 ** 20,
      proxySockets: await connections(app.server),
      upstreamSockets: await connections(fake.server),
    };
  };

  it('no crash, every answer well-formed, and no unbounded growth of sockets, timers or heap', async () => {
    // A real gc when V8 lets us have one (this process only); otherwise a generous bound below.
    let gc: (() => void) | undefined;
    try {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as () => void;
    } catch {
      gc = undefined;
    }
    const setFaults = async (faults: FaultRuleInput[]) => {
      const res = await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults }) });
      expect(res.status).toBe(200);
    };
    // Warm-up with the same mix: entries stored, lazy structures and JIT in place.
    await setFaults(MIX);
    await run(1_000);
    await setFaults([]);
    await run(WARM.length * 4); // every warm path stored at least once
    const before = await settle(gc);

    await setFaults(MIX);
    const started = Date.now();
    const outcomes = await run(TOTAL);
    const seconds = (Date.now() - started) / 1000;
    const injected = (
      (await (await fetch(`${fake.url}/__fake/faults`)).json()) as { faults: Array<{ kind: string; status?: number; injected: number }> }
    ).faults;
    await setFaults([]);
    const after = await settle(gc);

    // The proxy still answers normally.
    const ok = await request(`${app.url}/repos/octocat/hello-world`, { signal: AbortSignal.timeout(DEADLINE_MS) });
    expect(ok.statusCode).toBe(200);
    JSON.parse(await ok.body.text());

    const byStatus: Record<string, number> = {};
    for (const outcome of outcomes) {
      const label = 'status' in outcome ? String(outcome.status) : outcome.error;
      byStatus[label] = (byStatus[label] ?? 0) + 1;
    }
    const kinds = injected.map((f) => `${f.kind}${f.status ?? ''}=${f.injected}`).join(' ');
    const res = (r: Record<string, number>) => `TCP ${r.TCPSocketWrap ?? 0}, timers ${r.Timeout ?? 0}`;
    console.log(
      `upstream-faults soak: ${TOTAL} requests in ${seconds.toFixed(1)} s (concurrency ${CONCURRENCY}), ` +
        `0 crashes; outcomes ${JSON.stringify(byStatus)}; injected ${kinds}; ` +
        `handles before/after ${before.handles}/${after.handles} (${res(before.resources)} / ${res(after.resources)}); ` +
        `heap before/after ${before.heapMiB.toFixed(1)}/${after.heapMiB.toFixed(1)} MiB, ` +
        `external ${before.externalMiB.toFixed(1)}/${after.externalMiB.toFixed(1)} MiB${gc === undefined ? ' (no gc)' : ' (after gc)'}; ` +
        `upstream sockets ${before.upstreamSockets}/${after.upstreamSockets}`,
    );

    expect(outcomes).toHaveLength(TOTAL);
    const unexpected = Object.keys(byStatus).filter((k) => !['200', '404', '500', '502', '503', '504', 'client-gave-up'].includes(k));
    expect(unexpected, JSON.stringify(byStatus)).toEqual([]);
    expect(injected.reduce((n, f) => n + f.injected, 0)).toBeGreaterThan(TOTAL * 0.6);
    // Sockets: client connections all gone, upstream ones within the pool; a leak of one
    // socket or timer per faulted request would show thousands.
    expect(after.proxySockets).toBe(0);
    expect(after.upstreamSockets).toBeLessThanOrEqual(CONNECTIONS);
    expect(after.resources.TCPSocketWrap ?? 0).toBeLessThanOrEqual((before.resources.TCPSocketWrap ?? 0) + 2 * CONNECTIONS);
    expect(after.resources.Timeout ?? 0).toBeLessThanOrEqual((before.resources.Timeout ?? 0) + 10);
    expect(after.handles).toBeLessThanOrEqual(before.handles + 2 * CONNECTIONS + 10);
    // Heap: the soak's 10,000 requests leaking even 1 KiB each would add 10 MiB.
    expect(after.heapMiB - before.heapMiB).toBeLessThan(gc === undefined ? 32 : 8);
    expect(after.externalMiB - before.externalMiB).toBeLessThan(gc === undefined ? 32 : 8);
  }, 120_000);
});
