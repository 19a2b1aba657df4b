/**
 * Verification of a GitHub App's JSON Web Token, as GitHub does it ("Generating a JSON Web Token
 * (JWT) for a GitHub App"): RS256 only, signed with the private key of the App that `iss` names,
 * `iat` not in the future (60 s of clock drift allowed), `exp` in the future and at most ten
 * minutes away (from `iat` and from now). Each refusal carries GitHub's own message:
 *
 *   401 A JSON web token could not be decoded      not three base64url JSON parts, an algorithm other
 *                                                  than RS256 (`none` included), no `iss`, a bad signature
 *   404 Integration not found                      `iss` names no App
 *   401 'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued
 *   401 'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires
 *   401 'Expiration time' claim ('exp') is too far in the future
 *
 * Pure: the App lookup and the time are passed in (signature checking is computation, no I/O).
 */
import { verify, type KeyObject } from 'node:crypto';

export const JWT_MESSAGES = {
  undecodable: 'A JSON web token could not be decoded',
  unknownApp: 'Integration not found',
  issuedAt: "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
  expired: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
  tooLong: "'Expiration time' claim ('exp') is too far in the future",
} as const;

/** How far in the future `iat` may be (GitHub's allowance for clock drift). */
export const CLOCK_DRIFT_SECONDS = 60;
/** The longest a JWT may live: `exp` at most this long after `iat`, and after now. */
export const MAX_JWT_SECONDS = 600;

/** What the verifier needs of an App: its id and the public half of its key. */
export interface JwtApp {
  id: number;
  publicKey: KeyObject;
}

export interface JwtClaims {
  iat: unknown;
  exp: unknown;
  iss: unknown;
}

export type JwtRefusal = { ok: false; status: 401 | 404; message: string };
export type SignatureCheck<App extends JwtApp> = { ok: true; app: App; claims: JwtClaims } | JwtRefusal;
export type JwtCheck<App extends JwtApp> = { ok: true; app: App } | JwtRefusal;

const JWT_RE = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const refuse = (status: 401 | 404, message: string): JwtRefusal => ({ ok: false, status, message });

/**
 * Whether a credential is shaped like a JWT (three base64url parts, the first a JSON object, the
 * last possibly empty as in an unsigned `alg: none` token): it is then verified as one.
 */
export function looksLikeJwt(value: string): boolean {
  return JWT_RE.test(value);
}

function jsonObject(segment: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Decodes the token, finds the App its `iss` names and checks the RS256 signature with that App's
 * key. The claims' times are checked apart (checkClaimTimes), so that this part, the costly one,
 * can be remembered per token.
 */
export function checkSignature<App extends JwtApp>(
  jwt: string,
  findApp: (issuer: number | string) => App | undefined,
): SignatureCheck<App> {
  if (jwt.length > 8192 || !looksLikeJwt(jwt)) return refuse(401, JWT_MESSAGES.undecodable);
  const [headerPart = '', payloadPart = '', signaturePart = ''] = jwt.split('.');
  const header = jsonObject(headerPart);
  const payload = jsonObject(payloadPart);
  if (header === null || payload === null || header.alg !== 'RS256') return refuse(401, JWT_MESSAGES.undecodable);
  const issuer = payload.iss;
  if (!(typeof issuer === 'number' && Number.isInteger(issuer)) && !(typeof issuer === 'string' && issuer !== '')) {
    return refuse(401, JWT_MESSAGES.undecodable);
  }
  const app = findApp(issuer);
  if (app === undefined) return refuse(404, JWT_MESSAGES.unknownApp);
  let valid = false;
  try {
    valid = verify('RSA-SHA256', Buffer.from(`${headerPart}.${payloadPart}`), app.publicKey, Buffer.from(signaturePart, 'base64url'));
  } catch {
    valid = false;
  }
  if (!valid) return refuse(401, JWT_MESSAGES.undecodable);
  return { ok: true, app, claims: { iat: payload.iat, exp: payload.exp, iss: issuer } };
}

/** The time rules, at `nowSeconds` (epoch seconds): null when the token may be used now. */
export function checkClaimTimes(claims: JwtClaims, nowSeconds: number): JwtRefusal | null {
  const { iat, exp } = claims;
  if (typeof iat !== 'number' || !Number.isInteger(iat) || iat > nowSeconds + CLOCK_DRIFT_SECONDS) {
    return refuse(401, JWT_MESSAGES.issuedAt);
  }
  if (typeof exp !== 'number' || !Number.isFinite(exp) || exp <= nowSeconds) return refuse(401, JWT_MESSAGES.expired);
  if (exp - iat > MAX_JWT_SECONDS || exp > nowSeconds + MAX_JWT_SECONDS) return refuse(401, JWT_MESSAGES.tooLong);
  return null;
}

/** The whole verification: signature, then times. */
export function verifyAppJwt<App extends JwtApp>(
  jwt: string,
  findApp: (issuer: number | string) => App | undefined,
  nowSeconds: number,
): JwtCheck<App> {
  const signed = checkSignature(jwt, findApp);
  if (!signed.ok) return signed;
  return checkClaimTimes(signed.claims, nowSeconds) ?? { ok: true, app: signed.app };
}
