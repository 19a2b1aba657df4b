/**
 * The token pool across the workers of one machine, without Redis: the primary process owns the
 * pool (one budget, so one machine never overspends); each worker asks it for leases over the
 * cluster IPC channel and reports what the upstream said. Token values never cross the channel:
 * workers know them from their own config and map names to Authorization values themselves.
 *
 * worker -> primary  { t: 'etagere:pool', op: 'acquire', id, prefer?, exclude?, resource? }
 *                    { t: 'etagere:pool', op: 'settle', lease, status, headers, body? }
 *                    { t: 'etagere:pool', op: 'cancel', lease }
 *                    { t: 'etagere:pool', op: 'confirm', id, name, kind? }   (a 401 met on a token: GET /rate_limit)
 * primary -> worker  { t: 'etagere:pool', op: 'acquired', id, result }
 *                    { t: 'etagere:pool', op: 'confirmed', id, result }
 *                    { t: 'etagere:pool', op: 'state', tokens, rateLimit, rateLimits, queue }   (after changes)
 * A lease is reserved in the request's rate-limit resource; the primary confirms 401s and probes.
 */
import { classify } from './rate-limit.js';
import { unknownReport } from './report.js';
import { resourceNamed, type Resource } from './resource.js';
import type { Acquired, AcquireOptions, Confirmation, Lease, PoolRateLimit, TokenPool, TokenReport, UnauthorizedKind } from './types.js';

/** The `t` of every pool message, which tells them apart from other IPC traffic. */
const MESSAGE_TAG = 'etagere:pool';

/** Response headers a settle carries: all the pool's rules read. */
const SETTLE_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-used',
  'x-ratelimit-reset',
  'x-ratelimit-resource',
  'retry-after',
];

type Result =
  { kind: 'lease'; lease: number; name: string; switched: boolean; resource: Resource } | Extract<Acquired, { kind: 'unavailable' }>;

type RateLimits = Partial<Record<Resource, PoolRateLimit>>;

export type PoolMessage =
  | { t: typeof MESSAGE_TAG; op: 'acquire'; id: number; prefer?: string; exclude?: string[]; resource?: string }
  | { t: typeof MESSAGE_TAG; op: 'settle'; lease: number; status: number; headers: Record<string, string>; body?: string }
  | { t: typeof MESSAGE_TAG; op: 'cancel'; lease: number }
  | { t: typeof MESSAGE_TAG; op: 'confirm'; id: number; name: string; kind?: UnauthorizedKind }
  | { t: typeof MESSAGE_TAG; op: 'acquired'; id: number; result: Result }
  | { t: typeof MESSAGE_TAG; op: 'confirmed'; id: number; result: Confirmation }
  | { t: typeof MESSAGE_TAG; op: 'state'; tokens: TokenReport[]; rateLimit: PoolRateLimit; rateLimits?: RateLimits; queue: number };

export function isPoolMessage(message: unknown): message is PoolMessage {
  return typeof message === 'object' && message !== null && (message as { t?: unknown }).t === MESSAGE_TAG;
}

