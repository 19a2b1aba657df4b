/**
 * Pure rules about GitHub's answers to a GitHub App: what a refusal means (whose fault, and what
 * to do about it), the shapes of the installation list and of a minted token, which `Link` may be
 * followed with the App's JWT, and how much of GitHub's own message may be repeated.
 *
 *   401 (any)                                       app:          the JWT was refused (wrong app_id, a key that is
 *                                                                 not the App's, a clock more than a minute off)
 *   404 Integration not found                       app:          no App has this app_id
 *   404 on minting                                  installation: deleted, or not this App's
 *   403 This installation has been suspended        installation
 *   403/429 with x-ratelimit-remaining 0 or
 *           a secondary-limit message               rate-limited: the App's own budget
 *   anything else                                   upstream
 */

export type AppFailureKind = 'app' | 'installation' | 'rate-limited' | 'upstream' | 'network';

export interface AppAnswer {
  status: number;
  /** x-ratelimit-remaining, when the answer has it. */
  remaining: string | undefined;
  /** GitHub's `message`, already made safe (safeMessage). */
  message: string;
}

export interface Classified {
  kind: AppFailureKind;
  /** What it means, for the operator. */
  reason: string;
}

const SECONDARY = /secondary rate limit/i;

/** What a refusal of `GET /app/installations` (list) or of `POST .../access_tokens` (mint) means. */
export function classifyAppAnswer(operation: 'list' | 'mint', answer: AppAnswer): Classified {
  const { status, remaining, message } = answer;
  if (status === 401) {
    return {
      kind: 'app',
      reason: "the App JWT was refused: a wrong app_id, a private key that is not this App's, or a clock more than a minute off",
    };
  }
  if (status === 404 && /integration not found/i.test(message)) return { kind: 'app', reason: 'no GitHub App has this app_id' };
  if (status === 429 || (status === 403 && (remaining === '0' || SECONDARY.test(message)))) {
    return { kind: 'rate-limited', reason: "the App's own rate limit is spent; retried later" };
  }
  if (operation === 'mint' && status === 404)
    return { kind: 'installation', reason: "the installation does not exist (uninstalled, or not this App's)" };
  if (operation === 'mint' && status === 403) {
    return /suspended/i.test(message)
      ? { kind: 'installation', reason: 'the installation is suspended' }
      : { kind: 'installation', reason: 'GitHub refuses tokens for this installation' };
  }
  return { kind: 'upstream', reason: status >= 500 ? 'the upstream failed; retried later' : 'an unexpected answer' };
}

/** Anything shaped like a credential: a JWT, a GitHub token, a long run of base64. */
const CREDENTIAL_SHAPED = /eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9._-]*|gh[pousr]_[A-Za-z0-9_]+|github_pat_[A-Za-z0-9_]+|[A-Za-z0-9+/_=-]{32,}/g;

/** GitHub's `message` as a log line or an error may repeat it: a string, 200 characters at most, nothing credential-shaped, no control characters. */
export function safeMessage(body: unknown): string {
  const message = body !== null && typeof body === 'object' ? (body as { message?: unknown }).message : undefined;
  if (typeof message !== 'string' || message === '') return '(no message)';
  return message
    .replace(CREDENTIAL_SHAPED, '[…]')
    .replace(/[\u0000-\u001f\u007f]/g, ' ')
    .slice(0, 200);
}

export interface ListedInstallation {
  id: number;
  /** The account's login, when the answer names it. */
  account: string | null;
  suspended: boolean;
}

/** The installations of one page of `GET /app/installations`, or null when the body is not that list. */
export function parseInstallations(body: unknown): ListedInstallation[] | null {
  if (!Array.isArray(body)) return null;
  const out: ListedInstallation[] = [];
  for (const item of body) {
    if (item === null || typeof item !== 'object') return null;
    const { id, account, suspended_at: suspendedAt } = item as { id?: unknown; account?: unknown; suspended_at?: unknown };
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) return null;
    const login = account !== null && typeof account === 'object' ? (account as { login?: unknown }).login : undefined;
    out.push({
      id,
      account: typeof login === 'string' ? login.slice(0, 100) : null,
      suspended: suspendedAt !== null && suspendedAt !== undefined,
    });
  }
  return out;
}

export interface MintedToken {
  value: string;
  /** epoch ms */
  expiresAt: number;
}

/** The token of a `201` to `POST /app/installations/{id}/access_tokens`, or null when the body is not one (or already expired). */
export function parseMintedToken(body: unknown, nowMs: number): MintedToken | null {
  if (body === null || typeof body !== 'object') return null;
  const { token, expires_at: expiresAtText } = body as { token?: unknown; expires_at?: unknown };
  if (typeof token !== 'string' || !/^[\x21-\x7e]{1,1024}$/.test(token)) return null;
  if (typeof expiresAtText !== 'string') return null;
  const expiresAt = Date.parse(expiresAtText);
  if (!Number.isFinite(expiresAt) || expiresAt <= nowMs) return null;
  return { value: token, expiresAt };
}

/**
 * The `rel="next"` URL of a Link header. The App's JWT goes with it, so it is followed only on the
 * upstream's own origin and below its base path: anything else is `foreign`.
 */
export function nextPage(link: string | undefined, base: URL): { kind: 'none' } | { kind: 'next'; url: URL } | { kind: 'foreign' } {
  if (link === undefined) return { kind: 'none' };
  for (const part of link.split(',')) {
    const match = /<([^>]*)>\s*;\s*rel="?next"?/.exec(part);
    if (match === null) continue;
    let url: URL;
    try {
      url = new URL(match[1]!);
    } catch {
      return { kind: 'foreign' };
    }
    const prefix = base.pathname.replace(/\/$/, '');
    if (url.origin !== base.origin || !url.pathname.startsWith(`${prefix}/app/installations`)) return { kind: 'foreign' };
    return { kind: 'next', url };
  }
  return { kind: 'none' };
}
