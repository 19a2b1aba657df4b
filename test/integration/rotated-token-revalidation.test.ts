/**
 * The quota cost of rotation: GitHub's ETag depends on the credential, so once a
 * pool token has a new value (a re-minted App installation token, a rotated token), revalidating a
 * cached entry with the old value's ETag is a full 200 that spends quota. Under
 * `cache.rotated_token_revalidation: last_modified` the first revalidation with the new value sends
 * If-Modified-Since instead: a free 304 that brings the new value's ETag. Against the fake, whose
 * ETag follows GitHub's rule, with the token replaced in pool.tokens_file (same name, new value)
 * and the old value revoked, as an expired installation token is.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, post } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { startScriptedUpstream } from '../helpers/upstream.js';

/** One member's value before and after the rotation: the same account and scopes, so the same bodies. */
const OLD = testSecret('rotated-token-revalidation old value', 'rotated_reval_token_old_7c1e');
const NEW = testSecret('rotated-token-revalidation new value', 'rotated_reval_token_new_8d2f');
const REPOS = ['/repos/octocat/hello-world', '/repos/octocat/spoon-knife', '/users/octocat', '/orgs/etagere-org'];

const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Rig {
  fake: FakeUpstream;
  proxy: TestProxy;
  /** Gives the member its new value (what an App refresh does) and expires the old one in the fake. */
  rotate(): Promise<void>;
}

async function rig(mode: 'etag' | 'last_modified' | undefined): Promise<Rig> {
  const fake = await startFakeUpstream({ tokens: parseTokenSpec(`${OLD}@alice:public_repo,${NEW}@alice:public_repo`) });
  const dir = mkdtempSync(join(tmpdir(), 'etagere-rotated-reval-'));
  dirs.push(dir);
  const file = join(dir, 'tokens');
  writeFileSync(file, `ci-app-1001=${OLD}\n`);
  const cache = { policy: 'revalidate', ...(mode === undefined ? {} : { rotated_token_revalidation: mode }) };
  const proxy = await startTestProxy(
    resolveSecrets(
      { upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache }], pool: { tokens_file: file } },
      {},
    ),
  );
  closers.push(async () => {
    await proxy.close();
    await fake.close();
  });
  return {
    fake,
    proxy,
    rotate: async () => {
      writeFileSync(file, `ci-app-1001=${NEW}\n`);
      const outcome = await proxy.reloadTokens('signal');
      expect(outcome).toMatchObject({ result: 'ok', change: { updated: ['ci-app-1001'] } });
      await post(`${fake.url}/__fake/tokens`, { token: OLD, revoked: true });
    },
  };
}

/** GETs every path through the proxy; all must be 200. Returns the bodies. */
async function sweep(proxy: TestProxy, paths: readonly string[] = REPOS): Promise<string[]> {
  const bodies: string[] = [];
  for (const path of paths) {
    const answer = await get(`${proxy.url}${path}`);
    expect(answer.status, path).toBe(200);
    bodies.push(answer.body);
  }
  return bodies;
}

/** What the fake saw and billed while `run` ran. */
async function counted(fake: FakeUpstream, run: () => Promise<unknown>): Promise<{ requests: number; notModified: number; spent: number }> {
  const before = fake.stats();
  await run();
  const after = fake.stats();
  return {
    requests: after.total - before.total,
    notModified: after.notModified - before.notModified,
    spent: after.quotaSpent - before.quotaSpent,
  };
}

const stars = (body: string): number => (JSON.parse(body) as { stargazers_count: number }).stargazers_count;

