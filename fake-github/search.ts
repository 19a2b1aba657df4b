/**
 * The search endpoints (`/search/repositories`, `/search/users`, `/search/code`). Search answers
 * spend the `search` budget (`/search/code`: `code_search`); the server picks the budget by path.
 *
 * Search: `q` is required (422 otherwise); its free words must all occur in the repository's full
 * name (or the login), `user:`/`org:` qualifiers keep one owner, other qualifiers are ignored.
 * Results are paginated like lists and say `cache-control: no-cache`, as GitHub's do.
 * `/search/code` needs credentials (401 without) and finds nothing: the fake holds no code.
 */
import { canSee, permissionClass } from './auth.js';
import type { Account, Repo } from './data.js';
import { errorJson, JSON_TYPE, REQUIRES_AUTH_BODY } from './headers.js';
import { linkHeader, pageRequest, paginate } from './pagination.js';
import { accountSummary, repoJson } from './render.js';
import type { ApiResult, RouteContext } from './route-context.js';

const SEARCH_DOCS_URL = 'https://docs.github.com/rest/search/search';
const NO_CACHE = 'no-cache';

const missingQuery = (): ApiResult => ({
  status: 422,
  body: Buffer.from(
    JSON.stringify({
      message: 'Validation Failed',
      errors: [{ resource: 'Search', field: 'q', code: 'missing' }],
      documentation_url: SEARCH_DOCS_URL,
    }),
  ),
  contentType: JSON_TYPE,
  rendered: null,
  acceptedScopes: '',
});

const unauthorized = (body: Buffer): ApiResult => ({ status: 401, body, contentType: JSON_TYPE, rendered: null, acceptedScopes: '' });

/** A query's free words (lower case) and its owner qualifier. */
function parseQuery(query: string): { words: string[]; owner: string | undefined } {
  const words: string[] = [];
  let owner: string | undefined;
  for (const part of query.toLowerCase().split(/\s+/)) {
    if (part === '') continue;
    const colon = part.indexOf(':');
    if (colon < 0) words.push(part);
    else if (part.startsWith('user:') || part.startsWith('org:')) owner = part.slice(colon + 1);
  }
  return { words, owner };
}

function searchAnswer<Item>(ctx: RouteContext, params: URLSearchParams, all: Item[], render: (item: Item) => string): ApiResult {
  const req = pageRequest(params);
  const page = paginate(all, req);
  const items = page.items.map(render).join(',');
  const body = Buffer.from(`{"total_count":${all.length},"incomplete_results":false,"items":[${items}]}`);
  return {
    status: 200,
    body,
    contentType: JSON_TYPE,
    rendered: null,
    acceptedScopes: '',
    cacheControl: NO_CACHE,
    link: linkHeader(ctx.base, ctx.path, ctx.query, req.page, page.last),
  };
}

function searchRepositories(ctx: RouteContext, query: string, params: URLSearchParams): ApiResult {
  const { words, owner } = parseQuery(query);
  const matches: Repo[] = [];
  for (const repo of ctx.world.repos.values()) {
    if (!canSee(ctx.viewer, repo)) continue;
    const fullName = `${repo.owner.login}/${repo.name}`.toLowerCase();
    if (owner !== undefined && repo.owner.login.toLowerCase() !== owner) continue;
    if (words.every((word) => fullName.includes(word))) matches.push(repo);
  }
  matches.sort((left, right) => right.stargazers - left.stargazers || left.id - right.id);
  return searchAnswer(ctx, params, matches, (repo) => {
    const json = repoJson(repo, permissionClass(ctx.viewer, repo), ctx.base, ctx.version);
    return `${json.slice(0, -1)},"score":1.0}`;
  });
}

function searchUsers(ctx: RouteContext, query: string, params: URLSearchParams): ApiResult {
  const { words } = parseQuery(query);
  const matches: Account[] = [];
  for (const account of ctx.world.accounts.values()) {
    const login = account.login.toLowerCase();
    if (words.every((word) => login.includes(word))) matches.push(account);
  }
  matches.sort((left, right) => left.id - right.id);
  return searchAnswer(ctx, params, matches, (account) => JSON.stringify({ ...accountSummary(account, ctx.base), score: 1.0 }));
}

/** GET /search/:kind; undefined for an unknown kind (404). */
export function searchRoute(ctx: RouteContext, kind: string): ApiResult | undefined {
  if (kind !== 'repositories' && kind !== 'users' && kind !== 'code') return undefined;
  if (kind === 'code' && ctx.viewer === null) return unauthorized(REQUIRES_AUTH_BODY);
  const params = new URLSearchParams(ctx.query);
  const query = params.get('q');
  if (query === null || query.trim() === '') return missingQuery();
  if (kind === 'repositories') return searchRepositories(ctx, query, params);
  if (kind === 'users') return searchUsers(ctx, query, params);
  return searchAnswer(ctx, params, [], () => '');
}

/** POST /graphql without credentials. */
export const GRAPHQL_AUTH_BODY = errorJson(
  'This endpoint requires you to be authenticated.',
  'https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql',
);
