/**
 * The GitHub App endpoints ("REST API endpoints for GitHub Apps") and what Apps' credentials may
 * do elsewhere:
 *
 *   with the App's JWT (Bearer):
 *     GET  /app                                         the App
 *     GET  /app/installations                           its installations, paginated (suspended ones included)
 *     GET  /app/installations/:id                       one of them (404 when not the App's)
 *     POST /app/installations/:id/access_tokens         201 {token, expires_at, permissions, repository_selection};
 *                                                       404 Not Found (not the App's, deleted), 403 suspended
 *     GET  /repos/:owner/:repo/installation             the App's installation that reaches the repository
 *     anything else                                     403 Resource not accessible by integration
 *   any other credential on an App endpoint             401 A JSON web token could not be decoded
 *   GET /installation/repositories                      the installation token's repositories; other tokens
 *                                                       403, no credential 401
 *   GET /user, /user/repos with an installation token   403 Resource not accessible by integration
 *
 * Quota and headers are the server's: App requests spend the App's own budget, installation tokens
 * their installation's.
 */
import type { Credential } from './auth.js';
import { permissionClass } from './auth.js';
import type { Account, World } from './data.js';
import { iso } from './data.js';
import { bodyHash } from './etag.js';
import { errorJson, JSON_TYPE, JWT_REQUIRED_BODY, NOT_FOUND_BODY, REQUIRES_AUTH_BODY } from './headers.js';
import { linkHeader, pageRequest, paginate } from './pagination.js';
import { accountSummary, repoJson, type ApiVersion } from './render.js';
import type { ApiResult } from './route-context.js';
import type { FakeApp, FakeInstallation } from './app-records.js';
import type { FakeState } from './state.js';

export interface AppRouteContext {
  state: FakeState;
  cred: Credential;
  method: string;
  /** The API path (below the base path). */
  path: string;
  query: string;
  base: string;
  version: ApiVersion;
  nowMs: number;
}

const APPS_DOCS = 'https://docs.github.com/rest/apps/apps';
const MINT_DOCS = `${APPS_DOCS}#create-an-installation-access-token-for-an-app`;
/** The permissions every fake installation has: read access to metadata and contents. */
const PERMISSIONS = { contents: 'read', metadata: 'read' };

const plain = (status: number, body: Buffer): ApiResult => ({ status, body, contentType: JSON_TYPE, rendered: null, acceptedScopes: '' });
const notFound = (): ApiResult => plain(404, NOT_FOUND_BODY);
const notAccessible = (documentationUrl: string): ApiResult =>
  plain(403, errorJson('Resource not accessible by integration', documentationUrl));
const INSTALLATION_TOKEN_REQUIRED = errorJson(
  'You must authenticate with an installation access token in order to list repositories for an installation.',
  'https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation',
);

/** A cacheable 200 (the server derives ETag, Last-Modified and 304s), optionally with a Link. */
function ok(value: unknown, lastModified: number, link: string | null = null): ApiResult {
  const body = Buffer.from(JSON.stringify(value));
  return { status: 200, body, contentType: JSON_TYPE, rendered: { body, hash: bodyHash(body), lastModified, link }, acceptedScopes: '' };
}

/** Whether a path is one of the App endpoints (a credential other than the App's JWT gets 401 there). */
function isAppEndpoint(parts: string[]): boolean {
  if (parts[1] === 'app') return parts.length === 2 || (parts[2] === 'installations' && parts.length <= 5);
  return parts[1] === 'repos' && parts.length === 5 && parts[4] === 'installation';
}

