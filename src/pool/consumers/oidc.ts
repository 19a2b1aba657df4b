/**
 * OIDC identities: a consumer that already has an identity (a GitHub Actions job's OIDC token, a
 * Kubernetes pod's projected service-account token) presents its token where a consumer key goes.
 * The token is verified with jose against the issuer its (unverified) `iss` names, matched exactly
 * against `consumers.oidc`: the signature against the issuer's JWKS (`jwks_url`, else the issuer's
 * discovery document), `iss`, `aud`, `exp` (required) and `nbf` with at most 60 s of leeway, and
 * asymmetric algorithms only (no `none`, no HMAC: a public key is never a shared secret). The keys
 * are oidc-keys.ts's: kept, fetched again for a rotated key, and a failed fetch remembered.
 *
 * A verified token is remembered until its `exp` under the SHA-256 of the token (never the token),
 * in a memo bounded in bytes: its next request costs one digest and one lookup. The consumer's
 * name is the `name_claim`'s value; its fair-share account is the issuer's name (one weight per
 * issuer: a flood of repositories grows no fair-share table), and at most `max_names` distinct
 * names per issuer per process label metrics (later ones are `<issuer>:other`).
 */
import { hash } from 'node:crypto';
import { decodeJwt, errors as jose, jwtVerify, type JWTPayload } from 'jose';
import { createMemo, type Memo } from '../../platform/bytes.js';
import type { OidcIssuerConfig } from '../../platform/config/schema.js';
import { bindScope } from '../rules/allow.js';
import type { ConsumerIdentity } from './consumers.js';
import { IssuerKeys } from './oidc-keys.js';

/** A configured issuer (consumers.oidc[]). */
export type OidcIssuer = Pick<
  OidcIssuerConfig,
  'name' | 'issuer' | 'audience' | 'jwks_url' | 'name_claim' | 'allow' | 'required_claims' | 'max_names'
>;

/** What a presented token is: a consumer, a refusal (401 a failed check, 403 a claim its scope refuses), or not an OIDC token of a configured issuer. */
export type OidcResult =
  | { readonly kind: 'consumer'; readonly identity: ConsumerIdentity }
  | { readonly kind: 'refused'; readonly reason: 'token'; readonly check: string }
  | { readonly kind: 'refused'; readonly reason: 'claim'; readonly consumer: string; readonly claim: string }
  | { readonly kind: 'not-ours' };

export interface OidcVerifier {
  /** Whether a value has a JWT's shape (three base64url parts). */
  looksLikeToken(value: string): boolean;
  /** The token's issuer is a configured one (unverified: only decides whether the token is ours to check). */
  ours(token: string): boolean;
  /** A remembered token answers at once; else the verification's promise. */
  verify(token: string): OidcResult | Promise<OidcResult>;
  readonly memoBytes: number;
}

