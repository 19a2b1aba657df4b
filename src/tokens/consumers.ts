/**
 * Consumer access control for the token pool: who may spend it. A consumer presents its key as
 * `X-Etagere-Key: <key>` or as the user of Basic credentials (`curl -u <key>:`).
 *
 * A presented key costs one SHA-256 and one hash-table lookup, whatever the number of keys: the
 * table maps the SHA-256 digest of each configured key to its consumer, and the presented key's
 * digest is looked up in it. The lookup never compares the presented key itself, only its
 * digest, so its timing can tell an attacker at most how a guess's digest compares with a key's
 * digest (a hash-table bucket, a common prefix of two digests): that narrows nothing about the
 * key, since finding a value with a chosen digest prefix is a preimage search; and a key's length
 * does not show (every digest has the same length). Nothing is remembered of a key that matched
 * nothing, so spraying keys grows no memory.
 *
 * A client sends its key on every request of a keep-alive connection, so each connection remembers
 * the last key that matched on it (a WeakMap keyed by the socket: it goes with the connection). The
 * next request's key is compared with it in constant time (`sameKey`: every character of the
 * presented key is looked at, whatever the two have in common; its time depends on the presented
 * key's length alone), and only a difference costs the digest. Behind a front proxy that sends
 * several clients' requests over one connection, the remembered key may be another client's: the
 * comparison's timing says nothing about it, and only the same key gets its consumer.
 */
import { hash } from 'node:crypto';

export interface ConsumerKey {
  readonly name: string;
  readonly value: string;
}

export type Identity =
  /** No consumer credential at all. */
  | { readonly kind: 'none' }
  /** A consumer credential that matched `name` (one shared object per consumer). */
  | { readonly kind: 'consumer'; readonly name: string }
  /** A consumer credential that matched nothing. */
  | { readonly kind: 'unknown' };

export const CONSUMER_KEY_HEADER = 'x-etagere-key';

/** SHA-256 as base64, in one call (`crypto.hash`: no Hash object per request). */
const digest = (value: string): string => hash('sha256', value, 'base64');

/** The user part of `Authorization: Basic base64(user:password)`, or undefined. */
export function basicUser(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(authorization);
  if (match === null) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  return user.length > 0 ? user : undefined;
}

export interface Consumers {
  /**
   * The consumer a presented key belongs to: one digest and one lookup, or (the same key as the last
   * one that matched on `connection`) one constant-time comparison.
   */
  match(presented: string, connection?: object): Identity;
  readonly size: number;
}

const UNKNOWN: Identity = { kind: 'unknown' };

/**
 * Whether `presented` equals `known` (a key that matched), in a time that depends on the presented
 * key's length alone: no early exit, every character of the presented key compared. Keys of another
 * length are compared with themselves (the same work), and differ by their lengths.
 */
export function sameKey(presented: string, known: string): boolean {
  const other = presented.length === known.length ? known : presented;
  let diff = presented.length ^ known.length;
  for (let at = 0; at < presented.length; at++) diff |= presented.charCodeAt(at) ^ other.charCodeAt(at);
  return diff === 0;
}

/** The last key that matched on a connection, and its consumer. */
interface LastMatch {
  key: string;
  identity: Identity;
}

export function createConsumers(keys: readonly ConsumerKey[]): Consumers {
  const table = new Map<string, Identity>();
  for (const key of keys) {
    const at = digest(key.value);
    // Two consumers with one value: the first one listed, as before.
    if (!table.has(at)) table.set(at, { kind: 'consumer', name: key.name });
  }
  const lastMatch = new WeakMap<object, LastMatch>();
  return {
    size: keys.length,
    match(presented, connection) {
      const last = connection === undefined ? undefined : lastMatch.get(connection);
      if (last !== undefined && sameKey(presented, last.key)) return last.identity;
      const identity = table.get(digest(presented)) ?? UNKNOWN;
      if (connection !== undefined && identity.kind === 'consumer' && presented.length > 0) {
        if (last === undefined) lastMatch.set(connection, { key: presented, identity });
        else {
          last.key = presented;
          last.identity = identity;
        }
      }
      return identity;
    },
  };
}
