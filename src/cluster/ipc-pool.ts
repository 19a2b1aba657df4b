/**
 * The token pool across the workers of one machine, without Redis: the primary process owns the
 * pool (one budget, so one machine never overspends); each worker asks it for leases over the
 * cluster IPC channel and reports what the upstream said. Token values never cross the channel:
 * workers know them from their own config and map names to Authorization values themselves.
 *
 * worker -> primary  { t: 'etagere:pool', op: 'acquire', id, prefer?, exclude? }
 *                    { t: 'etagere:pool', op: 'settle', lease, status, headers, body? }
 *                    { t: 'etagere:pool', op: 'cancel', lease }
 * primary -> worker  { t: 'etagere:pool', op: 'acquired', id, result }
 *                    { t: 'etagere:pool', op: 'state', tokens, rateLimit, queue }   (after changes)
 */
import type { Acquired, AcquireOptions, Lease, TokenPool, TokenReport } from '../tokens/pool.js';
import { classify, type PoolRateLimit } from '../tokens/rate-limit.js';

const T = 'etagere:pool';

/** Response headers a settle carries: all the pool's rules read. */
const SETTLE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-used', 'x-ratelimit-reset', 'x-ratelimit-resource', 'retry-after'];

type Result = { kind: 'lease'; lease: number; name: string; switched: boolean } | Extract<Acquired, { kind: 'unavailable' }>;

export type PoolMessage =
  | { t: typeof T; op: 'acquire'; id: number; prefer?: string; exclude?: string[] }
  | { t: typeof T; op: 'settle'; lease: number; status: number; headers: Record<string, string>; body?: string }
  | { t: typeof T; op: 'cancel'; lease: number }
  | { t: typeof T; op: 'acquired'; id: number; result: Result }
  | { t: typeof T; op: 'state'; tokens: TokenReport[]; rateLimit: PoolRateLimit; queue: number };

export function isPoolMessage(m: unknown): m is PoolMessage {
  return typeof m === 'object' && m !== null && (m as { t?: unknown }).t === T;
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
  const send = (m: PoolMessage): void => {
    try {
      worker.send(m);
    } catch {
      // the worker is gone; its exit handler cleans up
    }
  };
  const pushNow = (): void => {
    timer = undefined;
    send({ t: T, op: 'state', tokens: pool.snapshot(), rateLimit: pool.rateLimit(), queue: pool.queueLength() });
  };
  const push = (): void => {
    timer ??= setTimeout(pushNow, 50);
  };
  worker.on('message', (m: unknown) => {
    if (!isPoolMessage(m)) return;
    if (m.op === 'acquire') {
      pool.acquire({ prefer: m.prefer, exclude: m.exclude === undefined ? undefined : new Set(m.exclude) }).then((a) => {
        if (a.kind === 'lease') {
          const id = ++next;
          leases.set(id, a.lease);
          send({ t: T, op: 'acquired', id: m.id, result: { kind: 'lease', lease: id, name: a.lease.name, switched: a.lease.switched } });
        } else {
          send({ t: T, op: 'acquired', id: m.id, result: a });
        }
        push();
      });
    } else if (m.op === 'settle') {
      const lease = leases.get(m.lease);
      leases.delete(m.lease);
      lease?.settle(m.status, (n) => m.headers[n], m.body);
      push();
    } else if (m.op === 'cancel') {
      leases.get(m.lease)?.cancel();
      leases.delete(m.lease);
      push();
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
  const pending = new Map<number, (a: Acquired) => void>();
  let tokens: TokenReport[] = names.map((name) => ({
    name,
    state: 'unknown',
    limit: null,
    remaining: null,
    used: null,
    reset: null,
    in_flight: 0,
    paused_until: null,
    last_error: null,
    last_error_at: null,
  }));
  let rateLimit: PoolRateLimit = { limit: 0, remaining: 0, used: 0, reset: Math.ceil(Date.now() / 1000) };
  let queue = 0;
  let closed = false;

  const lease = (id: number, name: string, switched: boolean): Lease => {
    let done = false;
    return {
      name,
      authorization: authorization.get(name) ?? '',
      switched,
      settle(status, header, body) {
        const v = classify(status, header, body, Date.now());
        if (done) return v;
        done = true;
        const headers: Record<string, string> = {};
        for (const h of SETTLE_HEADERS) {
          const value = header(h);
          if (value !== undefined) headers[h] = value;
        }
        channel.send({ t: T, op: 'settle', lease: id, status, headers, ...(body === undefined ? {} : { body: body.slice(0, 4096) }) });
        return v;
      },
      cancel() {
        if (done) return;
        done = true;
        channel.send({ t: T, op: 'cancel', lease: id });
      },
    };
  };

  channel.on('message', (m: unknown) => {
    if (!isPoolMessage(m)) return;
    if (m.op === 'acquired') {
      const resolve = pending.get(m.id);
      pending.delete(m.id);
      if (resolve === undefined) return;
      const r = m.result;
      resolve(r.kind === 'lease' ? { kind: 'lease', lease: lease(r.lease, r.name, r.switched) } : r);
    } else if (m.op === 'state') {
      tokens = m.tokens;
      rateLimit = m.rateLimit;
      queue = m.queue;
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
          t: T,
          op: 'acquire',
          id,
          ...(opts.prefer === undefined ? {} : { prefer: opts.prefer }),
          ...(opts.exclude === undefined ? {} : { exclude: [...opts.exclude] }),
        });
      });
    },
    rateLimit: () => rateLimit,
    snapshot: () => tokens,
    queueLength: () => queue,
    learn: () => undefined, // the primary probes
    authorizationOf: (name) => authorization.get(name),
    close() {
      closed = true;
      for (const resolve of pending.values()) resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      pending.clear();
    },
  };
}
