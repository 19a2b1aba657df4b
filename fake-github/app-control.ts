/**
 * Control endpoints of the fake's GitHub Apps (apps.ts), for tests and demos:
 *   GET  /__fake/apps                   every App with its installations (never a token or a key)
 *   POST /__fake/apps                   add an App: {"id", "slug"?, "name"?, "owner"?, "publicKey", "installations"?}
 *   POST /__fake/installations          install an App: {"app", "id", "account"?, "repositories"?, "rateLimit"?}
 *   GET  /__fake/installations/:id      one installation
 *   POST /__fake/installations/:id      {"suspended": true|false}: suspend (its tokens stop working) or unsuspend
 *   DELETE /__fake/installations/:id    uninstall: its tokens stop working, minting answers 404, lists forget it
 * A bad definition answers 400, an unknown App or installation 404, a taken id 422.
 */
import type { IncomingMessage } from 'node:http';
import { AppSpecError, type FakeAppInput, type FakeInstallationInput } from './app-spec.js';
import type { FakeApp, FakeInstallation } from './app-records.js';
import { HttpError, methodGuard, onlyKeys, readJsonObject } from './control-input.js';
import type { FakeState } from './state.js';
import { announce, installationChanged } from './webhook-payloads.js';

const INSTALLATION_PATH = /^\/__fake\/installations\/([1-9][0-9]{0,9})$/;

/** What the control endpoints show of an installation. */
function describeInstallation(state: FakeState, installation: FakeInstallation): Record<string, unknown> {
  const repositories =
    installation.selection === 'all'
      ? 'all'
      : [...state.world.repos.values()]
          .filter((repo) => installation.repositoryIds.has(repo.id))
          .map((repo) => `${repo.owner.login}/${repo.name}`);
  return {
    id: installation.id,
    app: installation.appId,
    account: installation.account,
    repositories,
    rateLimit: installation.rateLimit ?? state.config.tokenLimit,
    suspended: installation.suspendedAt !== null,
    liveTokens: state.apps.liveTokens(installation, Date.now()),
  };
}

function describeApp(state: FakeState, app: FakeApp): Record<string, unknown> {
  return {
    id: app.id,
    slug: app.slug,
    name: app.name,
    clientId: app.clientId,
    owner: app.owner,
    installations: state.apps.installationsOf(app.id).map((installation) => describeInstallation(state, installation)),
  };
}

/** The installation webhook for a change (webhook-payloads.ts), when a webhook is configured. */
function announceInstallation(state: FakeState, installation: FakeInstallation, action: string): void {
  const slug = state.apps.app(installation.appId)?.slug ?? '';
  announce(state.webhooks, installationChanged(state.world, installation, action, state.webhooks.apiBase(), slug));
}

/** Runs a change of the registry, turning its AppSpecError into the control answer's status. */
function change<Result>(run: () => Result): Result {
  try {
    return run();
  } catch (err) {
    if (err instanceof AppSpecError) throw new HttpError(err.status, err.message);
    throw err;
  }
}

/** The answer of an App control endpoint, or undefined when the path is not one. */
export async function appControl(state: FakeState, req: IncomingMessage, path: string): Promise<unknown> {
  if (path === '/__fake/apps') {
    methodGuard(req, ['GET', 'POST']);
    if (req.method === 'POST') {
      const body = await readJsonObject(req, false);
      onlyKeys(body, ['id', 'slug', 'name', 'owner', 'publicKey', 'installations']);
      const app = change(() => state.apps.addApp(body as unknown as FakeAppInput));
      return { app: describeApp(state, app) };
    }
    return { apps: state.apps.allApps().map((app) => describeApp(state, app)) };
  }
  if (path === '/__fake/installations') {
    methodGuard(req, ['POST']);
    const body = await readJsonObject(req, false);
    onlyKeys(body, ['app', 'id', 'account', 'repositories', 'rateLimit']);
    const { app, ...input } = body;
    if (typeof app !== 'number' || !Number.isInteger(app)) throw new HttpError(400, '"app" must be the id of an App');
    const installation = change(() => state.apps.addInstallation(app, input as unknown as FakeInstallationInput));
    announceInstallation(state, installation, 'created');
    return { installation: describeInstallation(state, installation) };
  }
  const match = INSTALLATION_PATH.exec(path);
  if (match === null) return undefined;
  methodGuard(req, ['GET', 'POST', 'DELETE']);
  const id = Number(match[1]);
  const installation = state.apps.installation(id);
  if (installation === undefined) throw new HttpError(404, `No installation ${id}`);
  if (req.method === 'DELETE') {
    state.apps.delete(id);
    announceInstallation(state, installation, 'deleted');
    return { deleted: id };
  }
  if (req.method === 'POST') {
    const body = await readJsonObject(req, false);
    onlyKeys(body, ['suspended']);
    if (typeof body.suspended !== 'boolean') throw new HttpError(400, '"suspended" must be a boolean');
    if (state.apps.setSuspended(id, body.suspended, Date.now()))
      announceInstallation(state, installation, body.suspended ? 'suspend' : 'unsuspend');
  }
  return { installation: describeInstallation(state, installation) };
}
