/**
 * The consumer gate: before a request takes any path (a cache lookup, GraphQL, a pass-through),
 * the consumer its credentials name is checked against its scope (src/pool/rules/allow.ts). A
 * refusal is a value (the reply and what the rejections counter counts); nothing of the request
 * is looked up or sent. The headers are only read here: resolveCredential (credential.ts) takes
 * the consumer credentials out afterwards.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../../http/errors.js';
import type { ErrorReply } from '../../http/reply.js';
import { allows } from '../rules/allow.js';
import { authorizationValues, CONSUMER_KEY_HEADER, type ConsumerIdentity, type Consumers } from './consumers.js';
import type { OidcResult, OidcVerifier } from './oidc.js';
import { githubCredential } from '../rules/github-credential.js';

/** etagere_consumer_rejections_total's reasons. */
export type RejectionReason = 'key' | 'token' | 'scope' | 'claim';

/** A request the gate refuses: the reply, and the consumer (its label; "-" when unknown) and reason it counts for. */
export interface Refusal {
  readonly reply: ErrorReply;
  readonly consumer: string;
  readonly reason: RejectionReason;
}

/** The consumer label of a request refused before any consumer was known. */
export const UNKNOWN_CONSUMER = '-';

/**
 * What the gate found: a consumer (a key's, or an OIDC token's, and where the token was), nobody
 * it knows, or a refusal. `foreign`: Authorization holds a credential that is neither a consumer's
 * nor shaped like GitHub's (github-credential.ts), which never goes to a GitHub-like upstream.
 */
export type Identified =
  | {
      readonly kind: 'consumer';
      readonly identity: ConsumerIdentity;
      /** A key's consumer: the key was in Authorization (else in X-Etagere-Key). */
      readonly inAuthorization?: boolean;
      readonly oidc?: OidcPresented | undefined;
      readonly foreign?: boolean;
    }
  | { readonly kind: 'none'; readonly foreign?: boolean }
  | { readonly kind: 'refused'; readonly refusal: Refusal };

/**
 * A consumer whose key the gate matched, and where the key was: resolveCredential takes it as it is
 * (the key is matched once a request).
 */
export interface Presented {
  readonly identity: ConsumerIdentity;
  readonly inAuthorization: boolean;
}

/** A verified OIDC consumer, for resolveCredential (which takes the token out of where it was). */
export interface OidcPresented {
  readonly identity: ConsumerIdentity;
  readonly inAuthorization: boolean;
}

const NOBODY: Identified = { kind: 'none' };
const FOREIGN: Identified = { kind: 'none', foreign: true };
const UNKNOWN_KEY: Identified = {
  kind: 'refused',
  refusal: { reply: errors.consumerKeyUnknown(), consumer: UNKNOWN_CONSUMER, reason: 'key' },
};
const NOT_FORWARDED: Refusal = { reply: errors.credentialNotForwarded(), consumer: UNKNOWN_CONSUMER, reason: 'key' };

const tokenRefusal = (check: string): Identified => ({
  kind: 'refused',
  refusal: { reply: errors.tokenRefused(check), consumer: UNKNOWN_CONSUMER, reason: 'token' },
});

/** An OIDC result as the gate's answer. */
function fromOidc(result: OidcResult, inAuthorization: boolean): Identified {
  if (result.kind === 'consumer')
    return { kind: 'consumer', identity: result.identity, oidc: { identity: result.identity, inAuthorization } };
  if (result.kind === 'not-ours') return tokenRefusal('unknown issuer');
  if (result.reason === 'token') return tokenRefusal(result.check);
  return {
    kind: 'refused',
    refusal: { reply: errors.claimRefused(result.consumer, result.claim), consumer: result.consumer, reason: 'claim' },
  };
}

const mapped = (result: OidcResult | Promise<OidcResult>, inAuthorization: boolean): Identified | Promise<Identified> =>
  result instanceof Promise ? result.then((done) => fromOidc(done, inAuthorization)) : fromOidc(result, inAuthorization);

/**
 * The consumer a request's credentials name, X-Etagere-Key's first, else Authorization's: a key
 * (a digest and a lookup, or a constant-time comparison on the same connection), or a token of a
 * configured OIDC issuer (verified, or remembered: oidc.ts). Headers are left as they are. An
 * X-Etagere-Key that is no key is refused (a token in it from an issuer not configured too); an
 * Authorization that is neither a consumer's nor a GitHub credential (github-credential.ts) is
 * `foreign`.
 */
