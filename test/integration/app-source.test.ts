/**
 * The proxy's App token source (src/pool/members/app-source.ts) against the fake upstream's GitHub Apps:
 * two installations minted, refreshed across a short expiry with no failed request, a revoked
 * installation dropped while the other carries on, a new installation picked up by `all`, a 401
 * re-minted once; the installation calls (src/pool/members/installations.ts) under a base path, over many
 * pages and against a hostile Link; and neither a token, a JWT nor the key in any log line.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AppTokenSource, type AppMember, type AppSourceOptions } from '../../src/pool/members/app-source.js';
import { AppRequestError, listInstallations, mintInstallationToken } from '../../src/pool/members/installations.js';
import { appJwt, appPrivateKey } from '../../src/platform/config/app-jwt.js';
import { startFakeUpstream, type FakeAppInput, type FakeUpstream, type FakeUpstreamOptions } from '../../fake-github/index.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { testAppKeys } from '../helpers/apps.js';
import { capture, inTestFile } from '../helpers/capture.js';
import { get, post } from '../helpers/http.js';

const APP_ID = 4242;
const keys = testAppKeys('integration/app-source');
const wrongKeys = testAppKeys('integration/app-source wrong key');
const app = (installations: FakeAppInput['installations']): FakeAppInput[] => [
  { id: APP_ID, slug: 'ci-app', publicKey: keys.publicKey, installations },
];
const TWO = [
  { id: 1001, account: 'etagere-org' },
  { id: 1002, account: 'alice' },
];

interface Harness {
  fake: FakeUpstream;
  source: AppTokenSource;
  /** Every list handed to onChange, in order. */
  changes: AppMember[][];
  latest(): AppMember[];
  /** The log lines so far. */
  logs(): string;
}

const open: Harness[] = [];
afterEach(async () => {
  for (const harness of open.splice(0)) {
    harness.source.close();
    capture(`App source logs${inTestFile()}`, harness.logs());
    await harness.fake.close();
  }
});

