/**
 * The fake's GitHub Apps: each App (id, slug, client id, public key), its installations (on an
 * account, over all of its repositories or a selection, with their own rate limit) and the
 * installation tokens minted for them.
 *
 * - A JWT is verified with jwt.ts against the App its `iss` names (the App id as a number, as a
 *   numeric string, or the App's client id).
 * - An installation token (`ghs_` and 36 letters or digits) lives `installationTokenSeconds`;
 *   after that, or once its installation is suspended or deleted, it is unknown: 401 Bad
 *   credentials, like any revoked token. Suspending revokes the tokens (unsuspending does not bring
 *   them back); minting for a suspended installation is 403, for a deleted or unknown one 404.
 * - A token acts as the App's bot, `<slug>[bot]`: it sees the public repositories and the private
 *   ones its installation covers. Its quota is its installation's (every token of an installation
 *   shares one budget per window), so a re-minted token carries on where the old one stopped.
 *
 * reset() goes back to the configured Apps: added Apps and installations, suspensions, deletions
 * and tokens are forgotten.
 */
import { createHash, createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { AppSpecError, type FakeAppInput, type FakeInstallationInput } from './app-spec.js';
import type { FakeApp, FakeInstallation } from './app-records.js';
import type { Credential, Viewer } from './auth.js';
import { SEED_ORG, type World } from './data.js';
import { checkClaimTimes, checkSignature, looksLikeJwt, type SignatureCheck } from './jwt.js';

export interface InstallationToken {
  value: string;
  installation: FakeInstallation;
  expiresAtMs: number;
  viewer: Viewer;
}

export type MintResult = { ok: true; token: InstallationToken } | { ok: false; status: 403 | 404 };

/** The quota key of an installation: every token of it spends this budget. */
export const installationKey = (id: number): string => `installation:${id}`;
/** The quota key of an App's own requests (with its JWT). */
export const appKey = (id: number): string => `app:${id}`;

/** When the Apps and installations were made: fixed, so that their bodies and ETags are the same from run to run. */
export const APPS_EPOCH = Date.parse('2024-05-01T00:00:00Z');

/** GitHub's bounds: 5000 at least, 12,500 on large organizations, 15,000 on Enterprise Cloud (the fake allows less, for tests). */
const MAX_RATE_LIMIT = 15_000;
const SLUG_RE = /^[a-z0-9][a-z0-9-]{0,33}$/;
const TOKEN_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const SIGNATURE_MEMO_MAX = 1000;

function positiveId(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2 ** 31 - 1) {
    throw new AppSpecError(`${what} must be an integer from 1 to ${2 ** 31 - 1}`);
  }
  return value;
}

function publicKeyOf(pem: unknown): KeyObject {
  if (typeof pem !== 'string' || !pem.includes('-----BEGIN')) throw new AppSpecError('publicKey must be a PEM text (content not shown)');
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new AppSpecError('publicKey is not a readable PEM key (content not shown)');
  }
  if (key.asymmetricKeyType !== 'rsa') throw new AppSpecError('publicKey must be an RSA key (GitHub signs App JWTs with RS256)');
  return key;
}

function tokenValue(): string {
  const bytes = randomBytes(36);
  let out = 'ghs_';
  for (const byte of bytes) out += TOKEN_ALPHABET[byte % TOKEN_ALPHABET.length];
  return out;
}

export class AppRegistry {
  private apps = new Map<number, FakeApp>();
  private byClientId = new Map<string, FakeApp>();
  private installations = new Map<number, FakeInstallation>();
  private tokens = new Map<string, InstallationToken>();
  /** Signature checks by JWT (the costly part); cleared whenever the Apps change. */
  private signatures = new Map<string, SignatureCheck<FakeApp>>();

  constructor(
    private readonly seed: readonly FakeAppInput[],
    private readonly world: () => World,
  ) {
    this.reset();
  }

  reset(): void {
    this.apps = new Map();
    this.byClientId = new Map();
    this.installations = new Map();
    this.tokens = new Map();
    this.signatures = new Map();
    for (const input of this.seed) this.addApp(input);
  }

