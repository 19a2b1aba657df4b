/**
 * Retries in transit through the proxy: a GET or HEAD whose upstream connection is reset or that
 * gets a 502/503/504 without Retry-After is sent again once; a POST, a rate-limit answer and a
 * 5xx with Retry-After are not; under a reset storm the budget keeps retries to a tenth.
 */
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream, type FaultRuleInput } from '../../fake-github/index.js';
import { counterSum } from '../helpers/metrics-text.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const repo = (n: number): string => `/repos/etagere-org/repo-${String(n).padStart(3, '0')}`;

describe('retries in transit', () => {
  let fake: FakeUpstream;
  let scripted: ScriptedUpstream;
  let proxy: TestProxy;
  const client = new Agent({ keepAliveTimeout: 1_000 });

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1e9, tokenLimit: 1e9 });
    scripted = await startScriptedUpstream((req, res) => {
      if (req.url === '/unavailable') {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '30' });
        res.end('{"message":"Service Unavailable"}');
      } else if (req.url === '/limited') {
        res.writeHead(403, { 'content-type': 'application/json', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '9999999999' });
        res.end('{"message":"API rate limit exceeded"}');
      } else {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"message":"Bad Gateway"}');
      }
    });
    const timeouts = { connect_ms: 1_000, headers_ms: 1_000, body_ms: 1_000 };
    proxy = await startTestProxy({
      upstreams: [
        { name: 'gh', prefix: '/', url: fake.url, timeouts },
        { name: 'pooled', prefix: '/pooled', strip_prefix: true, url: fake.url, token_pool: true, graphql: true, timeouts },
        { name: 'plain', prefix: '/plain', strip_prefix: true, url: fake.url, cache: { policy: 'none' }, timeouts },
        { name: 'off', prefix: '/off', strip_prefix: true, url: fake.url, retries: 0, timeouts },
        { name: 'storm', prefix: '/storm', strip_prefix: true, url: fake.url, cache: { policy: 'none' }, timeouts },
        { name: 'scripted', prefix: '/scripted', strip_prefix: true, url: scripted.url, cache: { policy: 'none' }, timeouts },
      ],
      pool: { tokens: [{ name: 'bob', value: 'demo_token_bob_public' }] },
    });
  });

  afterEach(async () => {
    await setFaults([]);
  });

  afterAll(async () => {
    await proxy?.close();
    await client.close();
    await fake?.close();
    await scripted?.close();
  });

  const setFaults = async (faults: FaultRuleInput[]): Promise<void> => {
    const res = await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults, seed: 7 }) });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const injected = async (): Promise<number> => {
    const { faults } = (await (await fetch(`${fake.url}/__fake/faults`)).json()) as { faults: Array<{ injected: number }> };
    return faults.reduce((sum, f) => sum + f.injected, 0);
  };
  const send = async (path: string, method: 'GET' | 'HEAD' | 'POST' = 'GET', body?: string) => {
    const res = await request(`${proxy.url}${path}`, { method, body, dispatcher: client, signal: AbortSignal.timeout(10_000) });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text };
  };
  const retries = async (labels: Record<string, string>): Promise<number> => {
    const text = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    return counterSum(text, 'etagere_upstream_retries_total', labels) ?? 0;
  };

  it('a GET whose connection is reset before any byte is answered from the retry', async () => {
    await setFaults([{ kind: 'reset', count: 1 }]);
    const answer = await send(repo(1));
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ full_name: 'etagere-org/repo-001' });
    expect(await injected()).toBe(1);
    expect(await retries({ upstream: 'gh', reason: 'reset', outcome: 'retried' })).toBe(1);
  });

  it('a HEAD, a refused connection and a 503 without Retry-After are retried too', async () => {
    await setFaults([{ kind: 'reset', count: 1 }]);
    expect((await send(`/plain${repo(2)}`, 'HEAD')).status).toBe(200);
    await setFaults([{ kind: 'refuse', count: 1 }]);
    expect((await send(`/plain${repo(3)}`)).status).toBe(200);
    await setFaults([{ kind: 'status', status: 503, count: 1 }]);
    expect((await send(repo(4))).status).toBe(200);
    expect(await retries({ upstream: 'plain', outcome: 'retried' })).toBe(2);
    expect(await retries({ upstream: 'gh', reason: 'status_503', outcome: 'retried' })).toBe(1);
  });

  it('a pooled GET is retried on a new lease and answered', async () => {
    await setFaults([{ kind: 'reset', count: 1 }]);
    const answer = await send(`/pooled${repo(5)}`);
    expect(answer.status, answer.text).toBe(200);
    expect(await retries({ upstream: 'pooled', reason: 'reset', outcome: 'retried' })).toBe(1);
  });

  it('a GraphQL POST is never retried', async () => {
    await setFaults([{ kind: 'reset', count: 1 }]);
    const answer = await send('/pooled/graphql', 'POST', JSON.stringify({ query: '{ viewer { login } }' }));
    expect(answer.status, answer.text).toBe(502);
    expect(Object.keys(JSON.parse(answer.text) as object).sort()).toEqual(['documentation_url', 'message']);
    expect(await injected()).toBe(1);
    expect(await retries({ upstream: 'pooled', reason: 'reset' })).toBe(1); // the GET's, before
  });

  it('retries: 0 sends a request once', async () => {
    await setFaults([{ kind: 'reset', count: 1 }]);
    const answer = await send(`/off${repo(6)}`);
    expect(answer.status).toBe(502);
    expect(await retries({ upstream: 'off' })).toBe(0);
  });

  it('a 503 with Retry-After and a rate-limit 403 go to the client as they are, sent once', async () => {
    const before = scripted.seen.length;
    const unavailable = await send('/scripted/unavailable');
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers['retry-after']).toBe('30');
    expect((await send('/scripted/limited')).status).toBe(403);
    expect(scripted.seen.length - before).toBe(2);
    expect(await retries({ upstream: 'scripted' })).toBe(0);
  });

  it('a 502 that persists is retried once, then reaches the client', async () => {
    const before = scripted.seen.length;
    expect((await send('/scripted/broken')).status).toBe(502);
    expect(scripted.seen.length - before).toBe(2);
    expect(await retries({ upstream: 'scripted', reason: 'status_502', outcome: 'retried' })).toBe(1);
  });

  it('under a reset storm the budget keeps retries to about a tenth: most requests fail fast with a clean 502', async () => {
    await setFaults([{ kind: 'reset' }]);
    const TOTAL = 200;
    const answers = [];
    for (let i = 0; i < TOTAL; i += 10) {
      answers.push(...(await Promise.all(Array.from({ length: 10 }, (_, j) => send(`/storm${repo(1 + ((i + j) % 75))}`)))));
    }
    for (const answer of answers) {
      expect(answer.status).toBe(502);
      expect(Object.keys(JSON.parse(answer.text) as object).sort()).toEqual(['documentation_url', 'message']);
    }
    const retried = await retries({ upstream: 'storm', outcome: 'retried' });
    expect(retried).toBeGreaterThan(0);
    expect(retried).toBeLessThanOrEqual(TOTAL / 10 + 3);
    expect(await retries({ upstream: 'storm', outcome: 'budget_exhausted' })).toBe(TOTAL - retried);
    expect(await injected()).toBe(TOTAL + retried);
  });
});
