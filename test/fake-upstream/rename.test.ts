/**
 * A renamed repository, as GitHub answers it (recorded in @octokit/fixtures, scenario
 * `rename-repository`): the old name is a 301 to `<api>/repositories/:id` with a JSON body naming
 * that URL, and keeps redirecting; `GET /repositories/:id` serves the repository.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ALICE_REPO, auth, post, rawGet, useFake, type ErrorBody, type Got, type RepoBody } from './helpers.js';

/** A GET that does not follow redirects (fetch's default would). */
async function get(url: string, headers: Record<string, string> = {}): Promise<Got> {
  const res = await fetch(url, { headers, redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <Body>() => JSON.parse(text) as Body };
}

const HELLO_ID = 1296269;

interface RenameBody {
  from: string;
  to: string;
  id: number;
  location: string;
}

describe('fake upstream: renamed repositories', () => {
  const fake = useFake({ anonymousLimit: 1000, tokenLimit: 1000 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('POST /__fake/rename renames; the old name answers 301 with GitHub’s Location and body, and keeps redirecting', async () => {
    const renamed = await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/hello-world', name: 'hello-universe' });
    expect(renamed.status).toBe(200);
    expect(renamed.json<RenameBody>()).toEqual({
      from: '/repos/octocat/hello-world',
      to: '/repos/octocat/hello-universe',
      id: HELLO_ID,
      location: `/repositories/${HELLO_ID}`,
    });
    for (let round = 0; round < 2; round++) {
      const moved = await get(`${fake.url}/repos/octocat/hello-world`);
      expect(moved.status).toBe(301);
      expect(moved.headers.get('location')).toBe(`${fake.url}/repositories/${HELLO_ID}`);
      expect(moved.json()).toEqual({
        message: 'Moved Permanently',
        url: `${fake.url}/repositories/${HELLO_ID}`,
        documentation_url: 'https://docs.github.com/v3/#http-redirects',
      });
      expect(moved.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(moved.headers.get('etag')).toBeNull();
      expect(moved.headers.get('x-ratelimit-resource')).toBe('core');
    }
    const byId = await fetch(`${fake.url}/repos/OctoCat/Hello-World`); // followed, as clients do
    expect(byId.status).toBe(200);
    expect(byId.url).toBe(`${fake.url}/repositories/${HELLO_ID}`);
    const repo = (await byId.json()) as RepoBody;
    expect(repo.full_name).toBe('octocat/hello-universe');
    expect(repo.url).toBe(`${fake.url}/repos/octocat/hello-universe`);
    expect((await get(`${fake.url}/repos/octocat/hello-universe`)).json<RepoBody>().full_name).toBe('octocat/hello-universe');
    expect(fake.stats().byStatus['301']).toBe(3);
  });

  it('the Location follows the Host the request came in on, and a second rename keeps both old names', async () => {
    await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/spoon-knife', name: 'fork-spoon' });
    await post(`${fake.url}/__fake/rename`, { path: `${fake.url}/repos/octocat/fork-spoon`, name: 'spork' });
    const viaName = await rawGet(`${fake.url}/repos/octocat/spoon-knife`, { host: 'api.example.test:8443' });
    expect(viaName.status).toBe(301);
    const location = String(viaName.headers.location);
    expect(location).toMatch(/^http:\/\/api\.example\.test:8443\/repositories\/\d+$/);
    expect((await get(`${fake.url}/repos/octocat/fork-spoon`)).status).toBe(301);
    const target = await get(`${fake.url}${new URL(location).pathname}`);
    expect(target.json<RepoBody>().full_name).toBe('octocat/spork');
  });

  it('a private repository’s old name is a 404 to whoever may not see it, a 301 to its owner', async () => {
    await post(`${fake.url}/__fake/rename`, { path: '/repos/alice/secret-project', name: 'open-secret' });
    expect((await get(`${fake.url}/repos/alice/secret-project`)).status).toBe(404);
    const owner = await get(`${fake.url}/repos/alice/secret-project`, auth(ALICE_REPO));
    expect(owner.status).toBe(301);
    const id = /\/repositories\/(\d+)$/.exec(owner.headers.get('location') ?? '')?.[1];
    expect((await get(`${fake.url}/repositories/${id}`)).status).toBe(404);
    expect((await get(`${fake.url}/repositories/${id}`, auth(ALICE_REPO))).status).toBe(200);
  });

  it('a new repository name wins over an old one; reset forgets every rename', async () => {
    await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/linguist', name: 'lingo' });
    await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/lingo', name: 'linguist' });
    expect((await get(`${fake.url}/repos/octocat/linguist`)).status).toBe(200);
    expect((await get(`${fake.url}/repos/octocat/lingo`)).status).toBe(301);
    await post(`${fake.url}/__fake/reset`, {});
    expect((await get(`${fake.url}/repos/octocat/lingo`)).status).toBe(404);
  });

  it('hostile input: bad names, unknown repositories, taken names and odd ids get JSON errors, never a crash', async () => {
    const cases: Array<[unknown, number]> = [
      [{ path: '/repos/octocat/hello-world', name: '../etc' }, 400],
      [{ path: '/repos/octocat/hello-world', name: '..' }, 400],
      [{ path: '/repos/octocat/hello-world', name: '' }, 400],
      [{ path: '/repos/octocat/hello-world', name: 'x'.repeat(101) }, 400],
      [{ path: '/repos/octocat/hello-world', name: 7 }, 400],
      [{ path: '/repos/octocat/hello-world', name: 'ok', extra: 1 }, 400],
      [{ path: '/repos/octocat/nope', name: 'ok' }, 404],
      [{ path: '/users/octocat', name: 'ok' }, 404],
      [{ path: 'http://[', name: 'ok' }, 400],
      [{ path: '/repos/octocat/hello-world', name: 'Spoon-Knife' }, 422],
    ];
    for (const [body, status] of cases) {
      const res = await post(`${fake.url}/__fake/rename`, body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(typeof res.json<ErrorBody>().message).toBe('string');
    }
    expect((await get(`${fake.url}/__fake/rename`)).status).toBe(405);
    for (const id of ['0', '-1', 'abc', '99999999999999999999', '1296269x', '']) {
      expect((await get(`${fake.url}/repositories/${id}`)).status, id).toBe(404);
    }
    expect((await get(`${fake.url}/repos/octocat/hello-world`)).status).toBe(200);
  });
});