  /** Adds an App (and its installations); throws an AppSpecError on a bad or taken definition. */
  addApp(input: FakeAppInput): FakeApp {
    if (input === null || typeof input !== 'object') throw new AppSpecError('an App must be an object');
    const id = positiveId(input.id, 'the App id');
    if (this.apps.has(id)) throw new AppSpecError(`App ${id} exists already`, 422);
    const slug = input.slug ?? `fake-app-${id}`;
    if (typeof slug !== 'string' || !SLUG_RE.test(slug)) throw new AppSpecError('slug must be 1-34 lowercase letters, digits or "-"');
    if ([...this.apps.values()].some((app) => app.slug === slug)) throw new AppSpecError(`slug ${slug} is taken`, 422);
    const name = input.name ?? slug;
    if (typeof name !== 'string' || name.length === 0 || name.length > 100) throw new AppSpecError('name must be 1-100 characters');
    const owner = this.world().account(String(input.owner ?? SEED_ORG));
    if (owner === undefined) throw new AppSpecError('owner must be an account of the data set');
    const clientId = `Iv23li${createHash('sha256').update(`client:${id}`).digest('hex').slice(0, 14)}`;
    const app: FakeApp = { id, slug, name, clientId, owner: owner.login, publicKey: publicKeyOf(input.publicKey), createdAt: APPS_EPOCH };
    const installations = input.installations ?? [];
    if (!Array.isArray(installations)) throw new AppSpecError('installations must be a list');
    const ids = new Set<number>();
    for (const installation of installations) {
      const installationId = positiveId(installation?.id, 'an installation id');
      if (ids.has(installationId) || this.installations.has(installationId)) {
        throw new AppSpecError(`installation ${installationId} exists already`, 422);
      }
      ids.add(installationId);
    }
    this.apps.set(id, app);
    this.byClientId.set(clientId, app);
    this.signatures = new Map();
    try {
      for (const installation of installations) this.addInstallation(id, installation);
    } catch (err) {
      // All or nothing: a bad installation leaves no trace of the App.
      for (const installation of this.installationsOf(id)) this.installations.delete(installation.id);
      this.apps.delete(id);
      this.byClientId.delete(clientId);
      throw err;
    }
    return app;
  }

  /** Installs an App on an account; throws an AppSpecError (404 for an unknown App). */
  addInstallation(appId: number, input: FakeInstallationInput): FakeInstallation {
    if (!this.apps.has(appId)) throw new AppSpecError(`no App ${appId}`, 404);
    if (input === null || typeof input !== 'object') throw new AppSpecError('an installation must be an object');
    const id = positiveId(input.id, 'the installation id');
    if (this.installations.has(id)) throw new AppSpecError(`installation ${id} exists already`, 422);
    const world = this.world();
    const account = world.account(String(input.account ?? SEED_ORG));
    if (account === undefined) throw new AppSpecError(`installation ${id}: account must be an account of the data set`);
    const rateLimit = input.rateLimit ?? null;
    if (
      rateLimit !== null &&
      (typeof rateLimit !== 'number' || !Number.isInteger(rateLimit) || rateLimit < 0 || rateLimit > MAX_RATE_LIMIT)
    ) {
      throw new AppSpecError(`installation ${id}: rateLimit must be an integer from 0 to ${MAX_RATE_LIMIT}`);
    }
    const repositories = input.repositories ?? 'all';
    const repositoryIds = new Set<number>();
    if (repositories !== 'all') {
      if (!Array.isArray(repositories)) throw new AppSpecError(`installation ${id}: repositories must be "all" or a list of owner/name`);
      for (const fullName of repositories) {
        const [owner = '', name = '', extra] = typeof fullName === 'string' ? fullName.split('/') : [];
        const repo = extra === undefined ? world.repo(owner, name) : undefined;
        if (repo === undefined || repo.owner !== account) {
          throw new AppSpecError(`installation ${id}: repositories must be repositories of ${account.login}, as owner/name`);
        }
        repositoryIds.add(repo.id);
      }
    }
    const accountKey = account.login.toLowerCase();
    const selection = repositories === 'all' ? 'all' : 'selected';
    const installation: FakeInstallation = {
      id,
      appId,
      account: account.login,
      selection,
      repositoryIds,
      rateLimit,
      suspendedAt: null,
      deleted: false,
      createdAt: APPS_EPOCH,
      covers: (repo) => (selection === 'all' ? repo.owner.login.toLowerCase() === accountKey : repositoryIds.has(repo.id)),
    };
    this.installations.set(id, installation);
    return installation;
  }

  app(id: number): FakeApp | undefined {
    return this.apps.get(id);
  }

  /** The App a JWT's `iss` names: its id (a number or a numeric string) or its client id. */
  findApp(issuer: number | string): FakeApp | undefined {
    if (typeof issuer === 'number') return this.apps.get(issuer);
    return /^[1-9][0-9]{0,9}$/.test(issuer) ? this.apps.get(Number(issuer)) : this.byClientId.get(issuer);
  }

  /** An installation that is not deleted. */
  installation(id: number): FakeInstallation | undefined {
    const installation = this.installations.get(id);
    return installation === undefined || installation.deleted ? undefined : installation;
  }

