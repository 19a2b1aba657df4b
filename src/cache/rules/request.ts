/**
 * What the cache needs to know about one request, built once and passed down the cached path:
 * its keys, its Cache-Control directives, a reader of its headers, and the upstream's policy.
 * Plain data (no socket, no response), so the cache's steps are testable without a server.
 */
import { requestDirectives, type Directives, headerValue } from '../../http/headers/fields.js';
import { acceptKeyPart, ANONYMOUS, POOL, cacheKey, keyAround, type KeyInput, type Partitioner } from './key.js';
import { clientDirectives, clientNoCacheMode, NO_CACHE_IGNORED, type ClientNoCache } from './client-directives.js';
import type { FreshnessPolicy, UpstreamPolicy } from './policy.js';

/** The key a request is coalesced under, the keys it may be stored under, and the keys to look in. */
export interface Keys {
  readonly flight: string;
  /** The key a response fetched with `token` is stored under. */
  store(token: string | undefined): string;
  /** Every key a stored answer for this request may be under (one, except for non-equivalent pool tokens); built on first use. */
  readonly candidates: readonly string[];
  /** The token each candidate key belongs to (same order; `undefined` for the one key of a request without per-token keys). */
  readonly candidateTokens: readonly (string | undefined)[];
  /** Each pool token has its own key (non-equivalent tokens): look in every candidate. */
  readonly perToken: boolean;
  /**
   * Whether `key`, one of this request's per-token keys (`store(token)`), is the key of a token that
   * is a member of the pool now: one hash lookup of the token's name, no key built, no scan.
   */
  isMemberKey(key: string): boolean;
  /** The credential partition of the request (ANONYMOUS, POOL or a client's keyed hash): never a credential. */
  readonly partition: string;
  /** Changes whenever the pool's members change (per-token keys; 0 otherwise): what a hit found for them may not be served. */
  readonly membersGeneration: number;
}

/** The members of a pool of non-equivalent tokens, as the keys see them. */
export interface PoolMembers {
  /** The members now (the candidates of a request). */
  readonly names: readonly string[];
  /** Changes whenever the members change; without one, nothing found for them is kept for the next hit (token-memo.ts). */
  readonly generation?: number;
  /** Whether `name` is a member now: a hash lookup. */
  has(name: string): boolean;
}

const NO_TOKEN: readonly (string | undefined)[] = [undefined];

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
  isMemberKey(): boolean {
    return false;
  }
  get membersGeneration(): number {
    return 0;
  }
  get candidates(): readonly string[] {
    return [this.flight];
  }
  get candidateTokens(): readonly (string | undefined)[] {
    return NO_TOKEN;
  }
}

/**
 * Non-equivalent pool tokens: each token has its own partition; the flight key names none. The
 * key is built once around its partition (`keyAround`), so each token's key is a concatenation;
 * the candidates (one per member) are built only when asked for (an L1 miss of the memoized token).
 */
class PerTokenKeys implements Keys {
  readonly perToken = true;
  readonly flight: string;
  readonly partition: string;
  private readonly head: string;
  private readonly tail: string;
  private tokens: readonly string[] | undefined = undefined;
  private keys: readonly string[] | undefined = undefined;
  constructor(
    input: KeyInput,
    private readonly members: PoolMembers,
  ) {
    this.partition = input.partition;
    ({ head: this.head, tail: this.tail } = keyAround(input));
    this.flight = `${this.head}${POOL}:*${this.tail}`;
  }
  store(token: string | undefined): string {
    return token === undefined ? this.flight : `${this.head}${POOL}:${token}${this.tail}`;
  }
  isMemberKey(key: string): boolean {
    // `store(token)` is the flight key with the token in place of its `*`.
    const at = this.flight.length - this.tail.length - 1;
    const end = key.length - this.tail.length;
    return end > at && this.members.has(key.slice(at, end));
  }
  get candidateTokens(): readonly string[] {
    return (this.tokens ??= this.members.names);
  }
  get membersGeneration(): number {
    return this.members.generation ?? Number.NaN; // NaN equals nothing
  }
  get candidates(): readonly string[] {
    return (this.keys ??= this.candidateTokens.map((token) => this.store(token)));
  }
}

/** `members`: the non-equivalent pool tokens when the request uses the pool, else undefined. */
export function keysFor(input: KeyInput, members: PoolMembers | undefined): Keys {
  return members === undefined ? new SingleKey(cacheKey(input), input.partition) : new PerTokenKeys(input, members);
}

export interface CacheRequest {
  readonly keys: Keys;
  readonly upstream: string;
  readonly pathname: string;
  readonly method: 'GET' | 'HEAD';
  readonly directives: Readonly<Directives>;
  /** Reads one request header (its lines joined), by lower-case name. A method: pass `(name) => req.header(name)`. */
  header(name: string): string | undefined;
  /** Whose credential goes upstream. */
  readonly credential: 'client' | 'pool' | 'anonymous';
  readonly policy: FreshnessPolicy;
  /** The Cache-Status detail of a request directive the cache did not act on (client-directives.ts), if any. */
  readonly detail?: string;
}

