/**
 * GET /orgs/:org and GET /orgs/:org/members in the fake, in GitHub's shapes (REST "Get
 * an organization", "List organization members"), so PyGithub's get_organization works in the demo.
 */
import { describe, expect, it } from 'vitest';
import { ALICE_REPO, auth, get, ISO, useFake, USER_FIELDS, type JsonObject } from './helpers.js';

describe('fake upstream: organizations', () => {
  const fake = useFake();

  it('GET /orgs/:org answers the organization record, every address on the base it was asked on', async () => {
    const got = await get(`${fake.url}/orgs/etagere-org`);
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toMatch(/^(W\/)?"/);
    const org = got.json<JsonObject>();
    expect(org).toMatchObject({
      login: 'etagere-org',
      type: 'Organization',
      url: `${fake.url}/orgs/etagere-org`,
      repos_url: `${fake.url}/orgs/etagere-org/repos`,
      members_url: `${fake.url}/orgs/etagere-org/members{/member}`,
      public_members_url: `${fake.url}/orgs/etagere-org/public_members{/member}`,
      name: 'Etagere Org',
    });
    for (const field of ['id', 'node_id', 'avatar_url', 'description', 'public_repos', 'followers', 'html_url'])
      expect(org).toHaveProperty(field);
    expect(org.created_at).toMatch(ISO);
    expect(org.public_repos).toBeGreaterThan(0);
    // Conditional requests work as on every record.
    const again = await get(`${fake.url}/orgs/etagere-org`, { 'if-none-match': got.headers.get('etag')! });
    expect(again.status).toBe(304);
  });

  it('GET /orgs/:org/members lists the members as simple users, paginated with Link', async () => {
    const got = await get(`${fake.url}/orgs/etagere-org/members`, auth(ALICE_REPO));
    expect(got.status).toBe(200);
    const members = got.json<JsonObject[]>();
    expect(members.map((member) => member.login)).toEqual(['alice', 'octocat']);
    for (const member of members) for (const field of USER_FIELDS) expect(member).toHaveProperty(field);
    const first = await get(`${fake.url}/orgs/etagere-org/members?per_page=1`);
    expect(first.json<JsonObject[]>().map((member) => member.login)).toEqual(['alice']);
    expect(first.headers.get('link')).toContain(`<${fake.url}/orgs/etagere-org/members?per_page=1&page=2>; rel="next"`);
  });

  it('a user, an unknown login or a malformed path is a 404 in GitHub shape', async () => {
    for (const path of [
      '/orgs/alice',
      '/orgs/alice/members',
      '/orgs/no-such-org',
      '/orgs/no-such-org/members',
      '/orgs/%E0%A4%A',
      '/orgs/etagere-org/members/alice/extra',
      '/orgs/etagere-org/nothing',
      '/orgs/',
    ]) {
      const got = await get(`${fake.url}${path}`);
      expect(got.status, path).toBe(404);
      expect(got.json<JsonObject>().message, path).toBe('Not Found');
    }
  });
});
