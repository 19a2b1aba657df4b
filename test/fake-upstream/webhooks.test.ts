/**
 * The fake's webhooks, against GitHub's documented deliveries: headers, the HMAC signatures over
 * the exact body, payload shapes for each change the fake makes, one attempt per delivery (no
 * retry), redelivery with the same GUID and body, and the secret never shown.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { testAppKeys } from '../helpers/apps.js';
import { ISO, OCTOCAT_REPO, auth, get, post, until, type JsonObject } from './helpers.js';

const SECRET = 'fake-webhook-secret-0123456789';

interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A receiver that records every delivery and answers `status`. */
async function startReceiver(): Promise<{ url: string; got: Received[]; status: { value: number }; close(): Promise<void> }> {
  const got: Received[] = [];
  const status = { value: 200 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(status.value).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    got,
    status,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const payloadOf = (received: Received): JsonObject => JSON.parse(received.body.toString('utf8')) as JsonObject;
const sha256 = (body: Buffer): string => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

describe('fake upstream: webhooks', () => {
  const keys = testAppKeys('fake-upstream/webhooks App');
  let fake: FakeUpstream;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    fake = await startFakeUpstream({
      webhookUrl: receiver.url,
      webhookSecret: SECRET,
      apps: [{ id: 777, slug: 'hook-app', publicKey: keys.publicKey, installations: [{ id: 7701, account: 'etagere-org' }] }],
    });
  });
  afterAll(async () => {
    await fake?.close();
    await receiver?.close();
  });
  beforeEach(() => {
    fake.reset();
    receiver.got.length = 0;
    receiver.status.value = 200;
  });

  it("a repository's star sends star and watch, signed, with GitHub's headers and payloads", async () => {
    const mutation = await post(`${fake.url}/__fake/mutate`, { path: '/repos/etagere-org/repo-001' });
    const { deliveries, changed } = mutation.json<{ deliveries: string[]; changed: { stargazers_count: { to: number } } }>();
    expect(deliveries).toHaveLength(2);
    await until(async () => (receiver.got.length === 2 ? true : undefined));
    const [star, watch] = receiver.got as [Received, Received];
    expect(star.headers['x-github-event']).toBe('star');
    expect(watch.headers['x-github-event']).toBe('watch');
    expect(star.headers['x-github-delivery']).toBe(deliveries[0]);
    expect(star.headers['x-github-delivery']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(star.headers['user-agent']).toMatch(/^GitHub-Hookshot\//);
    expect(star.headers['content-type']).toBe('application/json');
    expect(star.headers['x-github-hook-installation-target-type']).toBe('organization');
    expect(star.headers['x-hub-signature-256']).toBe(sha256(star.body));
    expect(star.headers['x-hub-signature']).toBe(`sha1=${createHmac('sha1', SECRET).update(star.body).digest('hex')}`);
    const payload = payloadOf(star);
    expect(payload.action).toBe('created');
    expect(payload.starred_at).toMatch(ISO);
    const repository = payload.repository as JsonObject;
    expect(repository.full_name).toBe('etagere-org/repo-001');
    expect(repository.stargazers_count).toBe(changed.stargazers_count.to);
    expect(repository.url).toBe(`${fake.url}/repos/etagere-org/repo-001`);
    expect(repository).not.toHaveProperty('permissions');
    expect((payload.organization as JsonObject).login).toBe('etagere-org');
    expect((payload.sender as JsonObject).login).toBe('octocat');
    expect(payloadOf(watch).action).toBe('started');
    // A user's repository has a repository hook.
    await post(`${fake.url}/__fake/mutate`, { path: '/repos/alice/dotfiles' });
    await until(async () => (receiver.got.length === 4 ? true : undefined));
    expect(receiver.got[2]!.headers['x-github-hook-installation-target-type']).toBe('repository');
    expect(payloadOf(receiver.got[2]!)).not.toHaveProperty('organization');
  });

  it('a rename sends repository "renamed" with the former name; users, organizations and cities send nothing', async () => {
    await post(`${fake.url}/__fake/mutate`, { path: '/users/bob' });
    await post(`${fake.url}/__fake/mutate`, { path: '/bicyclists/helsinki' });
    const renamed = await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/hello-world', name: 'hello-universe' });
    expect(renamed.json<{ deliveries: string[] }>().deliveries).toHaveLength(1);
    await until(async () => (receiver.got.length >= 1 ? true : undefined));
    expect(receiver.got).toHaveLength(1);
    const payload = payloadOf(receiver.got[0]!);
    expect(receiver.got[0]!.headers['x-github-event']).toBe('repository');
    expect(payload.action).toBe('renamed');
    expect(payload.changes).toEqual({ repository: { name: { from: 'hello-world' } } });
    expect((payload.repository as JsonObject).full_name).toBe('octocat/hello-universe');
  });

  it('installation changes send installation events with the repositories; GraphQL addStar sends a star', async () => {
    await post(`${fake.url}/__fake/installations/7701`, { suspended: true });
    await until(async () => (receiver.got.length === 1 ? true : undefined));
    const suspended = payloadOf(receiver.got[0]!);
    expect(receiver.got[0]!.headers['x-github-event']).toBe('installation');
    expect(suspended.action).toBe('suspend');
    expect((suspended.installation as JsonObject).id).toBe(7701);
    expect((suspended.installation as JsonObject).app_slug).toBe('hook-app');
    expect((suspended.repositories as JsonObject[]).length).toBeGreaterThan(70);
    const repo = await get(`${fake.url}/repos/octocat/spoon-knife`, auth(OCTOCAT_REPO));
    const nodeId = repo.json<{ node_id: string }>().node_id;
    const starred = await fetch(`${fake.url}/graphql`, {
      method: 'POST',
      headers: auth(OCTOCAT_REPO),
      body: JSON.stringify({ query: `mutation { addStar(input: {starrableId: "${nodeId}"}) { starrable { stargazerCount } } }` }),
    });
    expect(starred.status).toBe(200);
    await until(async () => (receiver.got.length === 3 ? true : undefined));
    expect(receiver.got.slice(1).map((received) => received.headers['x-github-event'])).toEqual(['star', 'watch']);
    expect((payloadOf(receiver.got[1]!).sender as JsonObject).login).toBe('octocat');
  });

  it('one attempt per delivery (no retry), its status recorded; a redelivery keeps the GUID and the body', async () => {
    receiver.status.value = 500;
    const { deliveries } = (await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/linguist' })).json<{ deliveries: string[] }>();
    const listed = await until(async () => {
      const all = (await get(`${fake.url}/__fake/webhooks`)).json<{ deliveries: Array<{ id: string; status: number | null }> }>()
        .deliveries;
      return all.filter((record) => deliveries.includes(record.id) && record.status !== null).length === 2 ? all : undefined;
    });
    expect(listed.map((record) => record.status)).toEqual([500, 500]);
    expect(receiver.got).toHaveLength(2); // no retry
    receiver.status.value = 202;
    const again = await post(`${fake.url}/__fake/webhooks/redeliver`, { delivery: deliveries[0] });
    expect(again.json()).toEqual({ redelivered: deliveries[0] });
    await until(async () => (receiver.got.length === 3 ? true : undefined));
    expect(receiver.got[2]!.headers['x-github-delivery']).toBe(deliveries[0]);
    expect(receiver.got[2]!.body.equals(receiver.got[0]!.body)).toBe(true);
    expect(receiver.got[2]!.headers['x-hub-signature-256']).toBe(receiver.got[0]!.headers['x-hub-signature-256']);
    expect((await post(`${fake.url}/__fake/webhooks/redeliver`, { delivery: 'no-such-delivery' })).status).toBe(404);
    expect((await post(`${fake.url}/__fake/webhooks/redeliver`, {})).status).toBe(400);
  });

  it('the secret is never shown; configuring a webhook pings it; bad input is 400; null stops the deliveries', async () => {
    const shown = await get(`${fake.url}/__fake/webhooks`);
    expect(shown.text).not.toContain(SECRET);
    expect(shown.json<{ url: string; secret: boolean }>()).toMatchObject({ url: receiver.url, secret: true });
    expect((await post(`${fake.url}/__fake/webhooks`, { url: 'ftp://nope' })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/webhooks`, { url: receiver.url, secret: 42 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/webhooks`, { url: receiver.url, extra: true })).status).toBe(400);
    const unsigned = await post(`${fake.url}/__fake/webhooks`, { url: receiver.url });
    expect(unsigned.json<{ secret: boolean }>().secret).toBe(false);
    await until(async () => (receiver.got.length === 1 ? true : undefined));
    expect(receiver.got[0]!.headers['x-github-event']).toBe('ping');
    expect(receiver.got[0]!.headers).not.toHaveProperty('x-hub-signature-256'); // no secret: unsigned, as on GitHub
    expect(payloadOf(receiver.got[0]!)).toMatchObject({ hook_id: 424242, hook: { config: { url: receiver.url } } });
    expect((await post(`${fake.url}/__fake/webhooks`, { url: null })).json<{ url: null }>().url).toBeNull();
    expect((await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/linguist' })).json()).not.toHaveProperty('deliveries');
    await post(`${fake.url}/__fake/webhooks`, { url: receiver.url, secret: SECRET }); // as the other tests expect
  });
});
