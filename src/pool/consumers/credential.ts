/**
 * Whose credential a request travels upstream with:
 *   client     the client's own Authorization: its own cache partition, its own rate-limit headers;
 *   pool       a pool token (the request carried no credential of its own);
 *   anonymous  no credential at all.
 * With consumer access control on, only a known consumer key may use the pool: in X-Etagere-Key, or
 * in Authorization as `token`, `Bearer`, or the user or password of Basic credentials. A key never
 * travels upstream, wherever it was. An empty or blank Authorization counts as none.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { removeHeader, type HeaderRemoval } from '../../http/headers/hop-by-hop.js';
import { createMemo, type Memo } from '../../platform/bytes.js';
import { CONSUMER_KEY_HEADER, type ConsumerIdentity, type Consumers } from './consumers.js';
import type { OidcPresented, Presented } from './gate.js';

export type Credential =
  | { readonly kind: 'client' }
  /** `account`: the fair-share account when it is not the consumer's name (an OIDC issuer's). */
  | { readonly kind: 'pool'; readonly consumer: string | undefined; readonly account?: string | undefined }
  | { readonly kind: 'anonymous' };

export const CLIENT: Credential = { kind: 'client' };
export const ANONYMOUS_CREDENTIAL: Credential = { kind: 'anonymous' };
const POOL_OPEN: Credential = { kind: 'pool', consumer: undefined };

export interface CredentialRules {
  /** The upstream attaches pool tokens and the pool has tokens. */
  pooled: boolean;
  /** Consumer access control, when enabled. */
  consumers: Consumers | undefined;
  /** What a request without a known key gets when consumers are enabled. */
  unknown: 'reject' | 'anonymous';
  /** The consumers' pool credentials, made once each (services.ts); without it, made per request. */
  poolCredentials?: PoolCredentials | undefined;
}

/** Consumer name -> its pool credential (etagere_cache_bytes{tier="credential_memo"}). */
export type PoolCredentials = Memo<string, Credential>;

/** Bound of the credential memo: names are the configured consumers', so it holds them all. */
export const CREDENTIAL_MEMO_BYTES = 256 * 1024;
/** Counted per credential beyond its name's characters (the object, the slot). */
const CREDENTIAL_OVERHEAD = 128;

export const createPoolCredentials = (): PoolCredentials =>
  createMemo<string, Credential>(CREDENTIAL_MEMO_BYTES, (name) => 2 * name.length + CREDENTIAL_OVERHEAD);

function poolCredential(consumer: Named, memo: PoolCredentials | undefined): Credential {
  const key = consumer.account === undefined ? consumer.name : `${consumer.account}\n${consumer.name}`;
  let credential = memo?.get(key);
  if (credential === undefined) {
    credential =
      consumer.account === undefined
        ? { kind: 'pool', consumer: consumer.name }
        : { kind: 'pool', consumer: consumer.name, account: consumer.account };
    memo?.set(key, credential);
  }
  return credential;
}

/** A consumer as its credential names it. */
type Named = Pick<ConsumerIdentity, 'name' | 'account'>;

/**
 * undefined: reject with 401 (consumer access control). Removes consumer credentials from `headers`
 * (as `how` says). `connection` (the request's socket) lets a key sent again on one connection skip
 * its digest (consumers.ts). `oidc`: the consumer of a verified OIDC token (gate.ts), when no key
 * matched. `key`: the consumer whose key the gate matched, and where (gate.ts): not matched again.
 */
export function resolveCredential(
  headers: IncomingHttpHeaders,
  rules: CredentialRules,
  how: HeaderRemoval = 'delete',
  connection?: object,
  oidc?: OidcPresented,
  key?: Presented,
): Credential | undefined {
  // An empty or blank Authorization is no credential: it must not pass as a client's own one
  // (that would reach the upstream anonymously, past the consumer-key rules).
  if (headers.authorization !== undefined && headers.authorization.trim().length === 0) removeHeader(headers, 'authorization', how);
  const keyHeader = headers[CONSUMER_KEY_HEADER];
  if (keyHeader !== undefined) removeHeader(headers, CONSUMER_KEY_HEADER, how);
  const { consumers } = rules;
  if (consumers === undefined) {
    if (headers.authorization !== undefined) return CLIENT;
    return rules.pooled ? POOL_OPEN : ANONYMOUS_CREDENTIAL;
  }
  let consumer: Named | undefined =
    key === undefined
      ? takeConsumerKeys(headers, keyHeader, consumers, how, connection)
      : keyFound(headers, key, consumers, how, connection);
  if (oidc !== undefined) {
    // A token of a configured issuer in Authorization never goes upstream, whoever the request is for.
    if (oidc.inAuthorization) removeHeader(headers, 'authorization', how);
    consumer ??= oidc.identity;
  }
  if (headers.authorization !== undefined) return CLIENT;
  if (!rules.pooled) return ANONYMOUS_CREDENTIAL;
  if (consumer !== undefined) return poolCredential(consumer, rules.poolCredentials);
  return rules.unknown === 'anonymous' ? ANONYMOUS_CREDENTIAL : undefined;
}

/**
 * The consumer a request's keys name: X-Etagere-Key's first, else the key in Authorization. An
 * Authorization that carries a key in any position is removed (as `how` says), even next to an
 * X-Etagere-Key: it is a consumer's key, never an upstream credential.
 */
function takeConsumerKeys(
  headers: IncomingHttpHeaders,
  keyHeader: string | string[] | undefined,
  consumers: Consumers,
  how: HeaderRemoval,
  connection: object | undefined,
): Named | undefined {
  let consumer: Named | undefined;
  const key = Array.isArray(keyHeader) ? keyHeader[0] : keyHeader;
  if (key !== undefined) {
    const id = consumers.match(key.trim(), connection);
    if (id.kind === 'consumer') consumer = id;
  }
  const authorization = headers.authorization;
  if (authorization === undefined) return consumer;
  const inAuthorization = consumers.inAuthorization(authorization, connection);
  if (inAuthorization.kind !== 'consumer') return consumer;
  removeHeader(headers, 'authorization', how);
  return consumer ?? inAuthorization;
}

/**
 * The consumer of the key the gate matched: an Authorization that carries it, or another key next
 * to an X-Etagere-Key, is removed as `takeConsumerKeys` would (the same connection memo: no digest).
 */
function keyFound(
  headers: IncomingHttpHeaders,
  key: Presented,
  consumers: Consumers,
  how: HeaderRemoval,
  connection: object | undefined,
): Named {
  const authorization = headers.authorization;
  if (authorization !== undefined && (key.inAuthorization || consumers.inAuthorization(authorization, connection).kind === 'consumer'))
    removeHeader(headers, 'authorization', how);
  return key.identity;
}

/**
 * Takes every consumer key out of a passed-through request's headers: X-Etagere-Key, and an
 * Authorization that carries a key (or a verified OIDC token: `oidc`) in any position. Such
 * methods never use the pool, but no key may go upstream.
 */
export function dropConsumerKeys(
  headers: IncomingHttpHeaders,
  consumers: Consumers | undefined,
  connection?: object,
  oidc?: OidcPresented,
): void {
  if (headers[CONSUMER_KEY_HEADER] !== undefined) delete headers[CONSUMER_KEY_HEADER];
  const authorization = headers.authorization;
  if (authorization === undefined) return;
  if (
    oidc?.inAuthorization === true ||
    (consumers !== undefined && consumers.inAuthorization(authorization, connection).kind === 'consumer')
  )
    delete headers.authorization;
}
