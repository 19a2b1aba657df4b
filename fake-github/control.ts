/**
 * Control endpoints under /__fake/ (never counted in stats, never subject to quota or latency):
 *   GET  /__fake/stats                 counters
 *   POST /__fake/reset                 stats, quotas, secondary mode, mutations → seed
 *                                      (body {"config": true} also restores the start-up config)
 *   POST /__fake/mutate  {"path": ...} change a repo, user, org or city
 *   POST /__fake/rename  {"path": "/repos/o/r", "name": ...} rename a repository (the old name answers 301)
 *   POST /__fake/blobs   {"path": "/repos/o/r", "size": N} add a blob of N zero bytes (blobs.ts)
 *   POST /__fake/issues  {"path": "/repos/o/r", "title": ...} open an issue (issues.ts)
 *   POST /__fake/repos   {"owner": ..., "name": ..., "private"?: bool} create a repository (issues.ts)
 *   GET|POST /__fake/webhooks          where the fake's webhooks go ({"url", "secret"}) and the recent deliveries
 *   POST /__fake/webhooks/redeliver    {"delivery": GUID}: send a delivery again, as GitHub's "Redeliver"
 *   (a mutation of a repository, a rename and an installation change send webhooks: webhook-payloads.ts)
 *   GET|POST /__fake/secondary         scripted secondary-limit failures
 *   GET|POST /__fake/config            runtime configuration
 *   GET|POST|DELETE /__fake/faults     fault injection rules (faults.ts)
 *   GET|POST /__fake/tokens            revoke or restore a token ({"token": value or login, "revoked": bool})
 *   GET|POST /__fake/apps, POST /__fake/installations, POST|DELETE /__fake/installations/:id
 *                                      GitHub Apps and their installations (app-control.ts)
 * Bad input answers 400 JSON; the process never crashes on it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { appControl } from './app-control.js';
import { apiPathOf } from './base-path.js';
import { mutateAccount, mutateCity, mutateRepo, type Change, type Repo } from './data.js';
import { faultSeed, FaultSpecError, parseFaultRules } from './faults.js';
import { MAX_BLOB_BYTES } from './blobs.js';
import { HttpError, methodGuard, onlyKeys, readJsonObject } from './control-input.js';
import { JSON_TYPE } from './headers.js';
import { RenameError, renameRepo } from './rename.js';
import { announce, FAKE_SENDER, ping, renamed, starred } from './webhook-payloads.js';
import { issueNodeId, issueOpened, openIssue, repositoryCreated } from './issues.js';
import { repoNodeId } from './render.js';
import { FAKE_HOOK_ID } from './webhooks.js';
import type { FakeState, RuntimeConfig } from './state.js';

export const CONTROL_PREFIX = '/__fake';
function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, {
    ...headers,
    'content-type': JSON_TYPE,
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  res.end(body);
}

function intField(body: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const value = body[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new HttpError(400, `"${key}" must be an integer from ${min} to ${max}`);
  }
  return value;
}

export async function handleControl(state: FakeState, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  try {
    switch (path) {
      case '/__fake/stats':
        methodGuard(req, ['GET', 'HEAD']);
        return sendJson(res, 200, state.stats.snapshot());
      case '/__fake/reset': {
        methodGuard(req, ['POST']);
        const body = await readJsonObject(req, true);
        onlyKeys(body, ['config']);
        if (body.config !== undefined && typeof body.config !== 'boolean') {
          throw new HttpError(400, '"config" must be a boolean');
        }
        state.reset(body.config === true);
        return sendJson(res, 200, { reset: true, config: state.config });
      }
      case '/__fake/mutate': {
        methodGuard(req, ['POST']);
        const body = await readJsonObject(req, false);
        onlyKeys(body, ['path']);
        if (typeof body.path !== 'string' || body.path === '') throw new HttpError(400, '"path" must be a non-empty string');
        return sendJson(res, 200, mutate(state, body.path));
      }
      case '/__fake/rename': {
        methodGuard(req, ['POST']);
        return sendJson(res, 200, rename(state, await readJsonObject(req, false)));
      }
      case '/__fake/blobs': {
        methodGuard(req, ['POST']);
        return sendJson(res, 200, addBlob(state, await readJsonObject(req, false)));
      }
      case '/__fake/issues': {
        methodGuard(req, ['POST']);
        return sendJson(res, 201, addIssue(state, await readJsonObject(req, false)));
      }
      case '/__fake/repos': {
        methodGuard(req, ['POST']);
        return sendJson(res, 201, addRepo(state, await readJsonObject(req, false)));
      }
      case '/__fake/webhooks': {
        methodGuard(req, ['GET', 'POST']);
        if (req.method === 'POST') configureWebhooks(state, await readJsonObject(req, false));
        return sendJson(res, 200, state.webhooks.describe());
      }
      case '/__fake/webhooks/redeliver': {
        methodGuard(req, ['POST']);
        const body = await readJsonObject(req, false);
        onlyKeys(body, ['delivery']);
        if (typeof body.delivery !== 'string') throw new HttpError(400, '"delivery" must be the GUID of a recent delivery');
        const id = state.webhooks.redeliver(body.delivery);
        if (id === undefined) throw new HttpError(404, 'No such recent delivery, or no webhook configured');
        return sendJson(res, 200, { redelivered: id });
      }
      case '/__fake/secondary': {
        methodGuard(req, ['GET', 'POST']);
        if (req.method === 'POST') configureSecondary(state, await readJsonObject(req, false));
        return sendJson(res, 200, { secondary: state.secondary.describe(), points: state.secondary.points() });
      }
      case '/__fake/config': {
        methodGuard(req, ['GET', 'POST']);
        if (req.method === 'POST') configure(state, await readJsonObject(req, false));
        return sendJson(res, 200, { config: state.config });
      }
      case '/__fake/faults': {
        methodGuard(req, ['GET', 'POST', 'DELETE']);
        if (req.method === 'POST') {
          const body = await readJsonObject(req, false);
          try {
            state.faults.set(parseFaultRules(body), faultSeed(body));
          } catch (err) {
            if (err instanceof FaultSpecError) throw new HttpError(400, err.message);
            throw err;
          }
        } else if (req.method === 'DELETE') {
          state.faults.clear();
        }
        return sendJson(res, 200, { faults: state.faults.describe() });
      }
      case '/__fake/tokens': {
        methodGuard(req, ['GET', 'POST']);
        if (req.method === 'POST') revoke(state, await readJsonObject(req, false));
        return sendJson(res, 200, { revoked: state.credentials.revokedCount() });
      }
      default: {
        const answer = await appControl(state, req, path);
        if (answer === undefined) throw new HttpError(404, `Unknown control endpoint ${path}`);
        return sendJson(res, 200, answer);
      }
    }
  } catch (err) {
    if (err instanceof HttpError) {
      sendJson(res, err.status, { message: err.message }, err.headers);
      if (err.status === 413) req.resume();
      return;
    }
    sendJson(res, 500, { message: `Control endpoint failed: ${(err as Error).message}` });
  }
}

/** Renames a repository: `{"path": "/repos/:owner/:repo" (or an absolute URL), "name": "new-name"}`. */
function rename(
  state: FakeState,
  body: Record<string, unknown>,
): { from: string; to: string; id: number; location: string; deliveries?: string[] } {
  onlyKeys(body, ['path', 'name']);
  if (typeof body.path !== 'string' || body.path === '') throw new HttpError(400, '"path" must be a non-empty string');
  if (typeof body.name !== 'string') throw new HttpError(400, '"name" must be a string');
  let path = body.path;
  if (/^https?:\/\//i.test(path)) {
    try {
      path = new URL(path).pathname;
    } catch {
      throw new HttpError(400, '"path" is not a valid URL');
    }
  }
  const parts = apiPath(state, path.split('?')[0] ?? '').split('/');
  const repo = parts.length === 4 && parts[0] === '' && parts[1] === 'repos' ? state.world.repo(parts[2] ?? '', parts[3] ?? '') : undefined;
  if (repo === undefined) throw new HttpError(404, `Unknown repository ${path.slice(0, 200)} (expected /repos/:owner/:repo)`);
  try {
    const formerName = repo.name;
    const moved = renameRepo(state.world, repo, body.name);
    state.invalidateLists();
    const deliveries = announce(state.webhooks, renamed(state.world, repo, formerName, state.webhooks.apiBase()));
    return { ...moved, id: repo.id, location: `/repositories/${repo.id}`, ...(deliveries.length > 0 ? { deliveries } : {}) };
  } catch (err) {
    if (err instanceof RenameError) throw new HttpError(err.status, err.message);
    throw err;
  }
}