/** The answer of an App endpoint, or of any request with an App's credential; undefined when the request is no business of Apps. */
export function appRoute(ctx: AppRouteContext): ApiResult | undefined {
  const parts = ctx.path.split('/');
  const { cred } = ctx;
  const appPath = isAppEndpoint(parts);
  // A method an App endpoint does not have is a 404, as GitHub answers unsupported methods.
  if (appPath && !methodAllowed(parts, ctx.method)) return notFound();
  if (cred.kind === 'app') {
    if (parts[1] === 'installation') return plain(403, INSTALLATION_TOKEN_REQUIRED);
    if (!appPath) return notAccessible('https://docs.github.com/rest');
    return appEndpoint(ctx, cred.app, parts);
  }
  if (appPath) return plain(401, JWT_REQUIRED_BODY);
  if (parts[1] === 'installation') {
    if (parts.length !== 3 || parts[2] !== 'repositories' || !readMethod(ctx.method)) return notFound();
    if (cred.kind !== 'token') return plain(401, REQUIRES_AUTH_BODY);
    const installation = cred.viewer.installation === undefined ? undefined : ctx.state.apps.installation(cred.viewer.installation.id);
    return installation === undefined ? plain(403, INSTALLATION_TOKEN_REQUIRED) : installationRepositories(ctx, installation);
  }
  if (cred.kind === 'token' && cred.viewer.installation !== undefined && parts[1] === 'user') {
    if (parts.length === 2) return notAccessible('https://docs.github.com/rest/users/users#get-the-authenticated-user');
    return notAccessible('https://docs.github.com/rest/repos/repos#list-repositories-for-the-authenticated-user');
  }
  return undefined;
}

const readMethod = (method: string): boolean => method === 'GET' || method === 'HEAD';
/** POST for minting a token, GET and HEAD for the rest. */
const methodAllowed = (parts: string[], method: string): boolean =>
  parts.length === 5 && parts[1] === 'app' ? parts[4] === 'access_tokens' && method === 'POST' : readMethod(method);

function installationId(text: string | undefined): number | undefined {
  return text !== undefined && /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : undefined;
}

/** An App endpoint called with the App's JWT. */
function appEndpoint(ctx: AppRouteContext, app: FakeApp, parts: string[]): ApiResult {
  const { state } = ctx;
  if (parts[1] === 'repos') return repoInstallation(ctx, app, parts);
  const id = installationId(parts[3]);
  if (parts.length === 5) return id === undefined ? notFound() : mint(ctx, app, id);
  if (parts.length === 2) return ok(appJson(ctx, app), app.createdAt);
  if (parts.length === 3) return installationList(ctx, app);
  const installation = id === undefined ? undefined : state.apps.installation(id);
  if (installation === undefined || installation.appId !== app.id) return notFound();
  return ok(installationJson(ctx, app, installation), updatedAt(installation));
}

function mint(ctx: AppRouteContext, app: FakeApp, id: number): ApiResult {
  const minted = ctx.state.apps.mint(app.id, id, ctx.nowMs, ctx.state.config.installationTokenSeconds);
  if (!minted.ok) {
    return minted.status === 404
      ? plain(404, errorJson('Not Found', MINT_DOCS))
      : plain(403, errorJson('This installation has been suspended', MINT_DOCS));
  }
  const { token } = minted;
  const body = {
    token: token.value,
    expires_at: iso(token.expiresAtMs),
    permissions: PERMISSIONS,
    repository_selection: token.installation.selection,
  };
  return plain(201, Buffer.from(JSON.stringify(body)));
}

function installationList(ctx: AppRouteContext, app: FakeApp): ApiResult {
  const params = new URLSearchParams(ctx.query);
  const all = ctx.state.apps.installationsOf(app.id);
  const req = pageRequest(params);
  const page = paginate(all, req);
  const lastModified = Math.max(app.createdAt, ...page.items.map(updatedAt));
  const link = linkHeader(ctx.base, ctx.path, ctx.query, req.page, page.last);
  return ok(
    page.items.map((installation) => installationJson(ctx, app, installation)),
    lastModified,
    link,
  );
}

