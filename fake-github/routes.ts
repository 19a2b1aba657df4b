/**
 * The code-hosting API's read endpoints. Each handler turns (path, query, viewer) into a result:
 * status, body and, for cacheable 200s, a body hash and Last-Modified time from which the
 * server derives ETag and conditional answers. Quota, headers and 304s are the server's job.
 */
import { canSee, isAffiliated, permissionClass } from './auth.js';
import type { Account, Repo, World } from './data.js';
import { isBlobSha } from './blobs.js';
import { bodyHash, type Rendered } from './etag.js';
import { JSON_TYPE, NOT_FOUND_BODY, REQUIRES_AUTH_BODY, TEXT_TYPE } from './headers.js';
import { orgMembers, orgRecord } from './orgs.js';
import { customMedia } from './media-type.js';
import { linkHeader, pageRequest, paginate } from './pagination.js';
import { readmeAnswer } from './readme.js';
import { privateAccount, publicAccount, repoJson } from './render.js';
import { movedBody, movedRepo, repoById } from './rename.js';
import type { ApiResult, RouteContext } from './route-context.js';
import { searchRoute } from './search.js';

/** `acceptedScopes`: the route's, which GitHub sends on its 404s too (a repository's: `repo`). */
const notFound = (acceptedScopes = ''): ApiResult => ({
  status: 404,
  body: NOT_FOUND_BODY,
  contentType: JSON_TYPE,
  rendered: null,
  acceptedScopes,
});

const requiresAuth = (): ApiResult => ({
  status: 401,
  body: REQUIRES_AUTH_BODY,
  contentType: JSON_TYPE,
  rendered: null,
  acceptedScopes: '',
});

/** A rendered answer, or a 404 when there is none (fake-github/orgs.ts). */
const orFound = (rendered: Rendered | undefined, acceptedScopes: string): ApiResult =>
  rendered === undefined ? notFound() : ok(rendered, acceptedScopes);

const ok = (rendered: Rendered, acceptedScopes: string): ApiResult => ({
  status: 200,
  body: rendered.body,
  contentType: JSON_TYPE,
  rendered,
  acceptedScopes,
});

function render(json: string, lastModified: number, link: string | null = null): Rendered {
  const body = Buffer.from(json);
  return { body, hash: bodyHash(body), lastModified, link };
}

