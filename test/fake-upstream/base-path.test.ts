/**
 * The fake under a base path, as GitHub Enterprise Server serves its API (`/api/v3`): every API
 * path below it, addresses in bodies and Link headers carrying it, nothing outside it, control
 * endpoints and the cyclist service still at the root.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BasePathError, normaliseBasePath } from '../../fake-github/index.js';
import { graphqlPathFor, requestApiPath } from '../../fake-github/base-path.js';
import { appJwtFor, bearer, testAppKeys } from '../helpers/apps.js';
import { runCli } from '../helpers/cli.js';
import { ALICE_REPO, auth, get, post, until, urlFields, useFake, type ErrorBody, type JsonObject, type RepoBody } from './helpers.js';

const keys = testAppKeys('fake-upstream/base-path App');
/** Addresses of the web site and of git, not of the API (docs/fake-upstream.md, "Deviations"). */
const WEB_FIELDS = ['html_url', 'avatar_url', 'clone_url', 'svn_url', 'git_url', 'ssh_url'];

describe('fake upstream under --base-path /api/v3', () => {
  const fake = useFake({
    basePath: '/api/v3/',
    apps: [{ id: 31337, publicKey: keys.publicKey, installations: [{ id: 42, account: 'etagere-org' }] }],
  });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('serves the API below the base path, with the base path in every address', async () => {
    expect(fake.apiUrl).toBe(`${fake.url}/api/v3`);
    const repo = await get(`${fake.apiUrl}/repos/octocat/hello-world`, auth(ALICE_REPO));
    expect(repo.status).toBe(200);
    const body = repo.json<RepoBody>();
    expect(body.url).toBe(`${fake.apiUrl}/repos/octocat/hello-world`);
    for (const [path, value] of urlFields(body)) {
      if (value === null || WEB_FIELDS.some((field) => path.endsWith(field))) continue; // web and git addresses, not the API's
      expect(String(value), path).toMatch(new RegExp(`^${fake.apiUrl.replace(/[.]/g, '\\.')}/`));
    }
    // The conditional machinery is the same.
    const again = await get(`${fake.apiUrl}/repos/octocat/hello-world`, {
      ...auth(ALICE_REPO),
      'if-none-match': repo.headers.get('etag')!,
    });
    expect(again.status).toBe(304);
  });

  it('paginates with Link headers on the base path, and redirects a renamed repository there', async () => {
    const page = await get(`${fake.apiUrl}/orgs/etagere-org/repos?per_page=10&page=2`);
    expect(page.headers.get('link')).toContain(`<${fake.apiUrl}/orgs/etagere-org/repos?per_page=10&page=3>; rel="next"`);
    expect(page.headers.get('link')).toContain(`<${fake.apiUrl}/orgs/etagere-org/repos?per_page=10&page=1>; rel="first"`);
    // The control endpoint takes the path with or without the base path.
    const renamed = await post(`${fake.url}/__fake/rename`, { path: '/api/v3/repos/octocat/spoon-knife', name: 'spoon-fork' });
    expect(renamed.status).toBe(200);
    const moved = await fetch(`${fake.apiUrl}/repos/octocat/spoon-knife`, { redirect: 'manual' });
    expect(moved.status).toBe(301);
    expect(moved.headers.get('location')).toMatch(new RegExp(`^${fake.apiUrl.replace(/[.]/g, '\\.')}/repositories/\\d+$`));
    const mutated = await post(`${fake.url}/__fake/mutate`, { path: `${fake.apiUrl}/users/bob` });
    expect(mutated.json<{ path: string }>().path).toBe('/users/bob');
  });

  it('answers GET /api/v3/rate_limit, and 404 outside the base path', async () => {
    const limits = await get(`${fake.apiUrl}/rate_limit`, auth(ALICE_REPO));
    expect(limits.status).toBe(200);
    expect(limits.json<{ resources: { core: JsonObject } }>().resources.core).toMatchObject({ limit: 5000 });
    for (const path of ['/rate_limit', '/repos/octocat/hello-world', '/api/v3x/rate_limit', '/api']) {
      const outside = await get(`${fake.url}${path}`, auth(ALICE_REPO));
      expect(outside.status, path).toBe(404);
      expect(outside.json<ErrorBody>().message).toBe('Not Found');
      expect(outside.headers.get('x-ratelimit-limit')).toBeNull();
    }
    // Below the base path everything is the API's: no control endpoint there.
    expect((await get(`${fake.apiUrl}/__fake/stats`)).status).toBe(404);
    // Control endpoints and the cyclist service stay at the root.
    const stats = (await get(`${fake.url}/__fake/stats`)).json<{ byPath: Record<string, number> }>();
    expect(stats.byPath).toMatchObject({ '/rate_limit': 1, '(outside the base path)': 4, '/__fake/stats': 1 });
    expect((await get(`${fake.url}/bicyclists/helsinki`)).text).toBe('31415');
  });

  it('serves GraphQL where GHES does, at /api/graphql beside the base path, and not at /api/v3/graphql', async () => {
    const graphqlAt = (url: string, token?: string): Promise<Response> =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token === undefined ? {} : auth(token)) },
        body: JSON.stringify({ query: '{ viewer { login } repository(owner: "octocat", name: "hello-world") { url } }' }),
      });
    const answer = await graphqlAt(`${fake.url}/api/graphql`, ALICE_REPO);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-resource')).toBe('graphql');
    const body = (await answer.json()) as { data: { viewer: { login: string }; repository: { url: string } } };
    expect(body.data.viewer.login).toBe('alice');
    // GraphQL's `url` is the web address, as REST's html_url: on the server's root, not below the base path.
    expect(body.data.repository.url).toBe(`${fake.url}/octocat/hello-world`);
    const limits = await get(`${fake.apiUrl}/rate_limit`, auth(ALICE_REPO));
    expect(limits.json<{ resources: { graphql: JsonObject; core: JsonObject } }>().resources).toMatchObject({
      graphql: { used: 1 },
      core: { used: 0 },
    });
    // Without credentials: GraphQL's own 401, as on GitHub.
    const anonymous = await graphqlAt(`${fake.url}/api/graphql`);
    expect(anonymous.status).toBe(401);
    // Below the REST base there is no GraphQL: a 404 that spends nothing.
    for (const token of [ALICE_REPO, undefined]) {
      const misplaced = await graphqlAt(`${fake.apiUrl}/graphql`, token);
      expect(misplaced.status).toBe(404);
      expect(((await misplaced.json()) as ErrorBody).message).toBe('Not Found');
    }
    expect(
      (await get(`${fake.apiUrl}/rate_limit`, auth(ALICE_REPO))).json<{ resources: { graphql: JsonObject } }>().resources.graphql,
    ).toMatchObject({
      used: 1,
    });
    const stats = (await get(`${fake.url}/__fake/stats`)).json<{ byPath: Record<string, number> }>();
    expect(stats.byPath).toMatchObject({ '/graphql': 2, '(outside the base path)': 2 });
  });

  it('serves the App endpoints there too, their addresses on the base path', async () => {
    const jwt = bearer(appJwtFor(31337, keys.privateKey));
    const installations = await get(`${fake.apiUrl}/app/installations`, jwt);
    const [installation] = installations.json<Array<{ access_tokens_url: string; repositories_url: string }>>();
    expect(installation!.access_tokens_url).toBe(`${fake.apiUrl}/app/installations/42/access_tokens`);
    expect(installation!.repositories_url).toBe(`${fake.apiUrl}/installation/repositories`);
    const minted = await fetch(installation!.access_tokens_url, { method: 'POST', headers: jwt });
    expect(minted.status).toBe(201);
    const { token } = (await minted.json()) as { token: string };
    expect((await get(`${fake.apiUrl}/repos/etagere-org/roadmap`, auth(token))).status).toBe(200);
    expect((await get(`${fake.url}/app/installations`, jwt)).status).toBe(404);
  });
});

