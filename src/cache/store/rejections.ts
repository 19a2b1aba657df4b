/**
 * What the upstream rejected, remembered: after a 401, or a 403 without
 * rate-limit meaning, no entry of that credential stored before then is used for that key; after
 * a 401 "Bad credentials", for any key of that client credential. So max-stale, only-if-cached and
 * stale-if-error never hand out what the upstream has since refused to that credential.
 *
 * Rejections travel to the other replicas as path-invalidation notices whose scope starts with a
 * NUL (a path scope starts with an upstream name): `scopesOf` builds them, `remember` takes them
 * back. Bounded: the oldest is forgotten past MAX_REJECTIONS, without ever pushing out a path
 * invalidation (those have their own map in validity.ts). Pure (time passed in).
 */
import type { Rejection } from '../rules/classify.js';

/** At most this many rejections are remembered (oldest forgotten first). */
const MAX_REJECTIONS = 10_000;
/** "\0k\n<key>": one entry of one credential; "\0c\n<partition>": every entry of a client credential. */
const REJECTED_KEY = '\0k\n';
const REJECTED_CREDENTIAL = '\0c\n';

export interface RejectionMemo {
  readonly size: number;
  /** Whether a bus scope is a rejection (else it is a path invalidation). */
  isRejection(scope: string): boolean;
  /** The scopes of one rejection, to remember here and to publish. */
  scopesOf(rejected: Rejection): string[];
  remember(scope: string, at: number): void;
  /** Whether an entry stored at `storedAt` under `key`, for `partition`, was rejected since. */
  rejectedSince(key: string, partition: string, storedAt: number): boolean;
}

/** Sets `scope` to `at` as the newest of `map`, forgetting the oldest past `max`. */
export function rememberBounded(map: Map<string, number>, scope: string, at: number, max: number): void {
  map.delete(scope);
  map.set(scope, at);
  if (map.size > max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}

export function createRejectionMemo(): RejectionMemo {
  const rejected = new Map<string, number>();
  const since = (scope: string, storedAt: number): boolean => {
    const at = rejected.get(scope);
    return at !== undefined && storedAt <= at;
  };
  return {
    get size() {
      return rejected.size;
    },
    isRejection: (scope) => scope.startsWith(REJECTED_KEY) || scope.startsWith(REJECTED_CREDENTIAL),
    scopesOf(rejection) {
      const scopes = [REJECTED_KEY + rejection.key];
      if (rejection.partition !== undefined) scopes.push(REJECTED_CREDENTIAL + rejection.partition);
      return scopes;
    },
    remember: (scope, at) => rememberBounded(rejected, scope, at, MAX_REJECTIONS),
    rejectedSince: (key, partition, storedAt) => since(REJECTED_KEY + key, storedAt) || since(REJECTED_CREDENTIAL + partition, storedAt),
  };
}
