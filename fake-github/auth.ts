/**
 * Credentials and access rules.
 *
 * Accepted forms of the Authorization header: `token T`, `Bearer T`, and `Basic base64(user:T)`
 * (the token in the password position; the user part is ignored). Scheme names are
 * case-insensitive. Anything else that is non-empty is "invalid" (401 Bad credentials).
 *
 * Access: a private repository is visible only to a token that has the `repo` scope AND whose
 * login owns the repository or is a member of the owning organization.
 */
import type { FakeApp } from './app-records.js';
import type { Repo } from './data.js';
import type { FakeToken } from './tokens.js';

/** What an installation token may reach besides public repositories (apps.ts). */
export interface InstallationGrant {
  id: number;
  covers(repo: Repo): boolean;
}

export interface Viewer {
  token: FakeToken;
  /** Lower-case login. */
  login: string;
  hasRepoScope: boolean;
  /** X-OAuth-Scopes value. */
  scopesHeader: string;
  /** Distinguishes bodies that depend on who is asking (permissions, private items). */
  key: string;
  /** Set for an installation token: the bot of a GitHub App (apps.ts). */
  installation?: InstallationGrant;
}

/**
 * Who is calling: nobody, a bad credential, a token (a personal one or an installation's), a GitHub
 * App with a valid JWT, or a JWT that GitHub would refuse (its status and message: jwt.ts).
 */
export type Credential =
  | { kind: 'anonymous' }
  | { kind: 'invalid' }
  | { kind: 'token'; viewer: Viewer; authorization: string }
  | { kind: 'app'; app: FakeApp; authorization: string }
  | { kind: 'refused'; status: 401 | 404; message: string };

const ANONYMOUS: Credential = { kind: 'anonymous' };
const INVALID: Credential = { kind: 'invalid' };

/** Extracts the token from an Authorization header value; null when malformed. */
export function tokenFromAuthorization(header: string): string | null {
  const value = header.trim();
  const sp = value.indexOf(' ');
  if (sp <= 0) return null;
  const scheme = value.slice(0, sp).toLowerCase();
  const rest = value.slice(sp + 1).trim();
  if (rest === '' || rest.includes(' ')) return null;
  if (scheme === 'token' || scheme === 'bearer') return rest;
  if (scheme === 'basic') {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(rest)) return null;
    const decoded = Buffer.from(rest, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    const password = decoded.slice(colon + 1);
    return password === '' ? null : password;
  }
  return null;
}

export class Credentials {
  private readonly byToken = new Map<string, Viewer>();
  /** Memo of header value → credential; bounded. */
  private readonly memo = new Map<string, Credential>();
  /** Token values revoked at runtime (POST /__fake/tokens): they answer 401 Bad credentials everywhere. */
  private readonly revoked = new Set<string>();

  constructor(tokens: FakeToken[]) {
    for (const token of tokens) {
      const hasRepoScope = token.scopes.includes('repo');
      this.byToken.set(token.token, {
        token,
        login: token.login.toLowerCase(),
        hasRepoScope,
        scopesHeader: token.scopes.join(', '),
        key: `${token.login.toLowerCase()}|${hasRepoScope ? 'repo' : 'public'}`,
      });
    }
  }

  resolve(header: string | undefined): Credential {
    if (header === undefined || header.trim() === '') return ANONYMOUS;
    let cred = this.memo.get(header);
    if (cred === undefined) {
      const token = tokenFromAuthorization(header);
      const viewer = token === null ? undefined : this.byToken.get(token);
      cred = viewer ? { kind: 'token', viewer, authorization: header } : INVALID;
      if (this.memo.size > 10_000) this.memo.clear();
      this.memo.set(header, cred);
    }
    return cred.kind === 'token' && this.revoked.size > 0 && this.revoked.has(cred.viewer.token.token) ? INVALID : cred;
  }

  /**
   * Revokes (or restores) the configured tokens that match `selector` (a token value or a login);
   * returns how many matched.
   */
  setRevoked(selector: string, revoked: boolean): number {
    let matched = 0;
    for (const viewer of this.byToken.values()) {
      if (!this.matches(viewer, selector)) continue;
      matched++;
      if (revoked) this.revoked.add(viewer.token.token);
      else this.revoked.delete(viewer.token.token);
    }
    return matched;
  }

  /** How many configured tokens are revoked now. */
  revokedCount(): number {
    return this.revoked.size;
  }

  /** Every revoked token is valid again (POST /__fake/reset). */
  restoreAll(): void {
    this.revoked.clear();
  }

  /** Finds a token by its value or by login (for control endpoints). */
  matches(viewer: Viewer | null, selector: string): boolean {
    if (selector === 'anonymous') return viewer === null;
    if (viewer === null) return false;
    return viewer.token.token === selector || viewer.login === selector.toLowerCase();
  }
}

/** Whether the login belongs to the repository's owner (itself, or member of the organization). */
export function isAffiliated(login: string, repo: Repo): boolean {
  const owner = repo.owner;
  return owner.login.toLowerCase() === login || (owner.type === 'Organization' && owner.members.has(login));
}

export function canSee(viewer: Viewer | null, repo: Repo): boolean {
  if (!repo.private) return true;
  if (viewer === null) return false;
  if (viewer.installation !== undefined) return viewer.installation.covers(repo);
  return viewer.hasRepoScope && isAffiliated(viewer.login, repo);
}

/** The label of a credential in stats and selectors: a token's login, `app/<slug>` for an App's JWT, else its kind. */
export function credentialLabel(cred: Credential): string {
  if (cred.kind === 'token') return cred.viewer.token.login;
  if (cred.kind === 'app') return `app/${cred.app.slug}`;
  return cred.kind === 'refused' ? 'invalid' : cred.kind;
}

export type PermissionClass = 'none' | 'admin' | 'write' | 'read';

/** The `permissions` object GitHub adds to repositories on authenticated requests. */
export function permissionClass(viewer: Viewer | null, repo: Repo): PermissionClass {
  if (viewer === null) return 'none';
  if (repo.owner.login.toLowerCase() === viewer.login) return 'admin';
  if (repo.owner.type === 'Organization' && repo.owner.members.has(viewer.login)) return 'write';
  return 'read';
}