/** Algorithms a token may be signed with: asymmetric ones only. */
export const OIDC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
export const CLOCK_TOLERANCE_SECONDS = 60;
/** The longest token looked at (GitHub's and Kubernetes' are 1-2 KB). */
const MAX_TOKEN_CHARS = 16 * 1024;
const JWT_SHAPE = /^[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*$/;
/** A name claim's value as a consumer name: printable, no spaces, not too long. */
const NAME_VALUE = /^[A-Za-z0-9._:@/-]{1,200}$/;
export const OIDC_MEMO_BYTES = 4 * 1024 * 1024;

interface Remembered {
  readonly result: OidcResult;
  /** Epoch ms after which the token is no longer valid. */
  readonly until: number;
}

export interface OidcOptions {
  /** Epoch ms (tests). */
  readonly now?: () => number;
  /** The least time between two key fetches for unknown kids (default 30 s). */
  readonly cooldownMs?: number;
  /** Each key or discovery fetch's time limit (default 5 s). */
  readonly timeoutMs?: number;
}

/** Which check a failed verification failed, in words that never quote the token. */
export function failedCheck(err: unknown): string {
  if (err instanceof jose.JWTExpired) return 'token expired';
  if (err instanceof jose.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return 'wrong audience';
    if (err.claim === 'nbf') return 'token not yet valid';
    if (err.claim === 'iss') return 'wrong issuer';
    if (err.claim === 'exp') return 'token has no expiry';
    return `claim ${err.claim} failed`;
  }
  if (err instanceof jose.JOSEAlgNotAllowed || err instanceof jose.JOSENotSupported) return 'algorithm not allowed';
  if (err instanceof jose.JWSSignatureVerificationFailed) return 'bad signature';
  if (err instanceof jose.JWKSNoMatchingKey) return "no key of the issuer's key set matches the token";
  if (err instanceof jose.JWSInvalid || err instanceof jose.JWTInvalid) return 'malformed token';
  return "could not verify the token: the issuer's keys could not be fetched";
}

/** The unverified payload of a token, or undefined when it is not a JWT. */
function peek(token: string): JWTPayload | undefined {
  try {
    return decodeJwt(token);
  } catch {
    return undefined;
  }
}

export function createOidcVerifier(issuers: readonly OidcIssuer[], options: OidcOptions = {}): OidcVerifier {
  const now = options.now ?? Date.now;
  const byIssuer = new Map(
    issuers.map((issuer) => [
      issuer.issuer,
      {
        cfg: issuer,
        keys: new IssuerKeys({
          issuer: issuer.issuer,
          jwksUrl: issuer.jwks_url,
          cooldownMs: options.cooldownMs ?? 30_000,
          timeoutMs: options.timeoutMs,
          now,
        }),
        names: new Set<string>(),
      },
    ]),
  );
  const memo: Memo<string, Remembered> = createMemo<string, Remembered>(OIDC_MEMO_BYTES, (key) => key.length * 2 + 1024);

  /** The consumer name a verified token labels as (bounded per issuer). */
  const labelOf = (entry: { cfg: OidcIssuer; names: Set<string> }, value: string): string => {
    if (entry.names.has(value)) return value;
    if (entry.names.size >= entry.cfg.max_names) return `${entry.cfg.name}:other`;
    entry.names.add(value);
    return value;
  };

  const judge = (entry: { cfg: OidcIssuer; names: Set<string> }, payload: JWTPayload): OidcResult => {
    const { cfg } = entry;
    const value = payload[cfg.name_claim];
    if (typeof value !== 'string' || !NAME_VALUE.test(value))
      return { kind: 'refused', reason: 'token', check: `claim ${cfg.name_claim} missing or not a name` };
    for (const { claim, values } of cfg.required_claims) {
      const got = payload[claim];
      if (typeof got !== 'string' || !values.includes(got))
        return { kind: 'refused', reason: 'token', check: `claim ${claim} not allowed` };
    }
    const name = labelOf(entry, value);
    const scope = bindScope(cfg.allow, payload);
    if ('refusedClaim' in scope) return { kind: 'refused', reason: 'claim', consumer: name, claim: scope.refusedClaim };
    return { kind: 'consumer', identity: { kind: 'consumer', name, account: cfg.name, scope } };
  };

  const check = async (token: string, digest: string, iss: string): Promise<OidcResult> => {
    const entry = byIssuer.get(iss)!;
    try {
      const { payload } = await jwtVerify(token, entry.keys.getKey, {
        issuer: entry.cfg.issuer,
        audience: entry.cfg.audience,
        algorithms: OIDC_ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp'],
        currentDate: new Date(now()),
      });
      const result = judge(entry, payload);
      if (result.kind !== 'refused' || result.reason === 'claim')
        memo.set(digest, { result, until: (payload.exp ?? 0) * 1000 + CLOCK_TOLERANCE_SECONDS * 1000 });
      return result;
    } catch (err) {
      return { kind: 'refused', reason: 'token', check: failedCheck(err) };
    }
  };

  return {
    looksLikeToken: (value) => value.length <= MAX_TOKEN_CHARS && JWT_SHAPE.test(value),
    ours(token) {
      const iss = peek(token)?.iss;
      return iss !== undefined && byIssuer.has(iss);
    },
    verify(token) {
      const digest = hash('sha256', token, 'base64');
      const known = memo.get(digest);
      if (known !== undefined) {
        if (now() < known.until) return known.result;
        memo.delete(digest);
      }
      const payload = peek(token);
      if (payload === undefined) return { kind: 'refused', reason: 'token', check: 'malformed token' };
      if (payload.iss === undefined || !byIssuer.has(payload.iss)) return { kind: 'not-ours' };
      return check(token, digest, payload.iss);
    },
    get memoBytes() {
      return memo.bytes;
    },
  };
}