async function harness(
  fakeOptions: FakeUpstreamOptions,
  sourceOptions: Partial<AppSourceOptions> & { installations?: 'all' | number[]; key?: string } = {},
): Promise<Harness> {
  const fake = await startFakeUpstream({ tokenLimit: 100_000, ...fakeOptions });
  const lines: string[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
  const changes: AppMember[][] = [];
  const source = new AppTokenSource({
    app: {
      name: 'ci-app',
      appId: APP_ID,
      privateKey: appPrivateKey(sourceOptions.key ?? keys.privateKey),
      installations: sourceOptions.installations ?? [1001, 1002],
    },
    upstream: { baseUrl: fake.apiUrl },
    onChange: (members) => changes.push(members),
    logger,
    ...sourceOptions,
  });
  const made: Harness = { fake, source, changes, latest: () => changes.at(-1) ?? [], logs: () => lines.join('') };
  open.push(made);
  return made;
}

/** Polls `check` until it holds, failing after the deadline. */
async function until(check: () => boolean | Promise<boolean>, deadlineMs = 8000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met before the deadline');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const tokenOf = (members: AppMember[], name: string): string | undefined => members.find((member) => member.name === name)?.value;
const works = async (fake: FakeUpstream, token: string): Promise<number> =>
  (await get(`${fake.apiUrl}/installation/repositories`, { authorization: `token ${token}` })).status;

describe('AppTokenSource against the fake upstream', () => {
  it('mints a token for each of two installations, named <app>-<installation id>', async () => {
    const { fake, source, changes } = await harness({ apps: app(TWO) });
    const members = await source.start();
    expect(members.map((member) => member.name)).toEqual(['ci-app-1001', 'ci-app-1002']);
    for (const member of members) {
      expect(member.value).toMatch(/^ghs_/);
      expect(member.expiresAt).toBeGreaterThan(Date.now() + 3500_000);
      expect(await works(fake, member.value)).toBe(200);
    }
    expect(changes.at(-1)).toEqual(members);
  });

  it('refreshes each token before its short expiry, with no failed request in between', async () => {
    const { fake, source, changes, latest } = await harness({ apps: app(TWO), installationTokenSeconds: 3 });
    await source.start();
    const seen = new Map<string, Set<string>>([
      ['ci-app-1001', new Set()],
      ['ci-app-1002', new Set()],
    ]);
    let requests = 0;
    let failures = 0;
    // Requests on the current token of each installation, back to back, until each has had three tokens.
    await until(async () => {
      for (const member of latest()) {
        seen.get(member.name)!.add(member.value);
        requests++;
        if ((await works(fake, member.value)) !== 200) failures++;
      }
      return [...seen.values()].every((values) => values.size >= 3);
    }, 15_000);
    expect(failures).toBe(0);
    expect(requests).toBeGreaterThan(20);
    // The set never lacked an installation: every change still had both.
    expect(changes.every((members) => members.length === 2)).toBe(true);
  });

  it('keeps a token it cannot refresh until its expiry, no later, and mints again once the upstream answers', async () => {
    const { fake, source, changes, latest } = await harness({ apps: app(TWO), installationTokenSeconds: 2 }, { retryMs: 100 });
    await source.start();
    const expiresAt = latest().find((member) => member.name === 'ci-app-1001')!.expiresAt;
    await post(`${fake.url}/__fake/faults`, { faults: [{ kind: 'status', status: 503, path: '/app/installations/1001/access_tokens' }] });
    await until(() => tokenOf(latest(), 'ci-app-1001') === undefined);
    const droppedAt = Date.now();
    expect(droppedAt).toBeGreaterThanOrEqual(expiresAt - 5);
    // Every list before held it; none after brought it back while the upstream refused.
    const held = (members: AppMember[]): boolean => tokenOf(members, 'ci-app-1001') !== undefined;
    const firstWithout = changes.findIndex((members) => !held(members));
    expect(changes.slice(0, firstWithout).every(held)).toBe(true);
    expect(changes.slice(firstWithout).some(held)).toBe(false);
    expect(tokenOf(latest(), 'ci-app-1002')).toBeDefined();
    await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' });
    await until(() => tokenOf(latest(), 'ci-app-1001') !== undefined);
    expect(await works(fake, tokenOf(latest(), 'ci-app-1001')!)).toBe(200);
  });

  it('drops a revoked installation while the other carries on (suspended: 401, re-mint refused 403)', async () => {
    const { fake, source, latest } = await harness({ apps: app(TWO) });
    await source.start();
    const alice = tokenOf(latest(), 'ci-app-1002')!;
    await post(`${fake.url}/__fake/installations/1002`, { suspended: true });
    expect(await works(fake, alice)).toBe(401);
    expect(await source.remint('ci-app-1002', alice)).toBe(false);
    expect(latest().map((member) => member.name)).toEqual(['ci-app-1001']);
    expect(await works(fake, tokenOf(latest(), 'ci-app-1001')!)).toBe(200);
  });

  it('with installations: all, drops an uninstalled one and picks up a new one at the next listing', async () => {
    const { fake, source, latest } = await harness({ apps: app(TWO) }, { installations: 'all', relistIntervalMs: 100 });
    await source.start();
    expect(latest().map((member) => member.name)).toEqual(['ci-app-1001', 'ci-app-1002']);
    await post(`${fake.url}/__fake/installations`, { app: APP_ID, id: 1003, account: 'octocat' });
    expect((await fetch(`${fake.url}/__fake/installations/1001`, { method: 'DELETE' })).status).toBe(200);
    await until(
      () =>
        latest()
          .map((member) => member.name)
          .join() === 'ci-app-1002,ci-app-1003',
    );
    expect(await works(fake, tokenOf(latest(), 'ci-app-1003')!)).toBe(200);
  });

  it('re-mints a token that answers 401, once per token value', async () => {
    const { fake, source, latest } = await harness({ apps: app(TWO) }, { retryMs: 60_000 });
    await source.start();
    const mints = (): number => fake.stats().byPath['/app/installations/1001/access_tokens'] ?? 0;
    const before = tokenOf(latest(), 'ci-app-1001')!;
    // Suspending and unsuspending revokes the installation's tokens; the installation itself is fine.
    await post(`${fake.url}/__fake/installations/1001`, { suspended: true });
    await post(`${fake.url}/__fake/installations/1001`, { suspended: false });
    expect(await works(fake, before)).toBe(401);
    const [first, concurrent] = await Promise.all([source.remint('ci-app-1001', before), source.remint('ci-app-1001', before)]);
    expect([first, concurrent]).toEqual([true, true]);
    expect(mints()).toBe(2);
    const after = tokenOf(latest(), 'ci-app-1001')!;
    expect(after).not.toBe(before);
    expect(await works(fake, after)).toBe(200);
    // A late 401 of the old value: already replaced, nothing minted.
    expect(await source.remint('ci-app-1001', before)).toBe(true);
    expect(mints()).toBe(2);
    // A value is re-minted once: when that mint fails, a second 401 of the same value mints nothing.
    await post(`${fake.url}/__fake/faults`, {
      faults: [{ kind: 'status', status: 503, path: '/app/installations/1001/access_tokens', count: 1 }],
    });
    const injected = async (): Promise<number> =>
      (JSON.parse((await get(`${fake.url}/__fake/faults`)).body) as { faults: Array<{ injected: number }> }).faults[0]!.injected;
    expect(await source.remint('ci-app-1001', after)).toBe(false);
    expect(await injected()).toBe(1);
    expect(await source.remint('ci-app-1001', after)).toBe(false);
    expect(await source.remint('ci-app-1001')).toBe(false);
    expect(await injected()).toBe(1);
    expect(mints()).toBe(2);
    expect(tokenOf(latest(), 'ci-app-1001')).toBe(after);
    expect(await source.remint('nobody-1001')).toBe(false);
  });

  it('a wrong key is a clear error naming the App, no member, and neither key nor JWT in the log', async () => {
    const { source, logs } = await harness({ apps: app(TWO) }, { key: wrongKeys.privateKey, retryMs: 60_000 });
    expect(await source.start()).toEqual([]);
    const lines = logs()
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const refused = lines.filter((line) => line.kind === 'app');
    expect(refused.map((line) => line.installation).sort()).toEqual([1001, 1002]);
    expect(refused[0]).toMatchObject({ level: 'error', app: 'ci-app', status: 401 });
    expect(String(refused[0]!.msg)).toMatch(
      /App ci-app \(id 4242\), installation 100[12]: minting a token: 401 A JSON web token could not be decoded: the App JWT was refused/,
    );
  });

  it('an unknown App id is "Integration not found", an App error', async () => {
    const fake = await startFakeUpstream({ apps: app(TWO) });
    try {
      const jwt = appJwt(999, appPrivateKey(keys.privateKey), Date.now());
      const error = await mintInstallationToken({ baseUrl: fake.url }, jwt, 1001, 'App x').catch((err: unknown) => err);
      expect(error).toBeInstanceOf(AppRequestError);
      expect(error).toMatchObject({ kind: 'app', status: 404 });
      expect((error as Error).message).toMatch(/Integration not found: no GitHub App has this app_id/);
      expect((error as Error).message).not.toContain(jwt.slice(0, 40));
    } finally {
      await fake.close();
    }
  });

  it('logs names, ids and expiry times, never a token, a JWT or the key', async () => {
    const { fake, source, latest, logs } = await harness({ apps: app(TWO) }, { installations: 'all' });
    await source.start();
    const tokens = latest().map((member) => member.value);
    await post(`${fake.url}/__fake/installations/1002`, { suspended: true });
    await source.remint('ci-app-1002');
    await source.remint('ci-app-1001');
    const text = logs();
    expect(text).toContain('"installation":1001');
    for (const token of [...tokens, ...latest().map((member) => member.value)]) expect(text).not.toContain(token);
    expect(text).not.toMatch(/eyJ|ghs_|PRIVATE KEY/);
    for (const line of keys.secretLines) expect(text).not.toContain(line);
  });
});

describe('installation calls', () => {
  it('work under a base path and follow every page of a long list', async () => {
    const many = Array.from({ length: 130 }, (_, index) => ({ id: 5000 + index, account: 'carol' }));
    const fake = await startFakeUpstream({ apps: app(many), basePath: '/api/v3' });
    try {
      const jwt = appJwt(APP_ID, appPrivateKey(keys.privateKey), Date.now());
      const listed = await listInstallations({ baseUrl: `${fake.url}/api/v3/` }, jwt, 'App ci-app');
      expect(listed.map((installation) => installation.id)).toEqual(many.map((installation) => installation.id));
      expect(fake.stats().byPath['/app/installations']).toBe(2);
      const token = await mintInstallationToken({ baseUrl: fake.apiUrl }, jwt, 5129, 'App ci-app');
      expect((await get(`${fake.apiUrl}/rate_limit`, { authorization: `token ${token.value}` })).status).toBe(200);
    } finally {
      await fake.close();
    }
  });

  it('never follows a Link to another origin with the JWT', async () => {
    let evilRequests = 0;
    const evil = await listening(createServer((_req, res) => (evilRequests++, res.end('[]'))));
    const upstream = await listening(
      createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', link: `<${evil.url}/app/installations?page=2>; rel="next"` });
        res.end('[{"id": 1, "account": {"login": "x"}, "suspended_at": null}]');
      }),
    );
    try {
      const jwt = appJwt(APP_ID, appPrivateKey(keys.privateKey), Date.now());
      const error = await listInstallations({ baseUrl: upstream.url }, jwt, 'App ci-app').catch((err: unknown) => err);
      expect(error).toMatchObject({ kind: 'upstream' });
      expect((error as Error).message).toMatch(/not on the upstream's base URL; not followed/);
      expect(evilRequests).toBe(0);
      // And an unreachable upstream is a network error.
      await upstream.close();
      expect(await listInstallations({ baseUrl: upstream.url }, jwt, 'App ci-app').catch((err: unknown) => err)).toMatchObject({
        kind: 'network',
      });
    } finally {
      await evil.close();
      await upstream.close();
    }
  });
});

async function listening(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed: Promise<void> | undefined;
  return {
    url,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}
