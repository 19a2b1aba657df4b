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
 * What the gate found: a consumer (a key's, with where the key was; or an OIDC token's, and where
 * the token was), nobody it knows, or a refusal.
 */
export type Identified =
  | {
      readonly kind: 'consumer';
      readonly identity: ConsumerIdentity;
      readonly inAuthorization: boolean;
      readonly oidc?: OidcPresented | undefined;
    }
  | { readonly kind: 'none' }
  | { readonly kind: 'refused'; readonly refusal: Refusal };

/**
 * A consumer the gate found, for resolveCredential (which takes the credential out of where it
 * was): a verified OIDC token's (`oidc`), or a key's, so the key is matched once per request.
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

const tokenRefusal = (check: string): Identified => ({
  kind: 'refused',
  refusal: { reply: errors.tokenRefused(check), consumer: UNKNOWN_CONSUMER, reason: 'token' },
});

/** An OIDC result as the gate's answer. */
function fromOidc(result: OidcResult, inAuthorization: boolean): Identified {
  if (result.kind === 'consumer')
    return { kind: 'consumer', identity: result.identity, inAuthorization, oidc: { identity: result.identity, inAuthorization } };
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
 * configured OIDC issuer (verified, or remembered: oidc.ts). Headers are left as they are. A token
 * in X-Etagere-Key from an issuer not configured is refused; in Authorization it is the client's
 * own credential (a GitHub App's JWT, say).
 */
export function identify(
  headers: IncomingHttpHeaders,
  consumers: Consumers,
  oidc: OidcVerifier | undefined,
  connection?: object,
): Identified | Promise<Identified> {
  const keyHeader = headers[CONSUMER_KEY_HEADER];
  const key = (Array.isArray(keyHeader) ? keyHeader[0] : keyHeader)?.trim();
  if (key !== undefined) {
    const identity = consumers.match(key, connection);
    if (identity.kind === 'consumer') return { kind: 'consumer', identity, inAuthorization: false };
    if (oidc?.looksLikeToken(key) === true) return mapped(oidc.verify(key), false);
  }
  const authorization = headers.authorization;
  if (authorization === undefined || authorization.trim().length === 0) return NOBODY;
  const inAuthorization = consumers.inAuthorization(authorization, connection);
  if (inAuthorization.kind === 'consumer') return { kind: 'consumer', identity: inAuthorization, inAuthorization: true };
  if (oidc === undefined) return NOBODY;
  for (const value of authorizationValues(authorization))
    if (oidc.looksLikeToken(value) && oidc.ours(value)) return mapped(oidc.verify(value), true);
  return NOBODY;
}

/** A scoped consumer's request that no rule allows: the refusal; undefined when it may go on. */
export function scopeRefusal(consumer: ConsumerIdentity, method: string, apiPath: string): Refusal | undefined {
  if (consumer.scope === undefined || allows(consumer.scope, method, apiPath)) return undefined;
  return { reply: errors.scopeRefused(consumer.name, method), consumer: consumer.name, reason: 'scope' };
}

/** The gate's verdict on an identified request: a refusal, or go on (with the consumer it found: an OIDC token's, or a key's). */
export function verdict(
  identified: Identified,
  method: string,
  apiPath: string,
): { refusal?: Refusal; oidc?: OidcPresented | undefined; key?: Presented | undefined } {
  if (identified.kind === 'refused') return { refusal: identified.refusal };
  if (identified.kind === 'none') return {};
  const refusal = scopeRefusal(identified.identity, method, apiPath);
  if (refusal !== undefined) return { refusal };
  return identified.oidc === undefined ? { key: identified } : { oidc: identified.oidc };
}