/** A channel to one side: the worker's `process`, or a cluster `Worker`. */
export interface Channel {
  send(message: PoolMessage): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

/**
 * Primary side: serves one worker's requests from `pool`. Returns a function that pushes the
 * pool's state to the worker (call it after changes; it is throttled).
 */
export function servePool(pool: TokenPool, worker: Channel): { push(): void; close(): void } {
  const leases = new Map<number, Lease>();
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  const send = (message: PoolMessage): void => {
    try {
      worker.send(message);
    } catch {
      // the worker is gone; its exit handler cleans up
    }
  };
  const pushNow = (): void => {
    timer = undefined;
    const state = { tokens: pool.snapshot(), rateLimit: pool.rateLimit(), rateLimits: pool.rateLimits(), queue: pool.queueLength() };
    send({ t: MESSAGE_TAG, op: 'state', ...state });
  };
  const push = (): void => {
    timer ??= setTimeout(pushNow, 50);
  };
  worker.on('message', (message: unknown) => {
    if (!isPoolMessage(message)) return;
    if (message.op === 'acquire') {
      const exclude = message.exclude === undefined ? undefined : new Set(message.exclude);
      pool.acquire({ prefer: message.prefer, exclude, resource: resourceNamed(message.resource) ?? 'core' }).then((acquired) => {
        if (acquired.kind === 'lease') {
          const id = ++next;
          const { name, switched, resource } = acquired.lease;
          leases.set(id, acquired.lease);
          send({ t: MESSAGE_TAG, op: 'acquired', id: message.id, result: { kind: 'lease', lease: id, name, switched, resource } });
        } else {
          send({ t: MESSAGE_TAG, op: 'acquired', id: message.id, result: acquired });
        }
        push();
      });
    } else if (message.op === 'settle') {
      const lease = leases.get(message.lease);
      leases.delete(message.lease);
      lease?.settle(message.status, (n) => message.headers[n], message.body);
      push();
    } else if (message.op === 'cancel') {
      leases.get(message.lease)?.cancel();
      leases.delete(message.lease);
      push();
    } else if (message.op === 'confirm') {
      const kind = message.kind === 'credentials' ? 'credentials' : 'request';
      const confirming = pool.confirm !== undefined && pool.names.includes(message.name) ? pool.confirm(message.name, kind) : undefined;
      void (confirming ?? Promise.resolve<Confirmation>('unknown')).then((result) => {
        send({ t: MESSAGE_TAG, op: 'confirmed', id: message.id, result });
        push();
      });
    }
  });
  return {
    push,
    /** The worker exited: its leases go back to the pool. */
    close() {
      if (timer !== undefined) clearTimeout(timer);
      for (const lease of leases.values()) lease.cancel();
      leases.clear();
    },
  };
}

/**
 * Worker side: a TokenPool whose decisions are the primary's. `authorization` maps token names
 * to the Authorization values this worker computes from its own config.
 */
export function createIpcTokenPool(
  channel: Channel,
  names: readonly string[],
  equivalent: boolean,
  authorization: ReadonlyMap<string, string>,
): TokenPool {
  let seq = 0;
  const pending = new Map<number, (acquired: Acquired) => void>();
  const confirming = new Map<number, (result: Confirmation) => void>();
  let tokens: TokenReport[] = names.map(unknownReport);
  let rateLimit: PoolRateLimit = { limit: 0, remaining: 0, used: 0, reset: Math.ceil(Date.now() / 1000) };
  let rateLimits: RateLimits = {};
  let queue = 0;
  let closed = false;

  const lease = (id: number, name: string, switched: boolean, resource: Resource): Lease => {
    let done = false;
    return {
      name,
      resource,
      authorization: authorization.get(name) ?? '',
      switched,
      settle(status, header, body) {
        const verdict = classify(status, header, body, Date.now());
        if (done) return verdict;
        done = true;
        const headers: Record<string, string> = {};
        for (const headerName of SETTLE_HEADERS) {
          const value = header(headerName);
          if (value !== undefined) headers[headerName] = value;
        }
        channel.send({
          t: MESSAGE_TAG,
          op: 'settle',
          lease: id,
          status,
          headers,
          ...(body === undefined ? {} : { body: body.slice(0, 4096) }),
        });
        return verdict;
      },
      cancel() {
        if (done) return;
        done = true;
        channel.send({ t: MESSAGE_TAG, op: 'cancel', lease: id });
      },
    };
  };

  channel.on('message', (message: unknown) => {
    if (!isPoolMessage(message)) return;
    if (message.op === 'acquired') {
      const resolve = pending.get(message.id);
      pending.delete(message.id);
      if (resolve === undefined) return;
      const result = message.result;
      const resource = result.kind === 'lease' ? (resourceNamed(result.resource) ?? 'core') : 'core';
      resolve(result.kind === 'lease' ? { kind: 'lease', lease: lease(result.lease, result.name, result.switched, resource) } : result);
    } else if (message.op === 'confirmed') {
      confirming.get(message.id)?.(message.result);
      confirming.delete(message.id);
    } else if (message.op === 'state') {
      tokens = message.tokens;
      rateLimit = message.rateLimit;
      rateLimits = message.rateLimits ?? { core: message.rateLimit };
      queue = message.queue;
    }
  });

  return {
    names,
    equivalent,
    acquire(opts: AcquireOptions = {}) {
      if (closed) return Promise.resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      const id = ++seq;
      return new Promise<Acquired>((resolve) => {
        pending.set(id, resolve);
        channel.send({
          t: MESSAGE_TAG,
          op: 'acquire',
          id,
          ...(opts.prefer === undefined ? {} : { prefer: opts.prefer }),
          ...(opts.exclude === undefined ? {} : { exclude: [...opts.exclude] }),
          ...(opts.resource === undefined ? {} : { resource: opts.resource }),
        });
      });
    },
    confirm(name, kind) {
      if (closed) return Promise.resolve<Confirmation>('unknown');
      const id = ++seq;
      return new Promise<Confirmation>((resolve) => {
        confirming.set(id, resolve);
        channel.send({ t: MESSAGE_TAG, op: 'confirm', id, name, ...(kind === undefined ? {} : { kind }) });
      });
    },
    rateLimit: (resource = 'core') =>
      rateLimits[resource] ?? (resource === 'core' ? rateLimit : { ...rateLimit, limit: 0, remaining: 0, used: 0 }),
    rateLimits: () => rateLimits,
    snapshot: () => tokens,
    queueLength: () => queue,
    learn: () => undefined, // the primary probes
    authorizationOf: (name) => authorization.get(name),
    close() {
      closed = true;
      for (const resolve of pending.values()) resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      pending.clear();
      for (const resolve of confirming.values()) resolve('unknown');
      confirming.clear();
    },
  };
}