/** Adds a blob of zero bytes to a repository: `{"path": "/repos/:owner/:repo", "size": N}` (0 to 100 MiB). */
function addBlob(state: FakeState, body: Record<string, unknown>): { sha: string; size: number; url: string } {
  onlyKeys(body, ['path', 'size']);
  if (typeof body.path !== 'string' || body.path === '') throw new HttpError(400, '"path" must be a non-empty string');
  const { size } = body;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 0 || size > MAX_BLOB_BYTES) {
    throw new HttpError(400, `"size" must be an integer from 0 to ${MAX_BLOB_BYTES}`);
  }
  const parts = apiPath(state, body.path.split('?')[0] ?? '').split('/');
  const repo = parts.length === 4 && parts[0] === '' && parts[1] === 'repos' ? state.world.repo(parts[2] ?? '', parts[3] ?? '') : undefined;
  if (repo === undefined) throw new HttpError(404, `Unknown repository ${body.path.slice(0, 200)} (expected /repos/:owner/:repo)`);
  const sha = state.blobs.addZeros(repo, size);
  return { sha, size, url: `/repos/${repo.owner.login}/${repo.name}/git/blobs/${sha}` };
}

/** The repository a control body's `path` names (`/repos/:owner/:repo`), or 404. */
function repoAt(state: FakeState, path: unknown): Repo {
  if (typeof path !== 'string' || path === '') throw new HttpError(400, '"path" must be a non-empty string');
  const parts = apiPath(state, path.split('?')[0] ?? '').split('/');
  const repo = parts.length === 4 && parts[0] === '' && parts[1] === 'repos' ? state.world.repo(parts[2] ?? '', parts[3] ?? '') : undefined;
  if (repo === undefined) throw new HttpError(404, `Unknown repository ${path.slice(0, 200)} (expected /repos/:owner/:repo)`);
  return repo;
}