describe('base paths', () => {
  it.each([
    ['/api/v3', '/api/v3'],
    ['/api/v3/', '/api/v3'],
    ['api/v3', '/api/v3'],
    ['/', ''],
    ['', ''],
  ])('normalises %j to %j', (given, expected) => {
    expect(normaliseBasePath(given)).toBe(expected);
  });

  it.each(['/api/../v3', '/a b', '/__fake', '/bicyclists/x', '/api?v=3', '/api//v3'])('refuses %j', (given) => {
    expect(() => normaliseBasePath(given)).toThrow(BasePathError);
  });

  it('knows where GHES serves GraphQL: beside the REST base', () => {
    expect(graphqlPathFor('/api/v3')).toBe('/api/graphql');
    expect(graphqlPathFor('')).toBe('/graphql');
    expect(requestApiPath('/api/graphql', '/api/v3')).toBe('/graphql');
    expect(requestApiPath('/api/v3/graphql', '/api/v3')).toBeNull();
    expect(requestApiPath('/api/v3/graphql/x', '/api/v3')).toBe('/graphql/x');
    expect(requestApiPath('/api/graphqlx', '/api/v3')).toBeNull();
    expect(requestApiPath('/graphql', '')).toBe('/graphql');
  });
});

describe('etagere fake-upstream --base-path --app', () => {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-fake-app-'));
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves an App of the flag under the base path', async () => {
    const keyFile = join(dir, 'app.pem');
    writeFileSync(keyFile, keys.publicKey);
    const cli = runCli(['fake-upstream', '--port', '0', '--base-path', '/api/v3', '--app', `77/cli-app:${keyFile}:99@alice=12500`]);
    stop = async () => {
      cli.child.kill('SIGTERM');
      await cli.exited;
    };
    await until(async () => (/listening on (http:\/\/\S+)/.test(cli.stdout()) ? true : undefined), 15_000, 25);
    const url = /listening on (http:\/\/\S+)/.exec(cli.stdout())![1]!;
    expect(cli.stdout()).toContain(`API under ${url}/api/v3`);
    const jwt = bearer(appJwtFor(77, keys.privateKey));
    const minted = await fetch(`${url}/api/v3/app/installations/99/access_tokens`, { method: 'POST', headers: jwt });
    expect(minted.status).toBe(201);
    const { token } = (await minted.json()) as { token: string };
    const limits = await get(`${url}/api/v3/rate_limit`, auth(token));
    expect(limits.json<{ resources: { core: JsonObject } }>().resources.core).toMatchObject({ limit: 12500 });
  });

  it.each([
    ['a bad base path', ['--base-path', '/a b'], /--base-path: /],
    ['an unreadable key file', ['--app', '1:/nonexistent/app.pem:2'], /--app: cannot read the key file/],
    ['an unknown account', ['--app', `1:KEY:2@nobody-here`], /--app: installation 2: account/],
  ])('refuses %s with exit code 2', async (_name, flags, message) => {
    const keyFile = join(dir, 'other.pem');
    writeFileSync(keyFile, keys.publicKey);
    const cli = runCli(['fake-upstream', '--port', '0', ...flags.map((flag) => flag.replace('KEY', keyFile))]);
    const { code } = await cli.exited;
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(message);
    expect(cli.stderr()).not.toContain('BEGIN');
  });
});
