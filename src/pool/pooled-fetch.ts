/**
 * One upstream exchange on a pool token: take a lease in the request's rate-limit resource (its
 * path says which: rate-limit.ts), send with its Authorization, tell the pool what came back, and
 * try another token when the answer was the token's fault (primary or secondary rate limit).
 * A 401 "Bad credentials" first asks whether the credential can be renewed (`pool.renew`: a GitHub
 * App installation token is re-minted once): renewed, the request is sent again on the new
 * credential; gone (the member left the pool), on another token. Otherwise a 401 is the token's fault only once
 * GET /rate_limit with the token answers 401 too (`pool.confirm`): then the token is dead and the
 * request is tried on another; otherwise the 401 is about the request and goes to the client as
 * it is. A 404 whose X-Accepted-OAuth-Scopes names a scope the token lacks and another member has
 * is tried on such a member (rate-limit.ts); if that one refuses (4xx), the 404 stands. Without a pool
 * it is a plain `fetchBuffered`. A transit failure (src/upstream/retries.ts) is sent again, as the
 * upstream's retry state decides, on a new lease (a new upstream request for the pool and the
 * consumer's share; the same token may serve it: a transit failure says nothing about the token).
 *
 * Headers that depend on the token (a revalidation's validators) come as data (`TokenHeaders`), and
 * the result says which token, and which value of it (by a keyed id the caller gives), the answer
 * came from: no callback sets anything aside.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { type UpstreamClient, fetchAttempt, fetchBuffered, nextAttempt, type Fetched, type UpstreamRequest } from '../upstream/fetch.js';
import { headerReader } from '../http/headers/fields.js';
import type { PoolHeaders } from './rules/report.js';
import { retryable, unauthorizedKind, resourceOf } from './rules/rate-limit.js';
import { anotherSeesMore } from './rules/scopes.js';
import type { ConsumerGate } from './consumers/consumer-budget.js';
import { pointsOf } from './rules/choose.js';
import type { Acquired, AcquireOptions, Confirmation, HeaderLookup, Lease, Renewal, TokenPool, Unavailable } from './rules/types.js';
import { ATTR, SPANS, type SpanHandle } from '../platform/trace/tracing.js';

/** The pool as the request path uses it: tokens to spend, and the headers consumers see. */
export interface PoolContext {
  readonly pool: TokenPool;
  readonly headers: PoolHeaders;
  /** The fair share between consumers, when consumer keys are on (consumer-budget.ts). */
  readonly consumers?: ConsumerGate | undefined;
}

/** The consumer a pooled request is for, and the gate its share is checked at. */
export interface ConsumerRef {
  readonly gate: ConsumerGate;
  readonly name: string;
}

/** The consumer of a request on the pool (its credential's), when the fair share applies. */
export function consumerOf(
  pool: PoolContext | undefined,
  cred: { kind: string; consumer?: string | undefined; account?: string | undefined },
): ConsumerRef | undefined {
  if (pool?.consumers === undefined || cred.kind !== 'pool' || cred.consumer === undefined) return undefined;
  // An OIDC consumer spends from its issuer's account.
  return { gate: pool.consumers, name: cred.account ?? cred.consumer };
}

export type PooledFetched =
  | {
      kind: 'fetched';
      f: Fetched;
      token: string | undefined;
      /** The id of the token's value the answer came on (`Req.valueId`'s), when the request gave `valueId`. */
      credential: string | undefined;
      switched: boolean;
    }
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

/** At most this many tokens are tried for one request. */
export const MAX_TOKEN_ATTEMPTS = 3;

interface Req extends UpstreamRequest {
  /**
   * The status an answer counts as for its token, when its status alone does not say (GraphQL: a
   * 200 whose errors say RATE_LIMITED counts as a 429, src/pool/rules/graphql-rate-limit.ts).
   */
  tokenStatus?: (status: number, body: Buffer, header: HeaderLookup) => number;
  /** Headers that depend on the token the request goes out on (the cache's validators: src/cache/rules/freshen.ts). */
  tokenHeaders?: TokenHeaders;
  /**
   * A short keyed id of a token's value (an Authorization value; never the value itself): given,
   * `tokenHeaders` can tell a token's new value from an old one, and the result names the value used.
   */
  valueId?: (authorization: string) => string;
  /** Background work (a revalidation nobody waits for): it spends only the points clients leave, and never waits (choose.ts). */
  background?: boolean;
  /** The span the token wait and upstream spans descend from, when tracing is on. */
  parent?: SpanHandle | undefined;
}

