/**
 * The JSON Web Token a GitHub App authenticates with, as GitHub documents it ("Generating a JSON
 * Web Token (JWT) for a GitHub App"): RS256, `iat` a minute in the past (clock drift), `exp` nine
 * minutes ahead (ten minutes after `iat`, GitHub's maximum), `iss` the App id as a number.
 *
 * Pure: the time is passed in, and signing with a key already read is computation. The key is
 * read once (appPrivateKey) into a KeyObject; neither the key nor a JWT ever goes into an error.
 */
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';

/** `iat` is set this far back, so that a server whose clock is a little behind ours still accepts it. */
export const JWT_BACKDATE_SECONDS = 60;
/** `exp` is this far ahead of now: `exp - iat` is then 600 s, the most GitHub allows. */
export const JWT_AHEAD_SECONDS = 540;

export class AppKeyError extends Error {
  override name = 'AppKeyError';
}

/**
 * An App's private key from its PEM text (PKCS#1 as GitHub hands it out, or PKCS#8). Throws an
 * AppKeyError that says what is wrong and never quotes the text.
 */
export function appPrivateKey(pem: string): KeyObject {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) throw new AppKeyError('not a PEM private key (no "BEGIN ... PRIVATE KEY" line)');
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new AppKeyError('not a readable PEM private key (encrypted, truncated or damaged)');
  }
  if (key.asymmetricKeyType !== 'rsa')
    throw new AppKeyError(`a ${key.asymmetricKeyType ?? 'non-RSA'} key; a GitHub App key is RSA (RS256)`);
  return key;
}

export interface AppJwtClaims {
  iat: number;
  exp: number;
  iss: number;
}

/** The claims of a JWT made at `nowMs`. */
export function appJwtClaims(appId: number, nowMs: number): AppJwtClaims {
  const now = Math.floor(nowMs / 1000);
  return { iat: now - JWT_BACKDATE_SECONDS, exp: now + JWT_AHEAD_SECONDS, iss: appId };
}

const HEADER = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT' })).toString('base64url');

/** The App's JWT at `nowMs`: `header.claims.signature`, RS256-signed with its private key. */
export function appJwt(appId: number, key: KeyObject, nowMs: number): string {
  const unsigned = `${HEADER}.${Buffer.from(JSON.stringify(appJwtClaims(appId, nowMs))).toString('base64url')}`;
  return `${unsigned}.${sign('RSA-SHA256', Buffer.from(unsigned), key).toString('base64url')}`;
}