/** Opens an issue: `{"path": "/repos/:owner/:repo", "title": "...", "author"?: login}`; an `issues` delivery follows. */
function addIssue(state: FakeState, body: Record<string, unknown>): { number: number; node_id: string; deliveries?: string[] } {
  onlyKeys(body, ['path', 'title', 'author']);
  const repo = repoAt(state, body.path);
  if (typeof body.title !== 'string' || body.title.length === 0 || body.title.length > 256)
    throw new HttpError(400, '"title" must be a string of 1 to 256 characters');
  const author = body.author ?? FAKE_SENDER;
  if (typeof author !== 'string' || state.world.account(author) === undefined) throw new HttpError(404, '"author" must be a known login');
  const issue = openIssue(state.world, repo, body.title, author);
  state.invalidateLists();
  const deliveries = announce(state.webhooks, issueOpened(state.world, issue, state.webhooks.apiBase()));
  return { number: issue.number, node_id: issueNodeId(issue), ...(deliveries.length > 0 ? { deliveries } : {}) };
}

/** Creates a repository: `{"owner": login, "name": "...", "private"?: false}`; a `repository` created delivery follows. */
function addRepo(
  state: FakeState,
  body: Record<string, unknown>,
): { full_name: string; id: number; node_id: string; deliveries?: string[] } {
  onlyKeys(body, ['owner', 'name', 'private']);
  const owner = typeof body.owner === 'string' ? state.world.account(body.owner) : undefined;
  if (owner === undefined) throw new HttpError(404, '"owner" must be a known login');
  if (typeof body.name !== 'string' || !/^[A-Za-z0-9._-]{1,100}$/.test(body.name) || body.name === '.' || body.name === '..')
    throw new HttpError(400, '"name" must be 1 to 100 letters, digits, ".", "-" or "_"');
  if (body.private !== undefined && typeof body.private !== 'boolean') throw new HttpError(400, '"private" must be a boolean');
  if (state.world.repo(owner.login, body.name) !== undefined) throw new HttpError(422, `name already exists on this account: ${body.name}`);
  const repo = state.world.createRepo(owner, body.name, body.private === true);
  state.invalidateLists();
  const deliveries = announce(state.webhooks, repositoryCreated(state.world, repo, state.webhooks.apiBase(), FAKE_SENDER));
  const node_id = repoNodeId(repo);
  return { full_name: `${owner.login}/${repo.name}`, id: repo.id, node_id, ...(deliveries.length > 0 ? { deliveries } : {}) };
}

