/**
 * Consumer access control for the token pool: who may spend it. A consumer presents its key as
 * `X-Etagere-Key: <key>` or as the user of Basic credentials (`curl -u <key>:`). Keys are
 * compared in constant time: every configured key is compared, always over SHA-256 digests of
 * equal length, so neither the position of a match nor a key's length shows in the timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export interface ConsumerKey {
  readonly name: string;
  readonly value: string;
}

export type Identity =
  /** No consumer credential at all. */
  | { kind: 'none' }
  /** A consumer credential that matched `name`. */
  | { kind: 'consumer'; name: string }
  /** A consumer credential that matched nothing. */
  | { kind: 'unknown' };

export const CONSUMER_KEY_HEADER = 'x-etagere-key';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

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
  /** Matches a presented key against every configured key. */
  match(presented: string): Identity;
  readonly size: number;
}

export function createConsumers(keys: readonly ConsumerKey[]): Consumers {
  const table = keys.map((k) => ({ name: k.name, digest: digest(k.value) }));
  return {
    size: table.length,
    match(presented) {
      const presentedDigest = digest(presented);
      let found: string | undefined;
      for (const key of table) {
        // No early exit: every key is compared whatever matched before.
        if (timingSafeEqual(presentedDigest, key.digest) && found === undefined) found = key.name;
      }
      return found === undefined ? { kind: 'unknown' } : { kind: 'consumer', name: found };
    },
  };
}