/** GET /repos/:owner/:repo/installation: the App's installation that reaches the repository. */
function repoInstallation(ctx: AppRouteContext, app: FakeApp, parts: string[]): ApiResult {
  const repo = ctx.state.world.repo(decoded(parts[2]), decoded(parts[3]));
  if (repo === undefined) return notFound();
  const installation = ctx.state.apps.installationsOf(app.id).find((candidate) => candidate.covers(repo));
  return installation === undefined ? notFound() : ok(installationJson(ctx, app, installation), updatedAt(installation));
}

/** GET /installation/repositories: what the installation reaches, by full name. */
function installationRepositories(ctx: AppRouteContext, installation: FakeInstallation): ApiResult {
  const world = ctx.state.world;
  const viewer = ctx.cred.kind === 'token' ? ctx.cred.viewer : null;
  const repos = world
    .ownedRepos(installation.account)
    .filter((repo) => installation.covers(repo))
    .sort((left, right) =>
      `${left.owner.login}/${left.name}`.toLowerCase().localeCompare(`${right.owner.login}/${right.name}`.toLowerCase()),
    );
  const params = new URLSearchParams(ctx.query);
  const req = pageRequest(params);
  const page = paginate(repos, req);
  const items = page.items.map((repo) => repoJson(repo, permissionClass(viewer, repo), ctx.base, ctx.version));
  const json = `{"total_count":${repos.length},"repository_selection":"${installation.selection}","repositories":[${items.join(',')}]}`;
  const body = Buffer.from(json);
  const lastModified = Math.max(installation.createdAt, ...page.items.map((repo) => repo.updatedAt));
  const link = linkHeader(ctx.base, ctx.path, ctx.query, req.page, page.last);
  return { status: 200, body, contentType: JSON_TYPE, rendered: { body, hash: bodyHash(body), lastModified, link }, acceptedScopes: '' };
}

/** A path segment decoded; one that does not decode names nothing. */
function decoded(segment: string | undefined): string {
  try {
    return decodeURIComponent(segment ?? '');
  } catch {
    return '';
  }
}

const updatedAt = (installation: FakeInstallation): number => installation.suspendedAt ?? installation.createdAt;

function account(world: World, login: string): Account {
  const found = world.account(login);
  if (found === undefined) throw new Error(`the account ${login} is not in the data set`);
  return found;
}

function appJson(ctx: AppRouteContext, app: FakeApp): Record<string, unknown> {
  const { base, state } = ctx;
  return {
    id: app.id,
    slug: app.slug,
    node_id: Buffer.from(`03:App${app.id}`).toString('base64'),
    client_id: app.clientId,
    owner: accountSummary(account(state.world, app.owner), base),
    name: app.name,
    description: null,
    external_url: `https://example.com/${app.slug}`,
    html_url: `${base}/apps/${app.slug}`,
    created_at: iso(app.createdAt),
    updated_at: iso(app.createdAt),
    permissions: PERMISSIONS,
    events: [],
    installations_count: state.apps.installationsOf(app.id).length,
  };
}

function installationJson(ctx: AppRouteContext, app: FakeApp, installation: FakeInstallation): Record<string, unknown> {
  const { base, state } = ctx;
  const owner = account(state.world, installation.account);
  const settings = owner.type === 'Organization' ? `${base}/organizations/${owner.login}/settings` : `${base}/settings`;
  return {
    id: installation.id,
    account: accountSummary(owner, base),
    repository_selection: installation.selection,
    access_tokens_url: `${base}/app/installations/${installation.id}/access_tokens`,
    repositories_url: `${base}/installation/repositories`,
    html_url: `${settings}/installations/${installation.id}`,
    app_id: app.id,
    app_slug: app.slug,
    target_id: owner.id,
    target_type: owner.type,
    permissions: PERMISSIONS,
    events: [],
    created_at: iso(installation.createdAt),
    updated_at: iso(updatedAt(installation)),
    single_file_name: null,
    has_multiple_single_files: false,
    single_file_paths: [],
    suspended_by: installation.suspendedAt === null ? null : accountSummary(account(state.world, app.owner), base),
    suspended_at: installation.suspendedAt === null ? null : iso(installation.suspendedAt),
  };
}