  /** The App's installations that are not deleted (suspended ones included, as GitHub lists them), by id. */
  installationsOf(appId: number): FakeInstallation[] {
    return [...this.installations.values()].filter((i) => i.appId === appId && !i.deleted).sort((left, right) => left.id - right.id);
  }

  allApps(): FakeApp[] {
    return [...this.apps.values()].sort((left, right) => left.id - right.id);
  }

  /** Suspends (revoking its tokens) or unsuspends an installation; false when there is none. */
  setSuspended(id: number, suspended: boolean, nowMs: number): boolean {
    const installation = this.installation(id);
    if (installation === undefined) return false;
    if (suspended && installation.suspendedAt === null) {
      installation.suspendedAt = Math.floor(nowMs / 1000) * 1000;
      this.revokeTokens(installation);
    } else if (!suspended) {
      installation.suspendedAt = null;
    }
    return true;
  }

  /** Deletes (uninstalls) an installation: its tokens stop working and it is no longer listed. */
  delete(id: number): boolean {
    const installation = this.installation(id);
    if (installation === undefined) return false;
    installation.deleted = true;
    this.revokeTokens(installation);
    return true;
  }

  /** Mints a token for an App's installation: 404 when it is not the App's (or deleted), 403 when suspended. */
  mint(appId: number, installationId: number, nowMs: number, lifetimeSeconds: number): MintResult {
    const installation = this.installation(installationId);
    if (installation === undefined || installation.appId !== appId) return { ok: false, status: 404 };
    if (installation.suspendedAt !== null) return { ok: false, status: 403 };
    const app = this.apps.get(appId)!;
    if (this.tokens.size >= 10_000) this.sweep(nowMs);
    const value = tokenValue();
    const login = `${app.slug}[bot]`;
    const viewer: Viewer = {
      token: { token: value, login, scopes: [] },
      login: login.toLowerCase(),
      hasRepoScope: false,
      scopesHeader: '',
      key: `installation|${installation.id}`,
      installation,
    };
    // expires_at is written in whole seconds: the token ends exactly then.
    const token: InstallationToken = {
      value,
      installation,
      expiresAtMs: Math.floor((nowMs + lifetimeSeconds * 1000) / 1000) * 1000,
      viewer,
    };
    this.tokens.set(value, token);
    return { ok: true, token };
  }

  /** What an Authorization header means here: an App's JWT, a live installation token, or nothing the Apps know. */
  authenticate(header: string, nowMs: number): Credential | undefined {
    const match = /^\s*(\S+)\s+(\S+)\s*$/.exec(header);
    if (match === null) return undefined;
    const scheme = match[1]!.toLowerCase();
    const value = match[2]!;
    if (scheme === 'bearer' && looksLikeJwt(value)) return this.jwtCredential(value, header, nowMs);
    if (scheme !== 'bearer' && scheme !== 'token') return undefined;
    const token = this.tokens.get(value);
    if (token === undefined) return undefined;
    const { installation } = token;
    if (nowMs >= token.expiresAtMs || installation.deleted || installation.suspendedAt !== null) {
      this.tokens.delete(value);
      return undefined;
    }
    return { kind: 'token', viewer: token.viewer, authorization: header };
  }

  /** The budget of a quota key that belongs to an installation with its own rate limit. */
  quotaLimit(key: string): number | undefined {
    if (!key.startsWith('installation:')) return undefined;
    return this.installations.get(Number(key.slice('installation:'.length)))?.rateLimit ?? undefined;
  }

  /** Live tokens of an installation (for /__fake/apps). */
  liveTokens(installation: FakeInstallation, nowMs: number): number {
    let count = 0;
    for (const token of this.tokens.values()) if (token.installation === installation && nowMs < token.expiresAtMs) count++;
    return count;
  }

  private jwtCredential(jwt: string, header: string, nowMs: number): Credential {
    let signed = this.signatures.get(jwt);
    if (signed === undefined) {
      signed = checkSignature(jwt, (issuer) => this.findApp(issuer));
      if (this.signatures.size >= SIGNATURE_MEMO_MAX) this.signatures.clear();
      this.signatures.set(jwt, signed);
    }
    if (!signed.ok) return { kind: 'refused', status: signed.status, message: signed.message };
    const late = checkClaimTimes(signed.claims, Math.floor(nowMs / 1000));
    if (late !== null) return { kind: 'refused', status: late.status, message: late.message };
    return { kind: 'app', app: signed.app, authorization: header };
  }

  private revokeTokens(installation: FakeInstallation): void {
    for (const [value, token] of this.tokens) if (token.installation === installation) this.tokens.delete(value);
  }

  private sweep(nowMs: number): void {
    for (const [value, token] of this.tokens) if (nowMs >= token.expiresAtMs) this.tokens.delete(value);
  }
}
