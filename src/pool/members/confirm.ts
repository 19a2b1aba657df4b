/**
 * Confirming 401s, and bringing dead tokens back. A 401 on a request says something about the
 * request before it says anything about the token: GitHub answers 401 to a perfectly good token on
 * endpoints that want another kind of credential (App-only ones such as GET /app). GET /rate_limit
 * with the same token (free) tells the two apart: only a 401 there kills the token.
 *
 * - confirm(name, kind): asks GET /rate_limit for the token, at most once per CONFIRM_INTERVAL_MS
 *   per token and kind of 401 (rate-limit.ts `unauthorizedKind`: "Bad credentials", or any other):
 *   a path that keeps answering 401 costs at most one probe per token per minute, and a burst of
 *   App-only 401s never delays noticing a token revoked since. Callers within that minute get the
 *   last answer of their kind; callers while a probe is under way share it.
 * - revive(dead names): every `reviveIntervalMs` the runtime re-probes the dead tokens; a token
 *   that answers again comes back (the pool's `learn` does it, and counts it).
 *
 * The probe itself (the I/O, and telling the pool what it learnt) is given: this module only
 * decides when to probe. Time is passed in through `now`.
 */
import type { Confirmation, UnauthorizedKind } from '../rules/types.js';

/** A token is probed for a 401 at most this often; in between, its last answer stands. */
export const CONFIRM_INTERVAL_MS = 60_000;

/**
 * What GET /rate_limit's status says about the token (the probe already told the pool): a 2xx, or
 * GitHub Enterprise Server's 404 of rate limiting off (`unlimited`), is an accepted credential.
 */
export function confirmationOf(status: number | 'unlimited' | undefined): Confirmation {
  if (status === 'unlimited') return 'alive';
  if (status === 401) return 'dead';
  return status !== undefined && status >= 200 && status < 300 ? 'alive' : 'unknown';
}

export interface ConfirmerDeps {
  /** GET /rate_limit with the token, telling the pool what it said; the status (or `unlimited`), undefined when it failed. Never throws. */
  probe(name: string): Promise<number | 'unlimited' | undefined>;
  /** The pool's members now (read at each call: members come and go, see membership.ts). */
  readonly names: readonly string[];
  readonly now: () => number;
  readonly intervalMs?: number;
}

export interface Confirmer {
  /** Whether a 401 (of a kind) this token met is about the token: a fresh probe, or the last one of that kind within the interval. */
  confirm(name: string, kind?: UnauthorizedKind): Promise<Confirmation>;
  /** Probes now (start-up, the revive timer), whatever the memo says; concurrent callers share a probe. */
  probeNow(name: string): Promise<Confirmation>;
  /** Drops what was learnt of a member whose credential changed or which left the pool. */
  forget(name: string): void;
}

interface Memo {
  at: number;
  result: Confirmation;
}

export function createConfirmer(deps: ConfirmerDeps): Confirmer {
  const known = { has: (name: string): boolean => deps.names.includes(name) };
  const interval = deps.intervalMs ?? CONFIRM_INTERVAL_MS;
  const last = new Map<string, Memo>();
  const running = new Map<string, Promise<Confirmation>>();

  const probeNow = (name: string): Promise<Confirmation> => {
    if (!known.has(name)) return Promise.resolve('unknown');
    const under = running.get(name);
    if (under !== undefined) return under;
    const promise = deps
      .probe(name)
      .then(confirmationOf, () => 'unknown' as const)
      .then((result) => {
        running.delete(name);
        return result;
      });
    running.set(name, promise);
    return promise;
  };

  return {
    probeNow,
    forget(name) {
      last.delete(`credentials|${name}`);
      last.delete(`request|${name}`);
    },
    confirm(name, kind = 'request') {
      const key = `${kind}|${name}`;
      const memo = last.get(key);
      if (memo !== undefined && deps.now() - memo.at < interval) return Promise.resolve(memo.result);
      const at = deps.now();
      return probeNow(name).then((result) => {
        if (known.has(name)) last.set(key, { at, result });
        return result;
      });
    },
  };
}
