import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream } from '../../fake-github/index.js';
import { createPipeline } from '../../fake-github/server.js';
import { FakeState } from '../../fake-github/state.js';
import { DEMO_TOKENS } from '../../fake-github/tokens.js';
import {
  ALICE_PUBLIC,
  ALICE_REPO,
  BOB_PUBLIC,
  auth,
  get,
  post,
  rate,
  useFake,
  type AccountBody,
  type ErrorBody,
  type RepoBody,
} from './helpers.js';

/** A member that POST /__fake/mutate changed: its old and its new value. */
interface ChangedMember {
  from: unknown;
  to: unknown;
}

/** What POST /__fake/mutate answers: the resource changed, and its changed members (those named by `Members`). */
interface MutationBody<Members extends string = never> {
  path: string;
  kind: string;
  changed: Record<Members, ChangedMember>;
}

/** What GET and POST /__fake/config answer. */
interface ConfigBody {
  config: Record<string, unknown>;
}

describe('fake upstream: control endpoints', () => {
  const fake = useFake({ anonymousLimit: 1000, tokenLimit: 1000 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('GET /__fake/stats counts API and cyclist requests only, by path, status and credential label', async () => {
    const r0 = await get(`${fake.url}/repos/octocat/hello-world`);
    await get(`${fake.url}/repos/octocat/hello-world?x=1`, auth(ALICE_REPO));
    await get(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_PUBLIC));
    await get(`${fake.url}/repos/octocat/hello-world`, { 'if-none-match': r0.headers.get('etag')! });
    await get(`${fake.url}/users/nobody-at-all`, auth(BOB_PUBLIC));
    await get(`${fake.url}/users/octocat`, auth('wrong_token'));
    await get(`${fake.url}/bicyclists/spb`);
    await get(`${fake.url}/__fake/config`);
    const response = await get(`${fake.url}/__fake/stats`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.headers.get('x-ratelimit-limit')).toBeNull();
    const stats = response.json();
    expect(stats).toEqual({
      total: 7,
      byPath: { '/repos/octocat/hello-world': 4, '/users/nobody-at-all': 1, '/users/octocat': 1, '/bicyclists/spb': 1 },
      byStatus: { '200': 4, '304': 1, '404': 1, '401': 1 },
      byCredential: { anonymous: 3, alice: 2, bob: 1, invalid: 1 },
      byInstallation: {},
      notModified: 1,
      quotaSpent: 6,
      maxInFlight: 1,
    });
    expect(fake.stats()).toEqual(stats);
    expect(response.text).not.toContain('demo_token');
  });

  it('POST /__fake/mutate changes a repository: body, ETag and Last-Modified change, lists follow', async () => {
    const before = await get(`${fake.url}/repos/octocat/hello-world`);
    const listBefore = await get(`${fake.url}/users/octocat/repos`);
    const mutation = await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/hello-world' });
    expect(mutation.status).toBe(200);
    const change = mutation.json<MutationBody<'stargazers_count' | 'updated_at'>>();
    expect(change.path).toBe('/repos/octocat/hello-world');
    expect(change.kind).toBe('repository');
    expect(change.changed.stargazers_count).toEqual({ from: 2800, to: 2801 });
    expect(change.changed.updated_at.from).toBe('2024-06-20T10:00:00Z');
    const after = await get(`${fake.url}/repos/octocat/hello-world`);
    expect(after.json<RepoBody>().stargazers_count).toBe(2801);
    expect(after.json<RepoBody>().updated_at).toBe(change.changed.updated_at.to);
    expect(after.headers.get('etag')).not.toBe(before.headers.get('etag'));
    expect(after.headers.get('last-modified')).not.toBe(before.headers.get('last-modified'));
    const listAfter = await get(`${fake.url}/users/octocat/repos`);
    expect(listAfter.headers.get('etag')).not.toBe(listBefore.headers.get('etag'));
    // Absolute URLs and query strings are accepted too
    const again = await post(`${fake.url}/__fake/mutate`, { path: `${fake.url}/repos/octocat/hello-world?x=1` });
    expect(again.json<MutationBody<'stargazers_count'>>().changed.stargazers_count.to).toBe(2802);
  });

  it('POST /__fake/mutate changes users, organizations and cyclist counts', async () => {
    const u0 = await get(`${fake.url}/users/bob`);
    const mu = await post(`${fake.url}/__fake/mutate`, { path: '/users/bob' });
    expect(mu.json<MutationBody>().kind).toBe('user');
    const u1 = await get(`${fake.url}/users/bob`);
    expect(u1.json<AccountBody>().followers).toBe(u0.json<AccountBody>().followers + 1);
    expect(u1.headers.get('etag')).not.toBe(u0.headers.get('etag'));

    const mo = await post(`${fake.url}/__fake/mutate`, { path: '/orgs/etagere-org' });
    expect(mo.status).toBe(200);
    expect(mo.json<MutationBody>().kind).toBe('organization');

    const c0 = (await get(`${fake.url}/bicyclists/helsinki`)).text;
    const mc = await post(`${fake.url}/__fake/mutate`, { path: '/bicyclists/helsinki' });
    expect(mc.json<MutationBody<'count'>>().changed.count.from).toBe(Number(c0));
    const c1 = (await get(`${fake.url}/bicyclists/helsinki`)).text;
    expect(Number(c1)).toBeGreaterThan(Number(c0));
    expect(Number(c1)).toBe(mc.json<MutationBody<'count'>>().changed.count.to);
  });

  it('POST /__fake/mutate answers 404 for unknown resources and 400 for bad input', async () => {
    for (const path of ['/repos/octocat/nope', '/users/nobody', '/orgs/alice', '/bicyclists/atlantis', '/zen', 'relative']) {
      const response = await post(`${fake.url}/__fake/mutate`, { path });
      expect(response.status, path).toBe(404);
      expect(typeof response.json<ErrorBody>().message).toBe('string');
    }
    const bad: Array<[unknown, boolean]> = [
      ['{not json', true],
      ['', true],
      ['[1,2]', true],
      ['null', true],
      [{ path: 42 }, false],
      [{}, false],
      [{ path: '/users/bob', extra: 1 }, false],
    ];
    for (const [body, raw] of bad) {
      const response = await post(`${fake.url}/__fake/mutate`, body, raw);
      expect(response.status, String(body)).toBe(400);
      expect(typeof response.json<ErrorBody>().message).toBe('string');
    }
    expect((await get(`${fake.url}/__fake/mutate`)).status).toBe(405);
  });

  it('POST /__fake/reset restores stats, quotas, secondary mode and the seed data', async () => {
    const r0 = await get(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_REPO));
    await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/hello-world' });
    await post(`${fake.url}/__fake/secondary`, { count: 5 });
    const reset = await post(`${fake.url}/__fake/reset`, {});
    expect(reset.status).toBe(200);
    expect(fake.stats().total).toBe(0);
    expect((await get(`${fake.url}/__fake/secondary`)).json<{ secondary: { count: number } }>().secondary.count).toBe(0);
    const r1 = await get(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_REPO));
    expect(r1.status).toBe(200);
    expect(r1.text).toBe(r0.text);
    expect(r1.headers.get('etag')).toBe(r0.headers.get('etag'));
    expect(rate(r1.headers).used).toBe(1);
    // the programmatic reset does the same
    await get(`${fake.url}/users/bob`);
    fake.reset();
    expect(fake.stats().total).toBe(0);
  });

  it('POST /__fake/config changes limits and latency at runtime; reset {config:true} restores them', async () => {
    const configured = await post(`${fake.url}/__fake/config`, { anonymousLimit: 2, tokenLimit: 7 });
    expect(configured.status).toBe(200);
    expect(configured.json<ConfigBody>().config).toMatchObject({ anonymousLimit: 2, tokenLimit: 7, windowSeconds: 3600, latencyMs: 0 });
    expect(rate((await get(`${fake.url}/users/bob`)).headers).limit).toBe(2);
    expect(rate((await get(`${fake.url}/users/bob`, auth(ALICE_REPO))).headers).limit).toBe(7);
    expect((await get(`${fake.url}/__fake/config`)).json<ConfigBody>().config.anonymousLimit).toBe(2);
    // reset without config keeps the configuration
    await post(`${fake.url}/__fake/reset`, {});
    expect((await get(`${fake.url}/__fake/config`)).json<ConfigBody>().config.anonymousLimit).toBe(2);
    await post(`${fake.url}/__fake/reset`, { config: true });
    expect((await get(`${fake.url}/__fake/config`)).json<ConfigBody>().config).toEqual({
      anonymousLimit: 1000,
      tokenLimit: 1000,
      windowSeconds: 3600,
      // The rate-limit resources' budgets (GitHub's sizes unless configured).
      searchLimit: 30,
      codeSearchLimit: 10,
      graphqlLimit: 5000,
      searchWindowSeconds: 60,
      latencyMs: 0,
      enforceConcurrency: 0,
      // Secondary-limit points: GitHub's sizes, enforced only on request.
      enforcePoints: false,
      pointsPerMinute: 900,
      graphqlPointsPerMinute: 2000,
      // GitHub App installation tokens live an hour.
      installationTokenSeconds: 3600,
      rateLimits: true,
      // Answers do not forbid transformations (GitHub does not send no-transform).
      noTransform: false,
    });
  });

  it('bad control input answers 400/404/405/413 JSON and the server keeps serving', async () => {
    const cases: Array<[string, unknown, boolean, number]> = [
      ['/__fake/config', '{"anonymousLimit":', true, 400],
      ['/__fake/config', { anonymousLimit: -1 }, false, 400],
      ['/__fake/config', { latencyMs: 'slow' }, false, 400],
      ['/__fake/config', { windowSeconds: 0 }, false, 400],
      ['/__fake/config', { nope: 1 }, false, 400],
      ['/__fake/config', { noTransform: 1 }, false, 400],
      ['/__fake/reset', '{oops', true, 400],
      ['/__fake/reset', { config: 'yes' }, false, 400],
      ['/__fake/secondary', 'x', true, 400],
      ['/__fake/unknown', {}, false, 404],
      ['/__fake/config', 'x'.repeat(70 * 1024), true, 413],
    ];
    for (const [path, body, raw, status] of cases) {
      const response = await post(`${fake.url}${path}`, body, raw);
      expect(response.status, `${path} ${String(body).slice(0, 30)}`).toBe(status);
      expect(typeof response.json<ErrorBody>().message).toBe('string');
    }
    const wrongMethod = await get(`${fake.url}/__fake/stats`, {}, 'DELETE');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, HEAD');
    expect((await get(`${fake.url}/users/octocat`)).status).toBe(200);
    expect(fake.stats().total).toBe(1);
  });
});

