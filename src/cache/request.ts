/**
 * What the cache needs to know about one request, built once and passed down the cached path:
 * its keys, its Cache-Control directives, a reader of its headers, and the upstream's policy.
 * Plain data (no socket, no response), so the cache's steps are testable without a server.
 */
import type { Directives } from './cache-control.js';
import { POOL, cacheKey, type KeyInput } from './key.js';
import type { FreshnessPolicy } from './policy.js';

/** The key a request is coalesced under, the keys it may be stored under, and the keys to look in. */
export interface Keys {
  readonly flight: string;
  /** The key a response fetched with `token` is stored under. */
  store(token: string | undefined): string;
  /** Every key a stored answer for this request may be under (one, except for non-equivalent pool tokens). */
  readonly candidates: readonly string[];
  /** Each pool token has its own key (non-equivalent tokens): look in every candidate. */
  readonly perToken: boolean;
  /** The credential partition of the request (ANONYMOUS, POOL or a client's keyed hash): never a credential. */
  readonly partition: string;
}

/** The common case: one key for everything (no pool, or a pool of equivalent tokens). */
class SingleKey implements Keys {
  readonly perToken = false;
  constructor(
    readonly flight: string,
    readonly partition: string,
  ) {}
  store(): string {
    return this.flight;
  }
  get candidates(): readonly string[] {
    return [this.flight];
  }
}

/** Non-equivalent pool tokens: each token has its own partition; the flight key names none. */
class PerTokenKeys implements Keys {
  readonly perToken = true;
  readonly flight: string;
  readonly candidates: readonly string[];
  readonly partition: string;
  constructor(
    private readonly input: KeyInput,
    tokens: readonly string[],
  ) {
    this.partition = input.partition;
    this.flight = this.store(undefined);
    this.candidates = tokens.map((token) => this.store(token));
  }
  store(token: string | undefined): string {
    return cacheKey({ ...this.input, partition: `${POOL}:${token ?? '*'}` });
  }
}

/** `perToken`: the names of non-equivalent pool tokens when the request uses the pool, else undefined. */
export function keysFor(input: KeyInput, perToken: readonly string[] | undefined): Keys {
  return perToken === undefined ? new SingleKey(cacheKey(input), input.partition) : new PerTokenKeys(input, perToken);
}

export interface CacheRequest {
  readonly keys: Keys;
  readonly upstream: string;
  readonly pathname: string;
  readonly method: 'GET' | 'HEAD';
  readonly directives: Readonly<Directives>;
  /** Reads one request header (first value), by lower-case name. */
  readonly header: (name: string) => string | undefined;
  /** Whose credential goes upstream. */
  readonly credential: 'client' | 'pool' | 'anonymous';
  readonly policy: FreshnessPolicy;
}
