/**
 * The organization endpoints, GitHub-shaped (REST "Get an organization" and "List organization
 * members"):
 *   GET /orgs/:org          the organization's public record
 *   GET /orgs/:org/members  its members, paginated (per_page, page, Link)
 * A login that is not an organization is a 404, as on GitHub. Every member is a public member in
 * the fake, so the members list is the same for every viewer (docs/fake-upstream.md).
 */
import type { Account, World } from './data.js';
import { iso } from './data.js';
import { bodyHash, type Rendered } from './etag.js';
import { linkHeader, pageRequest, paginate } from './pagination.js';
import { accountSummary, type ApiVersion } from './render.js';
import type { FakeState } from './state.js';

export interface OrgContext {
  state: FakeState;
  world: World;
  base: string;
  version: ApiVersion;
  path: string;
  query: string;
}

function rendered(json: string, lastModified: number, link: string | null = null): Rendered {
  const body = Buffer.from(json);
  return { body, hash: bodyHash(body), lastModified, link };
}

function orgOf(world: World, login: string): Account | undefined {
  const account = world.account(login);
  return account?.type === 'Organization' ? account : undefined;
}

/** GitHub's organization-simple: what webhook payloads carry, and the head of GET /orgs/:org. */
export function orgSimple(org: Account, base: string): Record<string, unknown> {
  const url = `${base}/orgs/${org.login}`;
  const summary = accountSummary(org, base);
  return {
    login: org.login,
    id: org.id,
    node_id: summary.node_id,
    url,
    repos_url: `${url}/repos`,
    events_url: `${url}/events`,
    hooks_url: `${url}/hooks`,
    issues_url: `${url}/issues`,
    members_url: `${url}/members{/member}`,
    public_members_url: `${url}/public_members{/member}`,
    avatar_url: summary.avatar_url,
    description: org.bio,
  };
}

/** GET /orgs/:org: organization-simple plus the public profile fields. */
export function orgJson(world: World, org: Account, base: string): Record<string, unknown> {
  const summary = accountSummary(org, base);
  return {
    ...orgSimple(org, base),
    name: org.name,
    company: org.company,
    blog: org.blog,
    location: org.location,
    email: org.email,
    twitter_username: org.twitter,
    is_verified: false,
    has_organization_projects: true,
    has_repository_projects: true,
    public_repos: world.ownedRepos(org.login).filter((repo) => !repo.private).length,
    public_gists: org.publicGists,
    followers: org.followers,
    following: org.following,
    html_url: summary.html_url,
    created_at: iso(org.createdAt),
    updated_at: iso(org.updatedAt),
    archived_at: null,
    type: 'Organization',
  };
}

/** The rendered record, or undefined (a 404) when `login` is no organization. */
export function orgRecord(ctx: OrgContext, login: string): Rendered | undefined {
  const org = orgOf(ctx.world, login);
  if (org === undefined) return undefined;
  const key = `org|${ctx.version}|${ctx.base}`;
  let found = org.cache.get(key) as Rendered | undefined;
  if (found === undefined) {
    found = rendered(JSON.stringify(orgJson(ctx.world, org, ctx.base)), org.updatedAt);
    org.cache.set(key, found);
  }
  return found;
}

/** GET /orgs/:org/members: simple users sorted by login, paginated like every list. */
export function orgMembers(ctx: OrgContext, login: string): Rendered | undefined {
  const org = orgOf(ctx.world, login);
  if (org === undefined) return undefined;
  const key = `members|${org.login}|${ctx.version}|${ctx.base}|${ctx.query}`;
  let found = ctx.state.cachedList(key);
  if (found === undefined) {
    const members = [...org.members]
      .map((member) => ctx.world.account(member))
      .filter((account): account is Account => account !== undefined)
      .sort((left, right) => left.login.localeCompare(right.login));
    const req = pageRequest(new URLSearchParams(ctx.query));
    const page = paginate(members, req);
    const link = linkHeader(ctx.base, ctx.path, ctx.query, req.page, page.last);
    const json = JSON.stringify(page.items.map((account) => accountSummary(account, ctx.base)));
    found = rendered(json, Math.max(org.updatedAt, ...page.items.map((account) => account.updatedAt)), link);
    ctx.state.storeList(key, found);
  }
  return found;
}