function segment(text: string | undefined): string | null {
  if (text === undefined || text === '') return null;
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** Routes one GET/HEAD request of the API (everything but /rate_limit, POST /graphql and the App endpoints: app-routes.ts). */
export function route(ctx: RouteContext): ApiResult {
  const parts = ctx.path.split('/');
  const [, first] = parts;
  const segmentCount = parts.length;
  switch (first) {
    case 'zen':
      if (segmentCount !== 2) return notFound();
      return { status: 200, body: Buffer.from(ctx.world.nextZen()), contentType: TEXT_TYPE, rendered: null, acceptedScopes: '' };
    case 'user':
      if (segmentCount === 2) return ownProfile(ctx);
      if (segmentCount === 3 && parts[2] === 'repos') return ownRepos(ctx);
      return notFound();
    case 'users': {
      const login = segment(parts[2]);
      if (login === null) return notFound();
      if (segmentCount === 3) return userRecord(ctx, login);
      if (segmentCount === 4 && parts[3] === 'repos') return userRepos(ctx, login);
      return notFound();
    }
    case 'repos': {
      if (segmentCount === 7 && parts[4] === 'git' && parts[5] === 'blobs')
        return blob(ctx, segment(parts[2]), segment(parts[3]), parts[6]);
      const sub = segmentCount === 5 && parts[4] === 'readme' ? 'readme' : segmentCount === 4 ? '' : null;
      const owner = segment(parts[2]);
      const name = segment(parts[3]);
      if (sub === null || owner === null || name === null) return notFound();
      return sub === 'readme' ? readme(ctx, owner, name) : repoRecord(ctx, owner, name);
    }
    case 'repositories': {
      const id = parts[2] ?? '';
      const sub = segmentCount === 4 && parts[3] === 'readme' ? 'readme' : segmentCount === 3 ? '' : null;
      if (sub === null || !/^[1-9][0-9]{0,15}$/.test(id)) return notFound();
      const repo = repoById(ctx.world, Number(id));
      if (repo === undefined) return notFound();
      return sub === 'readme' ? readme(ctx, repo.owner.login, repo.name) : repoRecord(ctx, repo.owner.login, repo.name);
    }
    case 'search':
      return (segmentCount === 3 ? searchRoute(ctx, parts[2] ?? '') : undefined) ?? notFound();
    case 'orgs': {
      const org = segment(parts[2]);
      if (org === null) return notFound();
      if (segmentCount === 3) return orFound(orgRecord(ctx, org), '');
      if (segmentCount === 4 && parts[3] === 'members') return orFound(orgMembers(ctx, org), '');
      if (segmentCount !== 4 || parts[3] !== 'repos') return notFound();
      return orgRepos(ctx, org);
    }
    default:
      return notFound();
  }
}

function publicRepoCount(world: World, account: Account): number {
  return world.ownedRepos(account.login).filter((r) => !r.private).length;
}

function userRecord(ctx: RouteContext, login: string): ApiResult {
  const account = ctx.world.account(login);
  if (!account) return notFound();
  const key = `public|${ctx.version}|${ctx.base}`;
  let rendered = account.cache.get(key) as Rendered | undefined;
  if (!rendered) {
    const json = JSON.stringify(publicAccount(account, publicRepoCount(ctx.world, account), ctx.base, ctx.version));
    rendered = render(json, account.updatedAt);
    account.cache.set(key, rendered);
  }
  return ok(rendered, '');
}

function ownProfile(ctx: RouteContext): ApiResult {
  if (ctx.viewer === null) return requiresAuth();
  const account = ctx.world.account(ctx.viewer.login);
  if (!account) return notFound();
  const key = `private|${ctx.version}|${ctx.base}`;
  let rendered = account.cache.get(key) as Rendered | undefined;
  if (!rendered) {
    const owned = ctx.world.ownedRepos(account.login);
    const privateRepos = owned.filter((r) => r.private).length;
    const json = JSON.stringify(privateAccount(account, { publicRepos: owned.length - privateRepos, privateRepos }, ctx.base, ctx.version));
    rendered = render(json, account.updatedAt);
    account.cache.set(key, rendered);
  }
  return ok(rendered, 'read:user, user');
}

function repoRecord(ctx: RouteContext, owner: string, name: string): ApiResult {
  const repo = ctx.world.repo(owner, name);
  if (!repo) return moved(ctx, owner, name);
  if (!canSee(ctx.viewer, repo)) return notFound('repo');
  const perm = permissionClass(ctx.viewer, repo);
  const key = `response|${perm}|${ctx.version}|${ctx.base}`;
  let rendered = repo.cache.get(key) as Rendered | undefined;
  if (!rendered) {
    rendered = render(repoJson(repo, perm, ctx.base, ctx.version), repo.updatedAt);
    repo.cache.set(key, rendered);
  }
  return ok(rendered, 'repo');
}

/** GET /repos/:owner/:repo/readme: the content object, or the raw file with the raw media type (readme.ts). */
function readme(ctx: RouteContext, owner: string, name: string): ApiResult {
  const repo = ctx.world.repo(owner, name);
  if (!repo) return moved(ctx, owner, name, '/readme');
  if (!canSee(ctx.viewer, repo)) return notFound('repo');
  const found = readmeAnswer(repo, customMedia(ctx.accept), ctx.base, ctx.version);
  return { ...ok(found.rendered, 'repo'), contentType: found.contentType, mediaType: found.mediaHeader };
}

/** GET /repos/:owner/:repo/git/blobs/:sha: its README's blob, or one added with POST /__fake/blobs (blobs.ts). */
function blob(ctx: RouteContext, owner: string | null, name: string | null, sha: string | undefined): ApiResult {
  if (owner === null || name === null || !isBlobSha(sha)) return notFound();
  const repo = ctx.world.repo(owner, name);
  if (!repo) return moved(ctx, owner, name, `/git/blobs/${sha}`);
  if (!canSee(ctx.viewer, repo)) return notFound();
  return orFound(ctx.state.blobs.answer(repo, sha, ctx.base, ctx.version), 'repo');
}

/**
 * The old name of a renamed repository: 301 to /repositories/:id, with the rest of the path
 * (`suffix`) kept (404 to whoever may not see it).
 */
function moved(ctx: RouteContext, owner: string, name: string, suffix = ''): ApiResult {
  const repo = movedRepo(ctx.world, owner, name);
  if (repo === undefined || !canSee(ctx.viewer, repo)) return notFound('repo');
  const location = `${ctx.base}/repositories/${repo.id}${suffix}`;
  return { status: 301, body: movedBody(location), contentType: JSON_TYPE, rendered: null, acceptedScopes: 'repo', location };
}

type SortKey = 'created' | 'updated' | 'pushed' | 'full_name';
const SORTS = new Set<string>(['created', 'updated', 'pushed', 'full_name']);

function fullName(repo: Repo): string {
  return `${repo.owner.login}/${repo.name}`.toLowerCase();
}

function sortRepos(repos: Repo[], params: URLSearchParams, defaultSort: SortKey): Repo[] {
  const sortParam = params.get('sort');
  const sort: SortKey = sortParam !== null && SORTS.has(sortParam) ? (sortParam as SortKey) : defaultSort;
  const direction = params.get('direction');
  const asc = direction === 'asc' ? true : direction === 'desc' ? false : sort === 'full_name';
  const value = (repo: Repo): number | string =>
    sort === 'created' ? repo.createdAt : sort === 'updated' ? repo.updatedAt : sort === 'pushed' ? repo.pushedAt : fullName(repo);
  return [...repos].sort((left, right) => {
    const leftValue = value(left);
    const rightValue = value(right);
    const order = leftValue < rightValue ? -1 : leftValue > rightValue ? 1 : left.id - right.id;
    return asc ? order : -order;
  });
}

/**
 * A paginated repository list, rendered and cached. `select` computes the visible, filtered
 * repositories only on a cache miss.
 */
function repoList(
  ctx: RouteContext,
  select: (params: URLSearchParams) => Repo[],
  defaultSort: SortKey,
  fallbackLastModified: number,
): ApiResult {
  const viewerKey = ctx.viewer === null ? 'anon' : ctx.viewer.key;
  const key = `${ctx.path}?${ctx.query}|${viewerKey}|${ctx.version}|${ctx.base}|${ctx.world.generation}`;
  let rendered = ctx.state.cachedList(key);
  if (!rendered) {
    const params = new URLSearchParams(ctx.query);
    const all = sortRepos(select(params), params, defaultSort);
    const req = pageRequest(params);
    const page = paginate(all, req);
    const items = page.items.map((r) => repoJson(r, permissionClass(ctx.viewer, r), ctx.base, ctx.version));
    let lastModified = 0;
    for (const repo of page.items.length > 0 ? page.items : all) lastModified = Math.max(lastModified, repo.updatedAt);
    if (lastModified === 0) lastModified = fallbackLastModified;
    const link = linkHeader(ctx.base, ctx.path, ctx.query, req.page, page.last);
    rendered = render(`[${items.join(',')}]`, lastModified, link);
    ctx.state.storeList(key, rendered);
  }
  return ok(rendered, 'repo');
}

function visible(ctx: RouteContext, repos: Repo[]): Repo[] {
  return repos.filter((r) => canSee(ctx.viewer, r));
}

function orgReposOf(ctx: RouteContext, login: string): Repo[] {
  return ctx.world.orgsOf(login).flatMap((org) => ctx.world.ownedRepos(org.login));
}

/** GET /user/repos: `visibility` (all|public|private), `affiliation` (owner, organization_member), `type`. */
function ownRepos(ctx: RouteContext): ApiResult {
  const viewer = ctx.viewer;
  if (viewer === null) return requiresAuth();
  const account = ctx.world.account(viewer.login);
  if (!account) return notFound();
  return repoList(
    ctx,
    (params) => {
      const type = params.get('type') ?? 'all';
      const affiliation = (params.get('affiliation') ?? 'owner,collaborator,organization_member').split(',');
      const visibility = params.get('visibility') ?? (type === 'public' || type === 'private' ? type : 'all');
      const owned = type === 'member' || !affiliation.includes('owner') ? [] : ctx.world.ownedRepos(account.login);
      const member = type === 'owner' || !affiliation.includes('organization_member') ? [] : orgReposOf(ctx, account.login);
      return visible(ctx, [...owned, ...member]).filter((r) => visibility === 'all' || (visibility === 'private') === r.private);
    },
    'full_name',
    account.updatedAt,
  );
}

/** GET /users/:login/repos: `type` owner (default) | member | all. */
function userRepos(ctx: RouteContext, login: string): ApiResult {
  const account = ctx.world.account(login);
  if (!account) return notFound();
  return repoList(
    ctx,
    (params) => {
      const type = params.get('type') ?? 'owner';
      const owned = type === 'member' ? [] : ctx.world.ownedRepos(account.login);
      const member = type === 'member' || type === 'all' ? orgReposOf(ctx, account.login) : [];
      return visible(ctx, [...owned, ...member]);
    },
    'full_name',
    account.updatedAt,
  );
}

/** GET /orgs/:org/repos: `type` all (default) | public | private | forks | sources | member. */
function orgRepos(ctx: RouteContext, login: string): ApiResult {
  const org = ctx.world.account(login);
  if (!org || org.type !== 'Organization') return notFound();
  return repoList(
    ctx,
    (params) => {
      const type = params.get('type') ?? 'all';
      const repos = visible(ctx, ctx.world.ownedRepos(org.login));
      switch (type) {
        case 'public':
          return repos.filter((r) => !r.private);
        case 'private':
          return repos.filter((r) => r.private);
        case 'forks':
          return [];
        case 'member':
          return ctx.viewer !== null ? repos.filter((r) => isAffiliated(ctx.viewer!.login, r)) : [];
        default:
          return repos;
      }
    },
    'created',
    org.updatedAt,
  );
}