/**
 * Headers by token: `headers` on every token, but `rotated.headers` on `rotated.token` once its
 * value is another than the one of id `rotated.credential` (which `Req.valueId` tells; without it,
 * `headers`).
 */
export interface TokenHeaders {
  readonly headers: Readonly<Record<string, string>>;
  readonly rotated?: { readonly token: string; readonly credential: string; readonly headers: Readonly<Record<string, string>> };
}

/** The headers of `chosen` for a request on token `name` whose value has id `credential`. */
function headersOn(chosen: TokenHeaders | undefined, name: string, credential: string | undefined): Readonly<Record<string, string>> {
  if (chosen === undefined) return {};
  const { rotated } = chosen;
  const isRotated = rotated !== undefined && credential !== undefined && rotated.token === name && rotated.credential !== credential;
  return isRotated ? rotated.headers : chosen.headers;
}

export async function fetchPooled(
  client: UpstreamClient,
  req: Req,
  maxBytes: number,
  pool: TokenPool | undefined,
  prefer?: string,
  consumer?: ConsumerRef,
): Promise<PooledFetched> {
  if (pool === undefined) {
    const sent = req.tokenHeaders === undefined ? req : { ...req, headers: { ...req.headers, ...req.tokenHeaders.headers } };
    return { kind: 'fetched', f: await fetchBuffered(client, sent, maxBytes), token: undefined, credential: undefined, switched: false };
  }
  if (consumer === undefined) return onTokens(client, req, maxBytes, pool, prefer, { sent: 0 });
  // Fair share: the consumer's unit is counted before a token is acquired, and given back only if
  // nothing went upstream: a 304 is free of quota, not of the token's points (each retry counts too).
  const admission = await consumer.gate.admit(consumer.name, resourceOf(req.path, client.basePath));
  if (admission.kind === 'refused')
    return { kind: 'unavailable', reason: admission.reason, retryAfterSeconds: admission.retryAfterSeconds };
  const fair: Fair = { consumer: consumer.name, weight: admission.weight, sent: 0 };
  let got: PooledFetched | undefined;
  try {
    got = await onTokens(client, req, maxBytes, pool, prefer, fair);
    if (got.kind === 'unavailable' && got.reason === 'points') consumer.gate.refused(consumer.name, got.reason);
    return got;
  } finally {
    admission.settle({ upstreamRequests: fair.sent, spent: got !== undefined && spentQuota(got) });
  }
}

/** The consumer a request is for (its place in the wait queue), and the upstream requests it sent. */
interface Fair {
  readonly consumer?: string;
  readonly weight?: number;
  sent: number;
}

/** Whether an answer cost quota (the quota-spent metric): not a 304 (free on GitHub), a failure, nor a 401/403/429 refusal. */
function spentQuota(got: PooledFetched): boolean {
  return got.kind === 'fetched' && got.f.kind !== 'failed' && ![304, 401, 403, 429].includes(got.f.status);
}

/** What GET /rate_limit says of a token that met a 401 with this body (memoized per token and kind of 401: confirm.ts). */
function confirmed(pool: TokenPool, name: string, body: string | undefined): Promise<Confirmation> {
  if (pool.confirm === undefined) return Promise.resolve('unknown');
  return pool.confirm(name, unauthorizedKind(body)).catch(() => 'unknown' as const);
}

/** A 404 on a member whose scopes lack what the endpoint accepts, when another untried member has it (scopes.ts). */
function lacksScope(pool: TokenPool, name: string, accepted: string | undefined, tried: ReadonlySet<string>): boolean {
  // An equivalent pool's members report one scope set (or none): no member sees more.
  return !pool.equivalent && accepted !== undefined && accepted !== '' && anotherSeesMore(pool.snapshot(), name, accepted, tried);
}

/** What became of the lease's credential after its 401 (never rejects: a failure is 'no'). */
function renewal(pool: TokenPool, lease: Lease): Promise<Renewal> {
  if (pool.renew === undefined) return Promise.resolve('no');
  return pool.renew(lease.name, lease.authorization).catch(() => 'no' as const);
}

/** A token from the pool; with tracing on, the wait is a span naming the token given (or why none was). */
function acquire(client: UpstreamClient, parent: SpanHandle | undefined, pool: TokenPool, options: AcquireOptions): Promise<Acquired> {
  if (!client.tracing.on) return pool.acquire(options);
  return client.tracing.child(SPANS.tokenWait, parent, { [ATTR.upstream]: client.name }, async (span) => {
    const acquired = await pool.acquire(options);
    if (acquired.kind === 'unavailable') span.set('etagere.unavailable', acquired.reason);
    else span.set(ATTR.token, acquired.lease.name);
    return acquired;
  });
}