/** `{"url": "http://...", "secret": "..."}` (the secret optional), or `{"url": null}` to stop sending. */
function configureWebhooks(state: FakeState, body: Record<string, unknown>): void {
  onlyKeys(body, ['url', 'secret']);
  if (body.url === null) return state.webhooks.configure(null);
  if (typeof body.url !== 'string' || !/^https?:\/\/[^\s]+$/i.test(body.url))
    throw new HttpError(400, '"url" must be an http:// or https:// URL, or null');
  const secret = body.secret ?? null;
  if (secret !== null && (typeof secret !== 'string' || secret.length === 0 || secret.length > 4096))
    throw new HttpError(400, '"secret" must be a string of 1 to 4096 characters, or null');
  state.webhooks.configure({ url: body.url, secret });
  announce(state.webhooks, ping(state.world, body.url, FAKE_HOOK_ID, state.webhooks.apiBase()));
}

/** Revokes or restores a configured token, as an operator would on GitHub (then 401 Bad credentials everywhere). */
function revoke(state: FakeState, body: Record<string, unknown>): void {
  onlyKeys(body, ['token', 'revoked']);
  if (typeof body.token !== 'string' || body.token === '') throw new HttpError(400, '"token" must be a token value or a login');
  if (typeof body.revoked !== 'boolean') throw new HttpError(400, '"revoked" must be a boolean');
  if (state.credentials.setRevoked(body.token, body.revoked) === 0) throw new HttpError(404, 'No configured token matches "token"');
}

function configure(state: FakeState, body: Record<string, unknown>): void {
  onlyKeys(body, [
    'anonymousLimit',
    'tokenLimit',
    'windowSeconds',
    'searchLimit',
    'codeSearchLimit',
    'graphqlLimit',
    'searchWindowSeconds',
    'latencyMs',
    'enforceConcurrency',
    'installationTokenSeconds',
    'rateLimits',
    'noTransform',
    'enforcePoints',
    'pointsPerMinute',
    'graphqlPointsPerMinute',
  ]);
  const patch: Partial<RuntimeConfig> = {};
  const set = (key: Exclude<keyof RuntimeConfig, 'rateLimits' | 'noTransform' | 'enforcePoints'>, min: number, max: number): void => {
    const value = intField(body, key, min, max);
    if (value !== undefined) patch[key] = value;
  };
  set('anonymousLimit', 0, 1e9);
  set('tokenLimit', 0, 1e9);
  set('windowSeconds', 1, 1e7);
  set('searchLimit', 0, 1e9);
  set('codeSearchLimit', 0, 1e9);
  set('graphqlLimit', 0, 1e9);
  set('searchWindowSeconds', 1, 1e7);
  set('latencyMs', 0, 600_000);
  set('installationTokenSeconds', 1, 86_400);
  if (body.rateLimits !== undefined && typeof body.rateLimits !== 'boolean') throw new HttpError(400, '"rateLimits" must be a boolean');
  if (typeof body.rateLimits === 'boolean') patch.rateLimits = body.rateLimits;
  if (body.noTransform !== undefined && typeof body.noTransform !== 'boolean') throw new HttpError(400, '"noTransform" must be a boolean');
  if (typeof body.noTransform === 'boolean') patch.noTransform = body.noTransform;
  if (body.enforcePoints !== undefined && typeof body.enforcePoints !== 'boolean')
    throw new HttpError(400, '"enforcePoints" must be a boolean');
  if (typeof body.enforcePoints === 'boolean') patch.enforcePoints = body.enforcePoints;
  set('pointsPerMinute', 1, 1e6);
  set('graphqlPointsPerMinute', 1, 1e6);
  if (body.enforceConcurrency === null) patch.enforceConcurrency = 0;
  else set('enforceConcurrency', 0, 1e6);
  state.configure(patch);
}

