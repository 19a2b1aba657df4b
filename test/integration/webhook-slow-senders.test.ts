/**
 * Senders that hold the webhook receiver without finishing a delivery (a byte a second, a stop
 * mid-body, a forged but well-formed signature) never keep a genuine delivery out: GitHub does not
 * retry one that fails, so its invalidation would be lost. A request without a well-formed
 * signature is refused before its body is read; a body is read within webhooks.read_timeout_ms and
 * at a floor rate; a later delivery takes the slot of the read that began longest ago.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { metric } from '../helpers/replicas.js';
import { testSecret } from '../helpers/secrets.js';
import { deliver, mutate, rawSender, type RawSender } from '../helpers/webhooks.js';

const SECRET = testSecret('webhook secret of the slow senders test', 'whsec-slow-senders-0123456789abcdef');
const HELLO = '/repos/octocat/hello-world';
const PAYLOAD = { action: 'created', repository: { id: 1296269, full_name: 'octocat/hello-world' }, sender: { login: 'octocat' } };
/** A delivery of about 2 KB, as the slow senders announce it. */
const BODY = Buffer.from(JSON.stringify({ ...PAYLOAD, padding: 'x'.repeat(1_900) }));

const starsOf = (body: string): number => (JSON.parse(body) as { stargazers_count: number }).stargazers_count;
const series = async (proxy: TestProxy, text: string): Promise<number> => {
  const line = (await metric(proxy.adminUrl, text.split('{')[0]!)).split('\n').find((row) => row.startsWith(text));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
};
const deliveryHeaders = (signature: string | undefined): Record<string, string> => ({
  'x-github-event': 'star',
  'x-github-delivery': randomUUID(),
  ...(signature === undefined ? {} : { 'x-hub-signature-256': signature }),
});
/** Well-formed, but not the body's signature: only reading the body can tell. */
const FORGED = `sha256=${'ab'.repeat(32)}`;
const signed = (body: Buffer): string => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

/** The answer is GitHub-shaped JSON. */
function expectGitHubError(text: string): void {
  const json = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
  expect(json).toEqual({ message: expect.any(String), documentation_url: expect.any(String) });
}

describe('slow senders and the webhook receiver', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  const senders: RawSender[] = [];

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, cache: { policy: 'max-age', webhook_fresh_seconds: 600 } }],
      webhooks: { secret: SECRET, owners: ['*'], max_body_bytes: 65_536 },
    });
  });
  afterAll(async () => {
    for (const sender of senders) sender.stop();
    await proxy?.close();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  const open = (headers: Record<string, string>, body: Buffer = BODY): RawSender => {
    const sender = rawSender(proxy.url, headers, body);
    senders.push(sender);
    return sender;
  };

  it('six senders trickling a byte a second under a forged signature cannot keep a signed delivery out: applied within 1 s', async () => {
    await get(proxy.url + HELLO);
    expect((await get(proxy.url + HELLO)).headers['cache-status']).toMatch(/hit/); // fresh for 600 s
    const { stars } = await mutate(fake, HELLO); // the fake sends no webhook: the test delivers it
    const slow = Array.from({ length: 6 }, () => open(deliveryHeaders(FORGED)));
    let cut = 0;
    for (const sender of slow) {
      sender.send(1);
      sender.trickle(1_000);
      void sender.answer.then(() => cut++);
    }
    // All six reached the receiver: four being read (every slot), two gave their slots to later ones.
    await until(() => cut === 2 && proxy.inFlight() === 4, 3_000, 'six slow senders at the receiver');

    const started = Date.now();
    const sent = await deliver(proxy.url, SECRET, 'star', PAYLOAD);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(sent.status).toBe(200);
    expect(JSON.parse(sent.body)).toMatchObject({ message: 'Applied', event: 'star' });
    const after = await get(proxy.url + HELLO);
    expect(starsOf(after.body)).toBe(stars);
    expect(after.headers['cache-status']).toMatch(/fwd=stale; fwd-status=200/);

    // None of the six is ever read whole: each is cut (408) or gives its slot up (503), and closed.
    for (const answer of await Promise.all(slow.map((sender) => sender.answer))) {
      expect([408, 503]).toContain(answer.status);
      expectGitHubError(answer.text);
    }
    await Promise.all(slow.map((sender) => sender.closed));
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="too_slow"}')).toBeGreaterThanOrEqual(1);
  });

  it('no signature header, or a malformed one, is refused before the body is read (401), and the connection closed', async () => {
    const before = await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="bad_signature"}');
    const malformed = [
      undefined,
      '',
      `sha1=${'ab'.repeat(20)}`,
      'sha256=abc',
      `sha256=${'zz'.repeat(32)}`,
      `sha256=${'ab'.repeat(32)}, sha256=${'cd'.repeat(32)}`,
      `${'ab'.repeat(32)}`,
    ];
    const refused = malformed.map((signature) => open(deliveryHeaders(signature)));
    for (const sender of refused) sender.send(1); // and never the rest
    for (const answer of await Promise.all(refused.map((sender) => sender.answer))) {
      expect(answer.status).toBe(401);
      expectGitHubError(answer.text);
      expect(answer.text).toMatch(/^connection: close$/im);
    }
    await Promise.all(refused.map((sender) => sender.closed));
    expect(await series(proxy, 'etagere_webhook_deliveries_total{event="-",outcome="bad_signature"}')).toBe(before + malformed.length);
    expect(proxy.inFlight()).toBe(0);
    expect((await deliver(proxy.url, SECRET, 'star', PAYLOAD)).status).toBe(200);
  });

  it('a sender that stops mid-body is cut within about a second (408), and a delivery after it is applied', async () => {
    const stalled = open(deliveryHeaders(signed(BODY))); // its own signature: only the rest is missing
    stalled.send(500);
    const answer = await stalled.answer;
    expect(answer.status).toBe(408);
    expectGitHubError(answer.text);
    expect(answer.afterMs).toBeGreaterThanOrEqual(1_000); // the first second is left alone
    expect(answer.afterMs).toBeLessThan(3_000); // not held until the 10 s deadline
    await stalled.closed;
    expect(proxy.logs().some((line) => line.msg === 'webhook delivery cut: its body did not arrive in time' && line.why === 'rate')).toBe(
      true,
    );
    expect((await deliver(proxy.url, SECRET, 'star', PAYLOAD)).status).toBe(200);
  });

  it('an oversized body is refused by its Content-Length at once (413), forged signature and all', async () => {
    const big = open(deliveryHeaders(FORGED), Buffer.alloc(70_000, 0x20));
    big.send(1);
    const answer = await big.answer;
    expect(answer.status).toBe(413);
    expectGitHubError(answer.text);
    await big.closed;
  });

  it('a sender above the floor rate is still cut at webhooks.read_timeout_ms', async () => {
    const strict = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
      webhooks: { secret: SECRET, max_body_bytes: 65_536, read_timeout_ms: 1_500 },
    });
    try {
      const body = Buffer.alloc(60_000, 0x20);
      const steady = rawSender(strict.url, deliveryHeaders(signed(body)), body);
      senders.push(steady);
      steady.trickle(100, 3_000); // 30 KB a second: above the floor, but two seconds in all
      const answer = await steady.answer;
      expect(answer.status).toBe(408);
      expect(answer.afterMs).toBeGreaterThanOrEqual(1_400);
      expect(strict.logs().some((line) => line.why === 'deadline')).toBe(true);
    } finally {
      await strict.close();
    }
  });
});
