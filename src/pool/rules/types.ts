/**
 * The token pool's shared types: what the request path, the admin page, metrics and the three pool
 * implementations (in process: local-pool.ts; across replicas: shared-pool.ts; across the workers
 * of one machine: ipc-pool.ts) agree on. Types only: no code lives here.
 *
 * Token values stay inside the pools and the `authorization` of a lease; everything a pool reports
 * (snapshots, events) names tokens by their names.
 */

import type { ConsumerRefusal, Unavailable } from '../../http/errors.js';
import type { HeaderLookup, RateObservation, Resource, UnauthorizedKind, Verdict } from './rate-limit.js';
import type { ScopeAgreement, ScopesFrom } from './scopes.js';

export type { ConsumerRefusal, HeaderLookup, RateObservation, UnauthorizedKind, Unavailable, Verdict };

/** The two budgets of a token: REST endpoints, and GraphQL (GitHub counts them apart; choose.ts paces them). */
export type PaceKind = 'rest' | 'graphql';

/** A configured token: its name (see src/platform/config/token-name.ts) and its value. */
export interface PoolToken {
  readonly name: string;
  readonly value: string;
}

/**
 * A token's numbers as every holder of the pool shares them: the in-process pool keeps them per
 * token, the shared budget keeps them in one Redis hash per token. state.ts holds the rules that
 * change them.
 */
export interface TokenNumbers {
  /** x-ratelimit-limit: the window's size, and what a renewed window holds. */
  readonly limit: number;
  /** Last x-ratelimit-remaining seen (or from /rate_limit). */
  readonly remaining: number;
  /** x-ratelimit-reset, epoch seconds. */
  readonly reset: number;
  /** Secondary limit: not used before this time (epoch ms), 0 when not paused. */
  readonly pausedUntil: number;
  /** A 401 confirmed by GET /rate_limit: not used until a probe finds it answering again. */
  readonly dead: boolean;
  /** Numbers learnt from the upstream at least once (else the placeholder of an unseen token). */
  readonly known: boolean;
  /**
   * The upstream applies no rate limit to the credential (every resource): GET /rate_limit answered
   * 404 "Rate limiting is not enabled." (GitHub Enterprise Server's default), or answers carry no
   * rate-limit numbers at all. Such a token holds quota without end; numbers seen later end it.
   */
  readonly unlimited: boolean;
}

/** What token choice (choose.ts) looks at: a token's numbers and its reservations. */
export interface TokenState {
  readonly name: string;
  /** x-ratelimit-limit: the window's size, and what a renewed window holds. */
  readonly limit: number;
  /** Last x-ratelimit-remaining seen (or from /rate_limit). */
  readonly remaining: number;
  /** x-ratelimit-reset, epoch seconds. */
  readonly reset: number;
  /** Requests in flight on this token in the resource looked at (each reserves one unit). */
  readonly inFlight: number;
  /** Requests in flight on this token over every resource (the per-token cap); `inFlight` when absent. */
  readonly concurrent?: number;
  /** A confirmed 401: not used until a probe finds it answering again. */
  readonly dead: boolean;
  /** Secondary limit: not used before this time (epoch ms), 0 when not paused. */
  readonly pausedUntil: number;
  /** No rate limit applies (TokenNumbers.unlimited): chosen by load alone. Absent: false. */
  readonly unlimited?: boolean;
}

export interface Lease {
  readonly name: string;
  /** The rate-limit resource the lease reserved a unit of. */
  readonly resource: Resource;
  /** The Authorization header value to send upstream. */
  readonly authorization: string;
  /** A revalidation that could not use the token that stored the entry. */
  readonly switched: boolean;
  /** Records the upstream answer and frees the reservation; returns what it meant for the token. */
  settle(status: number, header: HeaderLookup, body: string | undefined): Verdict;
  /** No answer came back (connection failure, too-large body): frees the reservation. */
  cancel(): void;
}

export type Acquired = { kind: 'lease'; lease: Lease } | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

export interface AcquireOptions {
  prefer?: string | undefined;
  exclude?: ReadonlySet<string> | undefined;
  /** The request's rate-limit resource (rate-limit.ts): the budget it is chosen, reserved and settled in. Default core. */
  resource?: Resource | undefined;
  /** The consumer the request is for (consumer keys on): waiters are served in weighted fair order by consumer. */
  consumer?: string | undefined;
  /** That consumer's weight (default 1). */
  weight?: number | undefined;
  /** The request's secondary-limit points (choose.ts `pointsOf`); default 1 (a read). */
  points?: number | undefined;
  /**
   * Background work (refresh-ahead, stale-while-revalidate): it spends only points clients leave
   * (choose.ts `backgroundReserve`), never waits in the queue, and goes after waiting clients.
   */
  background?: boolean | undefined;
}