async function onTokens(
  client: UpstreamClient,
  req: Req,
  maxBytes: number,
  pool: TokenPool,
  prefer: string | undefined,
  fair: Fair,
): Promise<PooledFetched> {
  const tried = new Set<string>();
  const resource = resourceOf(req.path, client.basePath);
  // Pool tokens send GraphQL queries only (mutations are refused before: paths/graphql/operation.ts).
  const points = pointsOf(req.method, resource === 'graphql' ? { mutation: false } : undefined);
  const acquireBase = { consumer: fair.consumer, weight: fair.weight, resource, points, background: req.background === true };
  let attempts = 0;
  /** A 404 tried on another member for its scopes (lacksScope): the answer unless that member answers better. */
  let notFound: PooledFetched | undefined;
  /** Retries after transit failures, and the last such failure (the answer if no lease is left for a retry). */
  let retried = 0;
  let transitFailed: PooledFetched | undefined;
  for (;;) {
    const acquired = await acquire(client, req.parent, pool, { ...acquireBase, prefer, exclude: tried });
    if (acquired.kind === 'unavailable') return notFound ?? transitFailed ?? acquired;
    const { lease } = acquired;
    fair.sent++;
    const credential = req.valueId?.(lease.authorization);
    const headers = { ...req.headers, ...headersOn(req.tokenHeaders, lease.name, credential), authorization: lease.authorization };
    const fetched = await fetchAttempt(client, { ...req, headers, token: lease.name }, maxBytes, retried > 0);
    const switched = prefer !== undefined && lease.name !== prefer;
    const on = { token: lease.name, credential, switched };
    const again = nextAttempt(client, req, retried, fetched);
    if (fetched.kind === 'failed') lease.cancel();
    if (again.kind === 'retry') {
      if (fetched.kind !== 'failed') lease.settle(fetched.status, headerReader(fetched.headers), undefined);
      transitFailed = { kind: 'fetched', f: fetched, ...on };
      retried++;
      await delay(again.delayMs);
      continue;
    }
    if (fetched.kind === 'failed') return { kind: 'fetched', f: fetched, ...on };
    const header = headerReader(fetched.headers);
    const status =
      fetched.kind === 'response' && req.tokenStatus !== undefined ? req.tokenStatus(fetched.status, fetched.body, header) : fetched.status;
    const limited = fetched.kind === 'response' && (status === 403 || status === 429);
    const verdict = lease.settle(status, header, limited ? fetched.body.toString('utf8') : undefined);
    attempts++;
    const more = fetched.kind === 'response' && attempts < Math.min(MAX_TOKEN_ATTEMPTS, pool.names.length);
    if (more && retryable(verdict)) {
      // A spent token is not tried again for this request. One paused by a secondary limit
      // is not chosen while paused, but may serve it once a short pause has been waited out.
      if (verdict.kind !== 'secondary') tried.add(lease.name);
      continue;
    }
    // The scope retry must not turn its 404 into a refusal (a rate limit): that gives the 404 back.
    // A 5xx or a failure goes on as it is, so that a stored entry may be served stale-if-error.
    if (notFound !== undefined && status >= 400 && status < 500) return notFound;
    if (more && status === 404 && lacksScope(pool, lease.name, header('x-accepted-oauth-scopes'), tried)) {
      tried.add(lease.name); // another member's scopes reach what this one's do not: its answer, not this 404
      notFound = { kind: 'fetched', f: fetched, ...on };
      continue;
    }
    const unauthorized = verdict.kind === 'unauthorized' && fetched.kind === 'response' ? fetched.body.toString('utf8', 0, 512) : undefined;
    if (unauthorized !== undefined && unauthorizedKind(unauthorized) === 'credentials') {
      // "Bad credentials": a renewable credential (an App installation token) is re-minted before
      // anything else. Another 401 (an App-only endpoint's) is about the request: nothing is minted.
      const renewed = await renewal(pool, lease);
      if (renewed !== 'no' && attempts < MAX_TOKEN_ATTEMPTS) {
        if (renewed === 'gone') tried.add(lease.name);
        continue; // renewed: the same member, with its new credential
      }
    }
    if (verdict.kind === 'unauthorized') {
      // Only a confirmed 401 kills the token. When no other token may be tried, the 401 goes to
      // the client at once and the confirmation runs on its own.
      const confirmation = confirmed(pool, lease.name, unauthorized);
      if (more && (await confirmation) === 'dead') {
        tried.add(lease.name); // the token is dead (the pool knows); the request was not at fault
        continue;
      }
    }
    return { kind: 'fetched', f: fetched, ...on };
  }
}