export function identify(
  headers: IncomingHttpHeaders,
  consumers: Consumers,
  oidc: OidcVerifier | undefined,
  connection?: object,
): Identified | Promise<Identified> {
  const keyHeader = headers[CONSUMER_KEY_HEADER];
  const key = (Array.isArray(keyHeader) ? keyHeader[0] : keyHeader)?.trim();
  const authorization = headers.authorization;
  if (key !== undefined && key.length > 0) {
    const identity = consumers.match(key, connection);
    const beside = besideKey(authorization, consumers, oidc, connection);
    if (identity.kind === 'consumer') {
      if (beside === 'foreign') return { kind: 'consumer', identity, inAuthorization: false, foreign: true };
      if (beside === 'oidc') return { kind: 'consumer', identity, oidc: { identity, inAuthorization: true } };
      return { kind: 'consumer', identity, inAuthorization: false };
    }
    if (oidc?.looksLikeToken(key) !== true) return UNKNOWN_KEY;
    const verified = mapped(oidc.verify(key), beside === 'oidc');
    if (beside !== 'foreign') return verified;
    return verified instanceof Promise ? verified.then(withForeign) : withForeign(verified);
  }
  if (authorization === undefined || authorization.trim().length === 0) return NOBODY;
  const inAuthorization = consumers.inAuthorization(authorization, connection);
  if (inAuthorization.kind === 'consumer') return { kind: 'consumer', identity: inAuthorization, inAuthorization: true };
  if (oidc !== undefined)
    for (const value of authorizationValues(authorization))
      if (oidc.looksLikeToken(value) && oidc.ours(value)) return mapped(oidc.verify(value), true);
  return githubCredential(authorization) ? NOBODY : FOREIGN;
}

/** An identified request whose Authorization may not go upstream (a refusal stays as it is). */
const withForeign = (identified: Identified): Identified => (identified.kind === 'refused' ? identified : { ...identified, foreign: true });

/**
 * What an Authorization next to a consumer credential in X-Etagere-Key holds: nothing that goes
 * upstream (`none`: absent, a consumer key, which is taken out, or a GitHub credential, the
 * client's own), a token of a configured OIDC issuer (`oidc`: taken out, never forwarded; Octokit
 * sends its `auth` there besides), or a credential that may not go upstream (`foreign`).
 */
function besideKey(
  authorization: string | undefined,
  consumers: Consumers,
  oidc: OidcVerifier | undefined,
  connection: object | undefined,
): 'none' | 'oidc' | 'foreign' {
  if (authorization === undefined || authorization.trim().length === 0) return 'none';
  if (consumers.inAuthorization(authorization, connection).kind === 'consumer' || githubCredential(authorization)) return 'none';
  if (oidc !== undefined && authorizationValues(authorization).some((value) => oidc.looksLikeToken(value) && oidc.ours(value)))
    return 'oidc';
  return 'foreign';
}

/** A scoped consumer's request that no rule allows: the refusal; undefined when it may go on. */
export function scopeRefusal(consumer: ConsumerIdentity, method: string, apiPath: string): Refusal | undefined {
  if (consumer.scope === undefined || allows(consumer.scope, method, apiPath)) return undefined;
  return { reply: errors.scopeRefused(consumer.name, method), consumer: consumer.name, reason: 'scope' };
}

/**
 * The gate's verdict on an identified request: a refusal, or go on (with the consumer it found: an
 * OIDC token's, or a key's with where it was). `githubLike`: the upstream takes pool tokens
 * (token_pool), so a foreign credential would reach GitHub; other upstreams get their clients'
 * credentials as they are.
 */
export function verdict(
  identified: Identified,
  method: string,
  apiPath: string,
  githubLike = true,
): { refusal?: Refusal; oidc?: OidcPresented | undefined; key?: Presented | undefined } {
  if (identified.kind === 'refused') return { refusal: identified.refusal };
  if (identified.foreign === true && githubLike) return { refusal: NOT_FORWARDED };
  if (identified.kind === 'none') return {};
  const refusal = scopeRefusal(identified.identity, method, apiPath);
  if (refusal !== undefined) return { refusal };
  const { oidc, inAuthorization } = identified;
  if (oidc !== undefined || inAuthorization === undefined) return { oidc };
  return { key: { identity: identified.identity, inAuthorization } };
}