type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** The directives of a request that sends neither Cache-Control nor Pragma. */
const NO_DIRECTIVES: Readonly<Directives> = Object.freeze({});

/** A header's value: Node joins repeated request headers into one string, so a list is rare (headerValue joins it). */
const textOf = (value: string | string[] | undefined): string | undefined =>
  value === undefined || typeof value === 'string' ? value : headerValue(value);

/** Where a routed request goes and whose credential it carries: what its keys and policy depend on beside its headers. */
export interface Routing {
  /** The upstream's name. */
  readonly upstream: string;
  readonly pathname: string;
  /** The raw query including "?", or "". */
  readonly search: string;
  readonly method: 'GET' | 'HEAD';
  readonly credential: 'client' | 'pool' | 'anonymous';
  /** The upstream's freshness policy (its kind, and the policy of one path). */
  readonly policy: UpstreamPolicy;
  /** Whether a client's no-cache counts, as configured (`cache.client_no_cache`; unset: the policy's default, client-directives.ts). */
  readonly noCache: ClientNoCache | undefined;
  /** Non-equivalent pool tokens, when the request uses the pool: a key per member. */
  readonly members: PoolMembers | undefined;
  /** GitHub's REST API: the Accept values that select its default JSON share one entry (key.ts). */
  readonly sharesAccept: boolean;
}

/**
 * A routed request as the cache sees it, over the request's own header map (which the handler has
 * already cut to what goes upstream). Its keys, directives and path policy are worked out on first
 * use and kept: a hit reads its keys and directives, never its path's policy. (Getters on the
 * prototype: one on an object literal made every request's object slow.)
 */
export class RoutedRequest implements CacheRequest {
  #keys: Keys | undefined = undefined;
  #directives: Readonly<Directives> | undefined = undefined;
  #detail: string | undefined = undefined;
  #policy: FreshnessPolicy | undefined = undefined;
  readonly #headers: RequestHeaders;
  readonly #partitioner: Partitioner;

  constructor(
    readonly routing: Routing,
    headers: RequestHeaders,
    partitioner: Partitioner,
  ) {
    this.#headers = headers;
    this.#partitioner = partitioner;
  }

  get upstream(): string {
    return this.routing.upstream;
  }
  get pathname(): string {
    return this.routing.pathname;
  }
  get method(): 'GET' | 'HEAD' {
    return this.routing.method;
  }
  get credential(): 'client' | 'pool' | 'anonymous' {
    return this.routing.credential;
  }

  header(name: string): string | undefined {
    return textOf(this.#headers[name]);
  }

  get keys(): Keys {
    return (this.#keys ??= this.#keysNow());
  }

  get directives(): Readonly<Directives> {
    if (this.#directives === undefined) this.#directivesNow();
    return this.#directives!;
  }

  get detail(): string | undefined {
    if (this.#directives === undefined) this.#directivesNow();
    return this.#detail;
  }

  get policy(): FreshnessPolicy {
    return (this.#policy ??= this.routing.policy.at(this.routing.pathname));
  }

  #keysNow(): Keys {
    const { routing } = this;
    const headers = this.#headers;
    const credential = routing.credential;
    const partition =
      credential === 'pool'
        ? POOL
        : credential === 'anonymous'
          ? ANONYMOUS
          : this.#partitioner.partitionOf(headerValue(headers.authorization));
    const input: KeyInput = {
      upstream: routing.upstream,
      pathname: routing.pathname,
      search: routing.search,
      accept: routing.sharesAccept ? acceptKeyPart(textOf(headers.accept), true) : textOf(headers.accept),
      apiVersion: textOf(headers['x-github-api-version']),
      partition,
      selecting: this.#partitioner.selectingDigest((name) => this.header(name)),
    };
    return keysFor(input, credential === 'pool' ? routing.members : undefined);
  }

  #directivesNow(): void {
    const headers = this.#headers;
    const cacheControl = headers['cache-control'];
    const pragma = headers.pragma;
    if (cacheControl === undefined && pragma === undefined) {
      // Most requests: no directive to read or drop.
      this.#directives = NO_DIRECTIVES;
      return;
    }
    const asked = requestDirectives(cacheControl, pragma);
    const conditional = headers['if-none-match'] !== undefined || headers['if-modified-since'] !== undefined;
    const { noCache, policy } = this.routing;
    const directives = clientDirectives(asked, clientNoCacheMode(policy.kind, noCache), conditional);
    this.#directives = directives;
    this.#detail = directives === asked ? undefined : NO_CACHE_IGNORED;
  }
}