describe('fake upstream: robustness', () => {
  it('an exception in a handler answers 500 JSON and the server keeps running', async () => {
    const state = new FakeState(
      { anonymousLimit: 100, tokenLimit: 100, windowSeconds: 60, latencyMs: 0, enforceConcurrency: 0 },
      DEMO_TOKENS,
      3,
    );
    let broken = true;
    const world = state.world;
    Object.defineProperty(state, 'world', {
      get: () => {
        if (broken) throw new Error('boom');
        return world;
      },
    });
    const pipeline = createPipeline(
      () => state,
      () => '',
    );
    const server: Server = createServer(pipeline.handle);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const user = await get(`${url}/users/octocat`);
      expect(user.status).toBe(500);
      expect(user.json<ErrorBody>().message).toBe('Server Error');
      const cyclists = await get(`${url}/bicyclists/helsinki`);
      expect(cyclists.status).toBe(500);
      broken = false;
      expect((await get(`${url}/users/octocat`)).status).toBe(200);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('parses every documented option and rejects nonsense', async () => {
    await expect(startFakeUpstream({ anonymousLimit: -1 })).rejects.toThrow(RangeError);
    await expect(startFakeUpstream({ windowSeconds: 0 })).rejects.toThrow(RangeError);
    const small = await startFakeUpstream({ orgRepoCount: 3, tokens: [{ token: 'custom_tok', login: 'zed', scopes: [] }] });
    try {
      expect((await get(`${small.url}/orgs/etagere-org/repos`)).json()).toHaveLength(3);
      const me = await get(`${small.url}/user`, auth('custom_tok'));
      expect(me.json<AccountBody>().login).toBe('zed');
      expect(me.headers.get('x-oauth-scopes')).toBe('');
      expect((await get(`${small.url}/user`, auth(ALICE_REPO))).status).toBe(401);
    } finally {
      await small.close();
    }
  });
});
