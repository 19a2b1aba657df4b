/**
 * GraphQL replies, as values for `answer()`: a stored answer (a hit, or the answer of a flight this
 * call joined), an upstream answer passed on as it came, or an error. A pooled consumer sees the
 * pool's x-ratelimit-* of the `graphql` resource and the token's name; a client with its own
 * credential sees its own rate-limit headers on what went upstream for it, none on a stored answer.
 */
import type { CacheResult } from '../../cache/rules/classify.js';
import { poolTokenOf, type CacheEntry } from '../../cache/rules/entry.js';
import { currentAge } from '../../cache/rules/policy.js';
import { cacheStatus, failureStatus, type CacheStatusInput } from '../../http/headers/fields.js';
import { errors } from '../../http/errors.js';
import { streamReply, type Reply } from '../../http/reply.js';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import { TOKEN_HEADER, type PoolHeaders } from '../../pool/rules/report.js';
import type { Fetched } from '../../upstream/fetch.js';

/** What a reply is for: the pool's headers for a pooled consumer (undefined for a client's own credential). */
export interface ReplyFor {
  readonly cfg: UpstreamConfig;
  readonly pool: PoolHeaders | undefined;
  readonly onBodyError: (err: unknown) => void;
}

type Outcome = Extract<Reply, { kind: 'body' }>['outcome'];

/** A stored answer: its headers, the pool's, Age and Cache-Status. */
export function entryReply(to: ReplyFor, entry: CacheEntry, status: CacheStatusInput, age: number, outcome: Outcome): Reply {
  const headers: Record<string, string> = {};
  for (const [name, value] of entry.headers) headers[name] = value;
  const token = poolTokenOf(entry.fetchedBy);
  if (to.pool !== undefined) {
    Object.assign(headers, to.pool.record());
    if (token !== undefined) headers[TOKEN_HEADER] = token;
  }
  headers.age = String(age);
  headers['cache-status'] = cacheStatus(status);
  return { kind: 'body', status: entry.status, headers, body: entry.body, outcome, upstreamStatus: undefined, token };
}

/** A fresh stored answer; `key`: its cache key, named in Cache-Status. */
export function hitReply(to: ReplyFor, entry: CacheEntry, now: number, key: string): Reply {
  const age = currentAge(entry, now);
  return entryReply(to, entry, { hit: true, ttl: entry.lifetime - age, key }, age, 'hit');
}

/** An upstream answer as it came (the call that went upstream), with its Cache-Status. */
export function passedOn(to: ReplyFor, fetched: Exclude<Fetched, { kind: 'failed' }>, token: string | undefined, status: string): Reply {
  const parts = fetched.kind === 'response' ? { head: [fetched.body], rest: undefined } : { head: fetched.head, rest: fetched.rest };
  return streamReply({
    status: fetched.status,
    upstreamHeaders: fetched.headers,
    cacheStatus: status,
    pool: to.pool,
    token,
    ...parts,
    headersOnly: false,
    onBodyError: to.onBodyError,
  });
}

/**
 * A flight's result as this call's reply. `own`: the upstream answer, when this call's flight
 * fetched it (its own headers go out); undefined for a call that joined another's flight.
 */
export function flightReply(to: ReplyFor, result: CacheResult, own: Fetched | undefined, now: number, key: string): Reply {
  switch (result.kind) {
    case 'unavailable':
      return errors.poolUnavailable(result.reason, result.retryAfterSeconds, {
        ...to.pool?.record(),
        'cache-status': cacheStatus({ fwd: 'miss' }),
      });
    case 'failed':
      return errors.upstreamFailed(
        to.cfg,
        result.failure,
        { outcome: 'error', upstreamStatus: undefined, token: result.token },
        failureStatus('miss', result.failure.detail),
      );
    case 'too-large':
      return passedOn(to, result, result.token, cacheStatus({ fwd: 'miss', fwdStatus: result.status, key }));
    case 'followed': {
      const age = currentAge(result.entry, now);
      return entryReply(to, result.entry, { hit: true, ttl: result.entry.lifetime - age, detail: 'l2-collapsed', key }, age, 'coalesced');
    }
    case 'entry': {
      const stored = result.storeKey !== undefined;
      const status = { fwd: 'miss' as const, fwdStatus: result.fwdStatus, stored, ttl: stored ? result.entry.lifetime : undefined, key };
      if (own !== undefined && own.kind !== 'failed') {
        const reply = passedOn(to, own, result.token, cacheStatus(status));
        return { ...reply, outcome: 'miss' };
      }
      return entryReply(to, result.entry, { ...status, collapsed: true }, currentAge(result.entry, now), 'coalesced');
    }
  }
}
