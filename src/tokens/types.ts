/**
 * The token pool's shared types: what the request path, the admin page, metrics and the three pool
 * implementations (in process: local-pool.ts; across replicas: shared-pool.ts; across the workers
 * of one machine: ipc-pool.ts) agree on. Types only: no code lives here.
 *
 * Token values stay inside the pools and the `authorization` of a lease; everything a pool reports
 * (snapshots, events) names tokens by their names.
 */

/** Reads one response header by its lower-case name. */
export type HeaderLookup = (name: string) => string | undefined;

/** A configured token: its name (see name.ts) and its value. */
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
  /** 401 seen: never used again. */
  readonly dead: boolean;
  /** Numbers learnt from the upstream at least once (else the placeholder of an unseen token). */
  readonly known: boolean;
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
  /** Requests in flight on this token (each reserves one unit). */
  readonly inFlight: number;
  /** 401 seen: never used again. */
  readonly dead: boolean;
  /** Secondary limit: not used before this time (epoch ms), 0 when not paused. */
  readonly pausedUntil: number;
}

/** What an upstream answer means for the token that was used (rate-limit.ts decides). */
export type Verdict =
  | { kind: 'ok' }
  /** 401: the token is bad or revoked. */
  | { kind: 'dead' }
  /** 403/429 with remaining 0: spent until `reset` (epoch seconds, when given). */
  | { kind: 'exhausted'; reset: number | undefined }
  /** 403/429 secondary limit: pause for `retryAfterMs` when given, else the doubling default. */
  | { kind: 'secondary'; retryAfterMs: number | undefined };

/** The x-ratelimit-* set of one answer (or of GET /rate_limit's body). */
export interface RateObservation {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
  resource: string;
}

export interface Lease {
  readonly name: string;
  /** The Authorization header value to send upstream. */
  readonly authorization: string;
  /** A revalidation that could not use the token that stored the entry. */
  readonly switched: boolean;
  /** Records the upstream answer and frees the reservation; returns what it meant for the token. */
  settle(status: number, header: HeaderLookup, body: string | undefined): Verdict;
  /** No answer came back (connection failure, too-large body): frees the reservation. */
  cancel(): void;
}

/**
 * exhausted: every token is spent or paused (answer 429 with Retry-After, or serve stale);
 * dead: every token was rejected by the upstream (503: the operator must replace them);
 * busy: no slot freed up within the queue timeout, or the queue is full (503).
 */
export type Unavailable = 'exhausted' | 'dead' | 'busy';

export type Acquired = { kind: 'lease'; lease: Lease } | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

export interface AcquireOptions {
  prefer?: string | undefined;
  exclude?: ReadonlySet<string> | undefined;
}

/** The pool as one quota: what x-ratelimit-* tell consumers (report.ts sums it). */
export interface PoolRateLimit {
  limit: number;
  remaining: number;
  used: number;
  /** Epoch seconds: the earliest reset among live tokens. */
  reset: number;
}

export type TokenHealth = 'ok' | 'exhausted' | 'paused' | 'dead';

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
}

export interface PoolEvents {
  dead?(name: string): void;
  exhausted?(name: string, reset: number): void;
  secondary?(name: string, pauseMs: number): void;
  rejected?(reason: 'exhausted' | 'dead' | 'queue_timeout' | 'queue_full'): void;
  queued?(waitedSeconds: number): void;
}

export interface PoolSettings {
  tokens: readonly PoolToken[];
  equivalent: boolean;
  perTokenConcurrency: number;
  maxConcurrency: number;
  queueTimeoutMs: number;
  maxQueue: number;
  events?: PoolEvents;
  now?: () => number;
}

export interface TokenPool {
  readonly names: readonly string[];
  readonly equivalent: boolean;
  acquire(opts?: AcquireOptions): Promise<Acquired>;
  /** The pool as one quota (what x-ratelimit-* tell consumers). */
  rateLimit(): PoolRateLimit;
  snapshot(): TokenReport[];
  queueLength(): number;
  /** Learns a token's numbers without spending (GET /rate_limit). */
  learn(name: string, status: number, observation: RateObservation | undefined, error?: string): void;
  authorizationOf(name: string): string | undefined;
  close(): void;
}

/** The in-process pool, plus the hooks a shared budget uses to keep it in line with Redis. */
export interface LocalTokenPool extends TokenPool {
  /**
   * Overwrites a token's numbers with the shared view, whose `remaining` already excludes what
   * other replicas have reserved (a pause or death is never undone).
   */
  sync(name: string, view: TokenNumbers): void;
  /** This replica's share of the whole-upstream concurrency cap. */
  setMaxConcurrency(max: number): void;
  /** Keeps only this share of every token's remaining quota (Redis outage: 1/N per replica). */
  scaleRemaining(share: number): void;
  /** Requests in flight on the token from this process. */
  inFlight(name: string): number;
}
