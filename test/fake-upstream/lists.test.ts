import { describe, expect, it } from 'vitest';
import {
  ALICE_PUBLIC,
  ALICE_REPO,
  BOB_PUBLIC,
  CAROL_REPO,
  OCTOCAT_REPO,
  auth,
  get,
  useFake,
  type ErrorBody,
  type RepoBody,
} from './helpers.js';

/** Parses a Link header into {rel: url}. */
function links(header: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(', ')) {
    const link = /^<([^>]+)>; rel="(\w+)"$/.exec(part);
    if (link) out[link[2]!] = link[1]!;
  }
  return out;
}

const names = (body: Array<{ full_name: string }>): string[] => body.map((r) => r.full_name);

describe('fake upstream: lists, pagination and private repositories', () => {
  const fake = useFake({ anonymousLimit: 10_000, tokenLimit: 10_000 });

  it('list items carry id, node_id, name, full_name, private and owner (beginning with login)', async () => {
    const body = (await get(`${fake.url}/users/octocat/repos`)).json<RepoBody[]>();
    expect(body.length).toBeGreaterThan(0);
    for (const item of body) {
      for (const field of ['id', 'node_id', 'name', 'full_name', 'private', 'owner']) expect(item).toHaveProperty(field);
      expect(Object.keys(item.owner)[0]).toBe('login');
    }
  });

  it('paginates with per_page 30 by default and a Link header with next and last', async () => {
    const response = await get(`${fake.url}/orgs/etagere-org/repos`);
    expect(response.json()).toHaveLength(30);
    const linked = links(response.headers.get('link'));
    expect(Object.keys(linked).sort()).toEqual(['last', 'next']);
    expect(linked.next).toBe(`${fake.url}/orgs/etagere-org/repos?page=2`);
    expect(linked.last).toBe(`${fake.url}/orgs/etagere-org/repos?page=3`);
  });

  it('middle pages link prev, next, last and first, keeping the other query parameters', async () => {
    const response = await get(`${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=3`);
    expect(response.json()).toHaveLength(10);
    expect(response.headers.get('link')).toBe(
      [
        `<${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=2>; rel="prev"`,
        `<${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=4>; rel="next"`,
        `<${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=8>; rel="last"`,
        `<${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=1>; rel="first"`,
      ].join(', '),
    );
    expect(names(response.json())[0]).toBe('etagere-org/repo-021');
    const last = await get(`${fake.url}/orgs/etagere-org/repos?sort=full_name&per_page=10&page=8`);
    expect(last.json()).toHaveLength(5);
    expect(Object.keys(links(last.headers.get('link'))).sort()).toEqual(['first', 'prev']);
    const beyond = await get(`${fake.url}/orgs/etagere-org/repos?per_page=10&page=99`);
    expect(beyond.json()).toEqual([]);
  });

  it('following Link next visits every repository exactly once', async () => {
    let url: string | undefined = `${fake.url}/orgs/etagere-org/repos?per_page=20`;
    const seen: string[] = [];
    let pages = 0;
    while (url) {
      const response = await get(url);
      seen.push(...names(response.json()));
      url = links(response.headers.get('link')).next;
      pages++;
    }
    expect(pages).toBe(4);
    expect(seen).toHaveLength(75);
    expect(new Set(seen).size).toBe(75);
  });

  it('per_page is capped at 100; a single page has no Link header', async () => {
    const all = await get(`${fake.url}/orgs/etagere-org/repos?per_page=500`);
    expect(all.json()).toHaveLength(75);
    expect(all.headers.get('link')).toBeNull();
    const bad = await get(`${fake.url}/orgs/etagere-org/repos?per_page=abc&page=-2`);
    expect(bad.json()).toHaveLength(30);
  });

  it('sort and direction order the list; different queries have different ETags', async () => {
    const created = await get(`${fake.url}/orgs/etagere-org/repos?per_page=3`);
    expect(names(created.json())).toEqual(['etagere-org/repo-075', 'etagere-org/repo-074', 'etagere-org/repo-073']);
    const asc = await get(`${fake.url}/orgs/etagere-org/repos?per_page=3&sort=full_name`);
    expect(names(asc.json())).toEqual(['etagere-org/repo-001', 'etagere-org/repo-002', 'etagere-org/repo-003']);
    expect(asc.headers.get('etag')).not.toBe(created.headers.get('etag'));
  });

  it('a private repository is readable only with repo scope by its owner or an org member', async () => {
    const cases: Array<[string, Record<string, string>, number]> = [
      ['/repos/alice/secret-project', {}, 404],
      ['/repos/alice/secret-project', auth(ALICE_PUBLIC), 404],
      ['/repos/alice/secret-project', auth(CAROL_REPO), 404],
      ['/repos/alice/secret-project', auth(ALICE_REPO), 200],
      ['/repos/etagere-org/internal-tools', {}, 404],
      ['/repos/etagere-org/internal-tools', auth(CAROL_REPO), 404],
      ['/repos/etagere-org/internal-tools', auth(ALICE_REPO), 200],
      ['/repos/etagere-org/roadmap', auth(OCTOCAT_REPO), 200],
      ['/repos/bob/diary', auth(BOB_PUBLIC), 404],
      ['/repos/octocat/private-notes', auth(OCTOCAT_REPO), 200],
    ];
    for (const [path, headers, status] of cases) {
      const response = await get(`${fake.url}${path}`, headers);
      expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(status);
      if (status === 404) expect(response.json<ErrorBody>().message).toBe('Not Found');
      else expect(response.json<RepoBody>().private).toBe(true);
    }
    const own = (await get(`${fake.url}/repos/alice/secret-project`, auth(ALICE_REPO))).json<RepoBody>();
    expect(own.permissions!.admin).toBe(true);
    expect(own.visibility).toBe('private');
  });

  it('lists hide private repositories from tokens without repo scope', async () => {
    const anon = (await get(`${fake.url}/orgs/etagere-org/repos?per_page=100`)).json<RepoBody[]>();
    const member = await get(`${fake.url}/orgs/etagere-org/repos?per_page=100`, auth(ALICE_REPO));
    const outsider = (await get(`${fake.url}/orgs/etagere-org/repos?per_page=100`, auth(CAROL_REPO))).json();
    expect(anon).toHaveLength(75);
    expect(anon.every((r: { private: boolean }) => !r.private)).toBe(true);
    expect(member.json()).toHaveLength(77);
    expect(names(member.json())).toContain('etagere-org/internal-tools');
    expect(outsider).toHaveLength(75);
    const priv = (await get(`${fake.url}/orgs/etagere-org/repos?type=private`, auth(ALICE_REPO))).json<RepoBody[]>();
    expect(names(priv).sort()).toEqual(['etagere-org/internal-tools', 'etagere-org/roadmap']);

    const aliceAnon = names((await get(`${fake.url}/users/alice/repos`)).json());
    const aliceOwn = names((await get(`${fake.url}/users/alice/repos`, auth(ALICE_REPO))).json());
    expect(aliceAnon).toEqual(['alice/dotfiles', 'alice/website']);
    expect(aliceOwn).toEqual(['alice/dotfiles', 'alice/secret-project', 'alice/website']);
  });

  it('/user/repos lists own and organization repositories; private ones only with repo scope', async () => {
    const withRepo = await get(`${fake.url}/user/repos?per_page=100`, auth(ALICE_REPO));
    const withoutRepo = await get(`${fake.url}/user/repos?per_page=100`, auth(ALICE_PUBLIC));
    expect(withRepo.status).toBe(200);
    const withRepoNames = names(withRepo.json());
    const withoutRepoNames = names(withoutRepo.json());
    expect(withRepoNames).toHaveLength(80);
    expect(withRepoNames).toContain('alice/secret-project');
    expect(withRepoNames).toContain('etagere-org/roadmap');
    expect(withoutRepoNames).toHaveLength(77);
    expect(withoutRepoNames).not.toContain('alice/secret-project');
    expect([...withRepoNames].sort()).toEqual(withRepoNames); // full_name order
    expect(withRepo.headers.get('etag')).not.toBe(withoutRepo.headers.get('etag'));
    const owner = names((await get(`${fake.url}/user/repos?type=owner`, auth(ALICE_REPO))).json());
    expect(owner).toEqual(['alice/dotfiles', 'alice/secret-project', 'alice/website']);
    const bob = names((await get(`${fake.url}/user/repos`, auth(BOB_PUBLIC))).json());
    expect(bob).toEqual(['bob/bikes']);
    const page1 = await get(`${fake.url}/user/repos`, auth(ALICE_REPO));
    expect(links(page1.headers.get('link')).last).toBe(`${fake.url}/user/repos?page=3`);
  });
});