describe('revalidating after a pool token gets a new value', () => {
  it('by default (etag), each entry’s first revalidation with the new value is a full 200 that spends quota', async () => {
    const { fake, proxy, rotate } = await rig(undefined);
    await sweep(proxy);
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 4, spent: 0 });
    await rotate();
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 0, spent: 4 });
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 4, spent: 0 });
  });

  it('with last_modified, the first revalidation is a free 304 that brings the new value’s ETag', async () => {
    const { fake, proxy, rotate } = await rig('last_modified');
    const first = await sweep(proxy);
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 4, spent: 0 });
    await rotate();
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 4, spent: 0 });
    // The bodies are those of the cache, unchanged upstream; then the entries carry the new value's ETag.
    expect(await sweep(proxy)).toEqual(first);
    expect(await counted(fake, () => sweep(proxy))).toEqual({ requests: 4, notModified: 4, spent: 0 });
    // A change after the rotation is seen at once.
    await post(`${fake.url}/__fake/mutate`, { path: '/repos/octocat/hello-world' });
    const [changed] = await sweep(proxy, ['/repos/octocat/hello-world']);
    expect(stars(changed!)).toBe(stars(first[0]!) + 1);
  });

  it('hostile: a change that leaves Last-Modified in the same second is never missed; a second older, If-Modified-Since is sent', async () => {
    // A GitHub-like upstream whose ETag depends on the Authorization, and whose Last-Modified keeps
    // its second across a change (the fake moves it on every change, GitHub need not).
    const LAST_MODIFIED = 'Mon, 01 Jan 2024 00:00:00 GMT';
    let version = 1;
    let date = LAST_MODIFIED;
    const upstream = await startScriptedUpstream((req, res) => {
      const etag = `W/"${version}-${createHash('sha256').update(String(req.headers.authorization)).digest('hex').slice(0, 12)}"`;
      const headers = { 'content-type': 'application/json; charset=utf-8', etag, 'last-modified': LAST_MODIFIED, date };
      const since = req.headers['if-modified-since'];
      const unchanged =
        req.headers['if-none-match'] === etag ||
        (req.headers['if-none-match'] === undefined && since !== undefined && Date.parse(since) >= Date.parse(LAST_MODIFIED));
      res.writeHead(unchanged ? 304 : 200, headers);
      res.end(unchanged ? undefined : JSON.stringify({ version }));
    });
    const dir = mkdtempSync(join(tmpdir(), 'etagere-rotated-reval-'));
    dirs.push(dir);
    const file = join(dir, 'tokens');
    writeFileSync(file, `ci-app-1001=${OLD}\n`);
    const cache = { policy: 'revalidate', rotated_token_revalidation: 'last_modified' };
    const proxy = await startTestProxy(
      resolveSecrets(
        {
          upstreams: [{ name: 'gh', prefix: '/', url: upstream.url, token_pool: true, cache }],
          pool: { tokens_file: file, probe_at_start: false },
        },
        {},
      ),
    );
    closers.push(async () => {
      await proxy.close();
      await upstream.close();
    });
    const rotateTo = async (value: string): Promise<void> => {
      writeFileSync(file, `ci-app-1001=${value}\n`);
      expect((await proxy.reloadTokens('signal')).result).toBe('ok');
    };
    const version$ = async (path: string): Promise<number> =>
      (JSON.parse((await get(`${proxy.url}${path}`)).body) as { version: number }).version;
    const lastSent = (): Record<string, unknown> => upstream.seen.filter((seen) => seen.url !== '/rate_limit').at(-1)!.headers;

    // Dated in the second of its Last-Modified: after the rotation a change leaves Last-Modified as it was.
    expect(await version$('/same-second')).toBe(1);
    await rotateTo(NEW);
    version = 2;
    expect(await version$('/same-second')).toBe(2);
    expect(lastSent()).toMatchObject({ 'if-none-match': expect.stringMatching(/^W\/"1-/) });
    expect(lastSent()['if-modified-since']).toBeUndefined();

    // Dated a day after its Last-Modified: If-Modified-Since stands for it, and the 304 brings the new ETag.
    date = 'Tue, 02 Jan 2024 00:00:00 GMT';
    expect(await version$('/a-day-later')).toBe(2);
    await rotateTo(OLD);
    expect(await version$('/a-day-later')).toBe(2);
    expect(lastSent()).toEqual(expect.objectContaining({ 'if-modified-since': LAST_MODIFIED }));
    expect(lastSent()['if-none-match']).toBeUndefined();
    expect(await version$('/a-day-later')).toBe(2);
    expect(lastSent()['if-none-match']).toBe(`W/"2-${createHash('sha256').update(`token ${OLD}`).digest('hex').slice(0, 12)}"`);
  });

  it('hostile: a switch to another member is revalidated with the ETag (its view may differ), never with If-Modified-Since', async () => {
    const fake = await startFakeUpstream({ tokens: parseTokenSpec(`${OLD}@alice:public_repo,${NEW}@bob:public_repo`) });
    const proxy = await startTestProxy({
      upstreams: [
        {
          name: 'github',
          prefix: '/',
          url: fake.url,
          token_pool: true,
          cache: { policy: 'revalidate', rotated_token_revalidation: 'last_modified' },
        },
      ],
      pool: {
        tokens: [
          { name: 'one', value: OLD },
          { name: 'two', value: NEW },
        ],
      },
    });
    closers.push(async () => {
      await proxy.close();
      await fake.close();
    });
    const path = '/repos/octocat/hello-world';
    const first = await get(`${proxy.url}${path}`);
    const fetchedBy = String(first.headers['x-etagere-token']);
    // The token that stored the entry is revoked: the revalidation goes to the other member.
    await post(`${fake.url}/__fake/tokens`, { token: fetchedBy === 'one' ? OLD : NEW, revoked: true });
    const seen = await counted(fake, () => sweep(proxy, [path]));
    // A full 200 on the other member (after the revoked one's 401): only the ETag may confirm the body.
    expect(seen.notModified).toBe(0);
    expect(seen.spent).toBeGreaterThanOrEqual(1);
  });
});
