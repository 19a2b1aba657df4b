/**
 * Pure: whether an Authorization value is a credential GitHub could take, so that with consumer
 * keys on it may go upstream as the client's own. Anything else (a mistyped or retired consumer
 * key, often a near miss of a real one) is refused by the proxy and never leaves it.
 *
 * GitHub-shaped tokens: the `ghp_` (classic personal), `gho_` (OAuth), `ghu_` (App user), `ghs_`
 * (App installation and GITHUB_TOKEN, short or the long stateless JWT form: dots, `_` and `-`)
 * and `ghr_` (refresh) prefixes, `github_pat_` (fine-grained personal), and 40 hex digits (a
 * classic token of the old form, an OAuth App's secret). They are taken in these places:
 * - `token <t>` and `Bearer <t>`;
 * - Basic credentials whose password is one (`x-access-token:<t>`, `<user>:<t>`, an OAuth App's
 *   `<client id>:<client secret>`), or whose user is one with no password or `x-oauth-basic`;
 * - `Bearer <jwt>` signed RS256 whose `iss` is not a URL: a GitHub App authenticating as itself
 *   (its App id, or its client id). A JWT whose `iss` is a URL is an OIDC token: of a configured
 *   issuer it is a consumer identity (oidc.ts); of another issuer it is refused, not forwarded.
 */

const TOKEN = /^(?:gh[pousr]_[A-Za-z0-9._-]{36,4096}|github_pat_[A-Za-z0-9_]{22,4096}|[0-9A-Fa-f]{40})$/;
const JWT = /^([A-Za-z0-9_-]{2,1024})\.([A-Za-z0-9_-]{2,8192})\.[A-Za-z0-9_-]{2,2048}$/;

/** Whether a token is shaped like one GitHub issues. */
export function githubShapedToken(token: string): boolean {
  return TOKEN.test(token);
}

/** A base64url JSON object, or undefined. */
function jsonPart(part: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a JWT is shaped like a GitHub App's own (RS256, an `iss` that is an App id or client id, not a URL). Unverified. */
export function githubAppJwt(token: string): boolean {
  const parts = JWT.exec(token);
  if (parts === null) return false;
  if (jsonPart(parts[1]!)?.alg !== 'RS256') return false;
  const iss = jsonPart(parts[2]!)?.iss;
  return (typeof iss === 'number' && Number.isInteger(iss) && iss > 0) || (typeof iss === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(iss));
}

/** Basic credentials GitHub takes: a token as the password, or as the user with no password (or `x-oauth-basic`). */
function githubBasic(encoded: string): boolean {
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  const password = colon === -1 ? '' : decoded.slice(colon + 1);
  if (githubShapedToken(password)) return true;
  return githubShapedToken(user) && (password === '' || password === 'x-oauth-basic');
}

/** Whether an Authorization value is a credential GitHub could take (see above). */
export function githubCredential(authorization: string): boolean {
  const words = authorization.trim().split(/\s+/);
  if (words.length !== 2) return false;
  const scheme = words[0]!.toLowerCase();
  const credential = words[1]!;
  if (scheme === 'token') return githubShapedToken(credential);
  if (scheme === 'bearer') return githubShapedToken(credential) || githubAppJwt(credential);
  if (scheme === 'basic') return githubBasic(credential);
  return false;
}
