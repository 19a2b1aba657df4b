/**
 * The webhook receiver of one proxy, against the fake upstream's signed webhooks. A
 * delivery marks what it concerns stale (the next read shows the change, though the entry had 600 s
 * of freshness); a bad signature, a replay, an oversized body and an unknown event change nothing.
 */
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { runCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { metric } from '../helpers/replicas.js';
import { testSecret } from '../helpers/secrets.js';
import { answered, deliver, fakeDeliveries, mutate, pointFakeAt, WEBHOOK_PATH } from '../helpers/webhooks.js';

const SECRET = testSecret('webhook secret of the integration test', 'whsec-integration-0123456789abcdef');
const HELLO = '/repos/octocat/hello-world';

const starsOf = (body: string): number => (JSON.parse(body) as { stargazers_count: number }).stargazers_count;
const series = async (proxy: TestProxy, text: string): Promise<number> => {
  const line = (await metric(proxy.adminUrl, text.split('{')[0]!)).split('\n').find((row) => row.startsWith(text));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
};

describe('the webhook receiver', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, cache: { policy: 'max-age', webhook_fresh_seconds: 600 } }],
      webhooks: { secret: SECRET, owners: ['*'], max_body_bytes: 65_536 },
    });
    await pointFakeAt(fake, proxy.url, SECRET);
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  it('a signed delivery marks the repository stale: the next read revalidates and shows the change', async () => {
    const first = await get(proxy.url + HELLO);
    expect(first.status).toBe(200);
    const cached = await get(proxy.url + HELLO);
    expect(cached.headers['cache-status']).toMatch(/hit; ttl=(59\d|600)/); // webhook_fresh_seconds, not GitHub's 60
    const { stars, deliveries } = await mutate(fake, HELLO);
    expect(deliveries).toHaveLength(2); // star (created) and watch (started), as GitHub sends them
    const records = await answered(fake, deliveries);
    expect(records.map((record) => record.status)).toEqual([200, 200]);
    const after = await get(proxy.url + HELLO);
    expect(starsOf(after.body)).toBe(stars);
    expect(after.headers['cache-status']).toMatch(/fwd=stale; fwd-status=200/); // revalidated with its ETag: changed
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="star",outcome="applied"}')).toBe(1);
    expect(await series(proxy, 'etagere_cache_invalidations_total{source="webhook"}')).toBeGreaterThanOrEqual(1);
    expect(await series(proxy, 'etagere_webhook_staleness_seconds_count')).toBe(1);
  });

  it('a rename marks the old name: the next read of it follows the move', async () => {
    expect((await get(`${proxy.url}/repos/octocat/spoon-knife`)).status).toBe(200);
    const res = await request(`${fake.url}/__fake/rename`, {
      method: 'POST',
      body: JSON.stringify({ path: '/repos/octocat/spoon-knife', name: 'fork-me' }),
    });
    const { deliveries } = (await res.body.json()) as { deliveries: string[] };
    await answered(fake, deliveries);
    const old = await get(`${proxy.url}/repos/octocat/spoon-knife`);
    expect(old.status).toBe(301);
  });

  it('a bad or missing signature is 401, counted, and marks nothing', async () => {
    await get(proxy.url + HELLO);
    const before = await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="bad_signature"}');
    const payload = { action: 'created', repository: { id: 1296269, full_name: 'octocat/hello-world' } };
    const wrong = await deliver(proxy.url, SECRET, 'star', payload, { signWith: 'not-the-secret-at-all-0123456789' });
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body)).toEqual({ message: expect.stringMatching(/^Bad signature/), documentation_url: expect.any(String) });
    expect(wrong.body).not.toContain(SECRET);
    expect((await deliver(proxy.url, SECRET, 'star', payload, { signWith: null })).status).toBe(401);
    const tampered = await deliver(proxy.url, SECRET, 'star', payload, { headers: { 'x-hub-signature-256': 'sha256=' + 'ab'.repeat(32) } });
    expect(tampered.status).toBe(401);
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="bad_signature"}')).toBe(before + 3);
    expect((await get(proxy.url + HELLO)).headers['cache-status']).toMatch(/hit/); // still fresh: nothing marked
    expect(proxy.logText()).not.toContain(SECRET);
  });

  it('a replayed delivery (the same X-GitHub-Delivery) is acknowledged and not applied twice', async () => {
    await get(proxy.url + HELLO);
    const { deliveries } = await mutate(fake, HELLO);
    await answered(fake, deliveries);
    await get(proxy.url + HELLO); // refetched: fresh again
    const marked = await series(proxy, 'etagere_cache_invalidations_total{source="webhook"}');
    const replay = await request(`${fake.url}/__fake/webhooks/redeliver`, {
      method: 'POST',
      body: JSON.stringify({ delivery: deliveries[0] }),
    });
    expect(replay.statusCode).toBe(200);
    await replay.body.dump();
    await until(async () =>
      (await fakeDeliveries(fake)).some((record) => record.id === deliveries[0] && record.redelivery && record.status !== null),
    );
    expect((await fakeDeliveries(fake)).find((record) => record.id === deliveries[0])?.status).toBe(200);
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="star",outcome="duplicate"}')).toBe(1);
    expect(await series(proxy, 'etagere_cache_invalidations_total{source="webhook"}')).toBe(marked);
    expect((await get(proxy.url + HELLO)).headers['cache-status']).toMatch(/hit/);
  });

  it('an oversized body is 413, by Content-Length or as it streams, and marks nothing', async () => {
    await get(proxy.url + HELLO);
    const big = { action: 'created', repository: { id: 1296269, full_name: 'octocat/hello-world' }, padding: 'x'.repeat(70_000) };
    const declared = await deliver(proxy.url, SECRET, 'star', big);
    expect(declared.status).toBe(413);
    // Chunked: no Content-Length, so the cap applies as the bytes arrive.
    const chunks = async function* (): AsyncGenerator<Buffer> {
      for (let index = 0; index < 10; index++) yield Buffer.alloc(8192, 0x20);
    };
    const streamed = await request(`${proxy.url}${WEBHOOK_PATH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'star',
        'x-github-delivery': 'streamed-1',
        'x-hub-signature-256': `sha256=${'00'.repeat(32)}`, // well-formed: a malformed one is refused before the body is read
      },
      body: Readable.from(chunks()),
    }).catch((err: unknown) => err as Error);
    if (!(streamed instanceof Error)) {
      expect(streamed.statusCode).toBe(413);
      await streamed.body.dump();
    }
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="too_large"}')).toBe(2);
    expect((await get(proxy.url + HELLO)).headers['cache-status']).toMatch(/hit/);
  });

  it('an unknown event is 202 and ignored; a bad payload or delivery id is 400; only POST is taken', async () => {
    await get(proxy.url + HELLO);
    const unknown = await deliver(proxy.url, SECRET, 'sponsorship', {
      action: 'created',
      repository: { full_name: 'octocat/hello-world' },
    });
    expect(unknown.status).toBe(202);
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="other",outcome="ignored"}')).toBe(1);
    expect((await deliver(proxy.url, SECRET, 'star', Buffer.from('{not json'))).status).toBe(400);
    expect((await deliver(proxy.url, SECRET, 'star', { repository: {} }, { delivery: null })).status).toBe(400);
    expect((await deliver(proxy.url, SECRET, 'star', { repository: {} }, { delivery: 'bad id with spaces' })).status).toBe(400);
    expect((await deliver(proxy.url, SECRET, 'star', {}, { contentType: 'text/plain' })).status).toBe(400);
    const form = await deliver(
      proxy.url,
      SECRET,
      'ping',
      Buffer.from(`payload=${encodeURIComponent('{"zen":"Half measures are as bad as nothing at all."}')}`),
      {
        contentType: 'application/x-www-form-urlencoded',
      },
    );
    expect(form.status).toBe(200);
    const before = fake.stats().total;
    const read = await get(proxy.url + WEBHOOK_PATH);
    expect(read.status).toBe(405);
    expect(read.headers.allow).toBe('POST');
    expect(fake.stats().total).toBe(before); // the receiver's path never reaches the upstream
    expect((await get(proxy.url + HELLO)).headers['cache-status']).toMatch(/hit/);
  });

  it("the fake's command line sends its signed webhooks to --webhook-url", { timeout: 30_000 }, async () => {
    const cli = runCli(['fake-upstream', '--port', '0', '--webhook-url', proxy.url + WEBHOOK_PATH, '--webhook-secret', SECRET]);
    try {
      await until(() => /listening on (http:\/\/\S+)/.test(cli.stdout()), 20_000, 'the fake to listen');
      expect(cli.stdout()).toContain(`webhooks to ${proxy.url}${WEBHOOK_PATH} (signed)`);
      expect(cli.stdout()).not.toContain(SECRET);
      const url = /listening on (http:\/\/\S+)/.exec(cli.stdout())![1]!;
      const before = await series(proxy, 'etagere_webhook_deliveries_total{event="star",outcome="applied"}');
      await request(`${url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path: HELLO }) }).then((res) => res.body.dump());
      await until(async () => (await series(proxy, 'etagere_webhook_deliveries_total{event="star",outcome="applied"}')) === before + 1);
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
    const alone = runCli(['fake-upstream', '--port', '0', '--webhook-secret', SECRET]);
    expect((await alone.exited).code).toBe(2);
    expect(alone.stderr()).toContain('--webhook-secret needs --webhook-url');
  });

  it('without a secret there is no receiver: the path is routed like any other', async () => {
    const plain = await startTestProxy({ upstreams: [{ name: 'github', prefix: '/', url: fake.url }] });
    try {
      const res = await deliver(plain.url, SECRET, 'ping', {});
      expect(res.status).toBe(405); // the fake's upstream answer to a POST through a read-only route
      expect(res.body).toContain('read-only');
    } finally {
      await plain.close();
    }
  });
});
