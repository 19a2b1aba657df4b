/**
 * Consumer access control for the token pool: who may spend it. A consumer presents its key in any
 * credential position: `X-Etagere-Key: <key>`, or in Authorization as `token <key>` (PyGithub's
 * `login_or_token`, Octokit's `auth`), `Bearer <key>`, or the user or the password of Basic
 * credentials (`curl -u <key>:`). A value equal to a key is that key wherever it is.
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
 *
 * An Authorization value is looked at the same way: each connection remembers the last one and what
 * it was (a key's consumer, or no key: a client's own token), so a client's own token costs one
 * constant-time comparison a request, and its digests once per connection (one slot per
 * connection, replaced by the next value: spraying values grows nothing).
 */
import { hash } from 'node:crypto';
import { compileScope, type AllowRule, type Scope } from '../rules/allow.js';

export interface ConsumerKey {
  readonly name: string;
  readonly value: string;
  /** What the key may use (src/pool/rules/allow.ts); undefined: everything. */
  readonly allow?: readonly AllowRule[] | undefined;
}

/** A known consumer: its name (logs, metrics), its fair-share account, and its scope when it has one. */
export interface ConsumerIdentity {
  readonly kind: 'consumer';
  readonly name: string;
  /** The fair-share account it spends from (a key's own name; an OIDC issuer's name); undefined: `name`. */
  readonly account?: string | undefined;
  /** undefined: full access. */
  readonly scope?: Scope | undefined;
}

export type Identity =
  /** No consumer credential at all. */
  | { readonly kind: 'none' }
  /** A consumer credential that matched `name` (one shared object per consumer). */
  | ConsumerIdentity
  /** A consumer credential that matched nothing. */
  | { readonly kind: 'unknown' };

export const CONSUMER_KEY_HEADER = 'x-etagere-key';

/** The longest Authorization value a connection remembers; a longer one is looked at on every request. */
const MAX_REMEMBERED_AUTHORIZATION = 4096;

/** SHA-256 as base64, in one call (`crypto.hash`: no Hash object per request). */
const digest = (value: string): string => hash('sha256', value, 'base64');

/**
 * The values of an Authorization header that may be a consumer key: each of its words (a key has no
 * spaces: the credentials after `token` or `Bearer`, a value sent without a scheme), and the user
 * and the password of Basic credentials.
 */
export function authorizationValues(authorization: string): string[] {
  const values = authorization.split(/\s+/).filter((word) => word.length > 0);
  if (values.length === 2 && values[0]!.toLowerCase() === 'basic') {
    const decoded = Buffer.from(values[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) values.push(decoded);
    else values.push(decoded.slice(0, colon), decoded.slice(colon + 1));
  }
  return values;
}

export interface Consumers {
  /**
   * The consumer a presented key belongs to: one digest and one lookup, or (the same key as the last
   * one that matched on `connection`) one constant-time comparison.
   */
  match(presented: string, connection?: object): Identity;
  /**
   * The consumer whose key an Authorization value carries in any position, or `none` (a client's
   * own credential). The same value as the last one on `connection`: one constant-time comparison.
   */
  inAuthorization(authorization: string, connection?: object): Identity;
  /**
   * Makes these the keys, at once (a reloaded consumers.keys_file): a key no longer listed matches
   * nothing from the next request on, also on a connection where it matched before.
   */
  replace(keys: readonly ConsumerKey[]): void;
  /** How many keys there are. */
  readonly size: number;
}

/**
 * The keys of the configured consumers: those consumers.keys gives itself, and the lines of
 * consumers.keys_file, each with its consumer's allow list.
 */
export function consumerKeysOf(
  configured: ReadonlyArray<{
    readonly name: string;
    readonly value?: string | undefined;
    readonly allow?: readonly AllowRule[] | undefined;
  }>,
  lines: ReadonlyArray<{ readonly name: string; readonly value: string }>,
): ConsumerKey[] {
  const byName = new Map(configured.map((key) => [key.name, key]));
  const own = configured.flatMap((key) => (key.value === undefined ? [] : [{ name: key.name, value: key.value, allow: key.allow }]));
  return [...own, ...lines.map((line) => ({ name: line.name, value: line.value, allow: byName.get(line.name)?.allow }))];
}

const UNKNOWN: Identity = { kind: 'unknown' };
const NONE: Identity = { kind: 'none' };

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

/** The last key that matched on a connection, and its consumer (or the last Authorization value, and what it was). */
interface LastMatch {
  key: string;
  identity: Identity;
}

/** Remembers `key` and its identity on `connection`, in the one slot it has in `memo`. */
function remember(memo: WeakMap<object, LastMatch>, connection: object, key: string, identity: Identity): void {
  const last = memo.get(connection);
  if (last === undefined) memo.set(connection, { key, identity });
  else {
    last.key = key;
    last.identity = identity;
  }
}

/** Digest of each key -> its consumer (one shared identity per consumer name). */
function tableOf(keys: readonly ConsumerKey[], digestOf: (value: string) => string): Map<string, Identity> {
  const table = new Map<string, Identity>();
  const identities = new Map<string, Identity>();
  for (const key of keys) {
    const at = digestOf(key.value);
    // Two consumers with one value: the first one listed wins (the config refuses it: keys-file.ts).
    if (table.has(at)) continue;
    let identity = identities.get(key.name);
    if (identity === undefined) {
      identity =
        key.allow === undefined
          ? { kind: 'consumer', name: key.name }
          : { kind: 'consumer', name: key.name, scope: compileScope(key.allow) };
      identities.set(key.name, identity);
    }
    table.set(at, identity);
  }
  return table;
}

/** `digestOf`: SHA-256 unless a test counts the digests. */
export function createConsumers(keys: readonly ConsumerKey[], digestOf: (value: string) => string = digest): Consumers {
  let table = tableOf(keys, digestOf);
  let size = keys.length;
  let lastMatch = new WeakMap<object, LastMatch>();
  let lastAuthorization = new WeakMap<object, LastMatch>();
  return {
    get size() {
      return size;
    },
    replace(next) {
      table = tableOf(next, digestOf);
      size = next.length;
      // What each connection remembers may be a key that is gone: forgotten with the old table.
      lastMatch = new WeakMap();
      lastAuthorization = new WeakMap();
    },
    match(presented, connection) {
      const last = connection === undefined ? undefined : lastMatch.get(connection);
      if (last !== undefined && sameKey(presented, last.key)) return last.identity;
      const identity = table.get(digestOf(presented)) ?? UNKNOWN;
      if (connection !== undefined && identity.kind === 'consumer' && presented.length > 0)
        remember(lastMatch, connection, presented, identity);
      return identity;
    },
    inAuthorization(authorization, connection) {
      const last = connection === undefined ? undefined : lastAuthorization.get(connection);
      if (last !== undefined && sameKey(authorization, last.key)) return last.identity;
      let identity = NONE;
      for (const value of authorizationValues(authorization)) {
        const found = table.get(digestOf(value));
        if (found !== undefined) {
          identity = found;
          break;
        }
      }
      if (connection !== undefined && authorization.length <= MAX_REMEMBERED_AUTHORIZATION)
        remember(lastAuthorization, connection, authorization, identity);
      return identity;
    },
  };
}