function configureSecondary(state: FakeState, body: Record<string, unknown>): void {
  onlyKeys(body, ['count', 'status', 'retryAfter', 'token']);
  const count = intField(body, 'count', 0, 1e9);
  if (count === undefined) throw new HttpError(400, '"count" is required');
  const status = body.status ?? 403;
  if (status !== 200 && status !== 403 && status !== 429)
    throw new HttpError(400, '"status" must be 403, 429 or 200 (a GraphQL RATE_LIMITED answer)');
  let retryAfter: number | null = 60;
  if (body.retryAfter === null) retryAfter = null;
  else retryAfter = intField(body, 'retryAfter', 0, 86_400) ?? 60;
  const token = body.token ?? null;
  if (token !== null && (typeof token !== 'string' || token === '')) {
    throw new HttpError(400, '"token" must be a token value, a login, "anonymous" or null');
  }
  state.secondary.set({ remaining: count, status, retryAfter, token });
}

/** Accepts `/repos/o/r`, `/users/u`, `/orgs/o`, `/bicyclists/c`, also as absolute URLs or with a query. */
function mutate(state: FakeState, target: string): { path: string; kind: string; changed: Change; deliveries?: string[] } {
  let path = target;
  if (/^https?:\/\//i.test(path)) {
    try {
      path = new URL(path).pathname;
    } catch {
      throw new HttpError(400, '"path" is not a valid URL');
    }
  }
  path = apiPath(state, path.split('?')[0] ?? '');
  const parts = path.split('/');
  const world = state.world;
  const unknown = (): never => {
    throw new HttpError(404, `Unknown resource ${path} (mutable: /repos/:owner/:repo, /users/:login, /orgs/:org, /bicyclists/:city)`);
  };
  if (parts[0] !== '') unknown();
  let result: { path: string; kind: string; changed: Change; deliveries?: string[] } | undefined;
  if (parts.length === 4 && parts[1] === 'repos') {
    const repo = world.repo(parts[2] ?? '', parts[3] ?? '');
    if (repo) {
      result = { path: `/repos/${repo.owner.login}/${repo.name}`, kind: 'repository', changed: mutateRepo(world, repo) };
      // GitHub's events for what changed (a star): sent after the change, asynchronously.
      const deliveries = announce(state.webhooks, starred(world, repo, state.webhooks.apiBase()));
      if (deliveries.length > 0) result.deliveries = deliveries;
    }
  } else if (parts.length === 3 && (parts[1] === 'users' || parts[1] === 'orgs')) {
    const account = world.account(parts[2] ?? '');
    if (account && (parts[1] === 'users' || account.type === 'Organization')) {
      result = {
        path: `/${parts[1]}/${account.login}`,
        kind: account.type === 'User' ? 'user' : 'organization',
        changed: mutateAccount(world, account),
      };
    }
  } else if (parts.length === 3 && parts[1] === 'bicyclists') {
    const city = world.cities.get(parts[2] ?? '');
    if (city) result = { path: `/bicyclists/${city.name}`, kind: 'city', changed: mutateCity(world, city) };
  }
  if (!result) return unknown();
  state.invalidateLists();
  return result;
}

/** A resource path as the control endpoints take it: below the base path when it starts with it. */
function apiPath(state: FakeState, path: string): string {
  return apiPathOf(path, state.basePath) ?? path;
}