/** The pool as one quota: what x-ratelimit-* tell consumers (report.ts sums it). */
export interface PoolRateLimit {
  limit: number;
  remaining: number;
  used: number;
  /** Epoch seconds: the earliest reset among live tokens. */
  reset: number;
  /**
   * A live token has no rate limit (TokenNumbers.unlimited): the pool has no quota to tell, so
   * consumers get no x-ratelimit-* and GET /rate_limit answers GitHub's "Rate limiting is not
   * enabled." 404. The numbers above are those of the limited tokens. Absent: false.
   */
  unlimited?: boolean;
}

export type TokenHealth = 'ok' | 'exhausted' | 'paused' | 'dead';

/** One resource's numbers of a token, as /admin/tokens shows them. */
export interface ResourceReport {
  limit: number;
  remaining: number;
  used: number;
  /** Epoch seconds. */
  reset: number;
  /** Shared budget out of reach: what this replica may still spend of it on its own (absent otherwise). */
  local_allowance?: number;
}

/** One token as /admin/tokens and the pool gauges show it (report.ts builds it). */
export interface TokenReport {
  name: string;
  state: TokenHealth | 'unknown';
  limit: number | null;
  remaining: number | null;
  used: number | null;
  /** Epoch seconds. */
  reset: number | null;
  in_flight: number;
  paused_until: string | null;
  last_error: string | null;
  last_error_at: string | null;
  /** Every resource whose numbers are known (core included); the fields above are core's. */
  resources: Partial<Record<Resource, ResourceReport>>;
  /** No rate limit applies to the token (TokenNumbers.unlimited): its numbers are null. */
  unlimited: boolean;
  /** The OAuth scopes its answers report (X-OAuth-Scopes, sorted); null when it sends none or is unseen (`scopes_from`). */
  scopes: readonly string[] | null;
  scopes_from: ScopesFrom;
  /**
   * Shared budget out of reach (Redis outage): what this replica may still spend of core on its own,
   * its 1/N part. `remaining` stays what the upstream last reported. Null while the budget is shared or local.
   */
  local_allowance: number | null;
}

export interface PoolEvents {
  dead?(name: string): void;
  /** The upstream applies no rate limit to the token (GHES with rate limiting off): it is used by load alone. */
  unlimited?(name: string): void;
  /** A dead token answered GET /rate_limit again: back in the pool. */
  revived?(name: string): void;
  exhausted?(name: string, reset: number, resource?: Resource): void;
  secondary?(name: string, pauseMs: number): void;
  rejected?(reason: 'exhausted' | 'dead' | 'queue_timeout' | 'queue_full' | 'paced' | 'background'): void;
  /** A request was sent on the token: the secondary-limit points it spent in a budget (choose.ts). */
  spent?(name: string, kind: PaceKind, points: number): void;
  queued?(waitedSeconds: number): void;
  /**
   * The members' reported OAuth scopes began or stopped to differ, or differ in another way
   * (scopes.ts): told once per change, after the change settled (a reload's probes included).
   */
  scopes?(agreement: ScopeAgreement): void;
}

export interface PoolSettings {
  tokens: readonly PoolToken[];
  equivalent: boolean;
  perTokenConcurrency: number;
  maxConcurrency: number;
  queueTimeoutMs: number;
  maxQueue: number;
  /** Secondary-limit points per minute of each token (pool.points_per_minute, pool.graphql_points_per_minute); absent: no pacing. */
  points?: { readonly rest: number; readonly graphql: number } | undefined;
  /**
   * Consumer keys on: each consumer's weight; max_queue is then split among them (fair-share.ts
   * `queueBounds`), and so are the points of each window (points-share.ts).
   */
  consumerWeights?: ReadonlyMap<string, number> | undefined;
  /** consumers.reserve_fraction: the part of a consumer's points share left for it while it is active (default 0). */
  reserveFraction?: number | undefined;
  events?: PoolEvents;
  now?: () => number;
}

export interface TokenPool {
  readonly names: readonly string[];
  /**
   * Whether the members share one cache partition now: `pool.equivalent`, unless two members
   * report different OAuth scopes (scopes.ts), which makes it false until they agree again.
   */
  readonly equivalent: boolean;
  acquire(opts?: AcquireOptions): Promise<Acquired>;
  /** The pool as one quota in a resource, core by default (what x-ratelimit-* tell consumers). */
  rateLimit(resource?: Resource): PoolRateLimit;
  /** The pool as one quota in every resource some live token's numbers are known for (core always). */
  rateLimits(): Partial<Record<Resource, PoolRateLimit>>;
  snapshot(): TokenReport[];
  queueLength(): number;
  /**
   * Learns a token's numbers without spending (GET /rate_limit): every resource of the body. A 401
   * kills the token; a 200 brings a dead one back.
   */
  learn(name: string, status: number, observation: Learnt, error?: string): void;
  /**
   * What an answer with this token (GET /rate_limit's, or a request's) said of its OAuth scopes:
   * the X-OAuth-Scopes value, or undefined when the answer had none (scopes.ts `learnScopes`).
   */
  learnScopes(name: string, header: string | undefined, status: number): void;
  /**
   * Tells whether a 401 a request met on this token is about the token: asks GET /rate_limit with
   * it (at most once a minute per token and kind of 401; concurrent callers share one probe).
   * Absent: unknown.
   */
  confirm?(name: string, kind?: UnauthorizedKind): Promise<Confirmation>;
  /**
   * A 401 met on member `name` with `authorization` (the lease's): asked before `confirm`. A
   * credential that can be renewed (a GitHub App installation token) is re-minted, once per value.
   * Absent: 'no'.
   */
  renew?(name: string, authorization: string): Promise<Renewal>;
  authorizationOf(name: string): string | undefined;
  close(): void;
}

/**
 * What GET /rate_limit taught of a token: its numbers (one resource's, or every resource's), or
 * `unlimited` when the upstream said it applies no rate limit (404 "Rate limiting is not enabled.").
 */
export type Learnt = RateObservation | readonly RateObservation[] | 'unlimited' | undefined;

/**
 * What became of a member's credential that met a 401 (TokenPool.renew):
 * renewed: the member sends another credential now (re-minted, or replaced since): try it;
 * gone: the member left the pool (its installation was revoked, or a reload removed it): try another;
 * no: the same credential stands (a static token, or one already re-minted once): confirm the 401.
 */
export type Renewal = 'renewed' | 'gone' | 'no';

/** What GET /rate_limit said about a token: dead (401), alive (200), or unknown (it failed). */
export type Confirmation = 'dead' | 'alive' | 'unknown';

/**
 * What a membership change did, by token name (membership.ts): each list in the order of the lists
 * given. kept: same name, same value; updated: same name, new value (its learned state stays);
 * added: a new name; removed: a name no longer given.
 */
export interface MembershipChange {
  readonly added: readonly string[];
  readonly removed: readonly string[];
  readonly updated: readonly string[];
  readonly kept: readonly string[];
}

/**
 * A pool whose members can change while it serves (a reloaded tokens file, re-minted App
 * installation tokens): the in-process pool and the budget shared through Redis. A worker's IPC
 * pool follows the primary's membership instead.
 */
export interface MemberPool extends TokenPool {
  /**
   * Makes `tokens` (unique names and values) the pool's members and returns what changed. Kept
   * and updated members keep their learned state (windows, pause, secondary limits in a row); an
   * updated one sends its new value from its next lease on, and is no longer dead (the refused
   * credential is gone). Removed members take no new lease; leases in flight on them settle
   * normally. Added members start unseen (learn them with `learn`, as at start-up). Waiters are
   * served at once if a new member can take them.
   */
  replaceMembers(tokens: readonly PoolToken[]): MembershipChange;
  /** Counts the membership changes so far (0 at start): a holder of a copy compares it to know it is behind. */
  generation(): number;
}

/** The in-process pool, plus the hooks a shared budget uses to keep it in line with Redis. */
export interface LocalTokenPool extends MemberPool {
  /**
   * Overwrites a token's numbers in a resource (core by default) with the shared view, whose
   * `remaining` already excludes what other replicas have reserved (a pause is never shortened;
   * death follows the shared flag, which expires).
   */
  sync(name: string, view: TokenNumbers, resource?: Resource): void;
  /** This replica's share of the whole-upstream concurrency cap. */
  setMaxConcurrency(max: number): void;
  /** Lets this replica spend only this share of every token's remaining quota on its own (Redis outage: 1/N per replica). */
  scaleRemaining(share: number): void;
  /** Ends those local allowances (the shared budget answers again). */
  endAllowances(): void;
  /** Requests in flight on the token from this process (in one resource when given). */
  inFlight(name: string, resource?: Resource): number;
  /** The shared budget found the token's points in the resource's budget spent until `until` (epoch ms): it waits until then. */
  holdPoints(name: string, resource: Resource, until: number): void;
  /** The shared budget refused a lease just taken on the token: the points it spent here come back. */
  refundPoints(name: string, resource: Resource): void;
}
