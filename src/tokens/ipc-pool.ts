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
import { classify } from './rate-limit.js';
import { unknownReport } from './report.js';
import type { Acquired, AcquireOptions, Lease, PoolRateLimit, TokenPool, TokenReport } from './types.js';

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

type Result = { kind: 'lease'; lease: number; name: string; switched: boolean } | Extract<Acquired, { kind: 'unavailable' }>;

export type PoolMessage =
  | { t: typeof MESSAGE_TAG; op: 'acquire'; id: number; prefer?: string; exclude?: string[] }
  | { t: typeof MESSAGE_TAG; op: 'settle'; lease: number; status: number; headers: Record<string, string>; body?: string }
  | { t: typeof MESSAGE_TAG; op: 'cancel'; lease: number }
  | { t: typeof MESSAGE_TAG; op: 'acquired'; id: number; result: Result }
  | { t: typeof MESSAGE_TAG; op: 'state'; tokens: TokenReport[]; rateLimit: PoolRateLimit; queue: number };

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
    send({ t: MESSAGE_TAG, op: 'state', tokens: pool.snapshot(), rateLimit: pool.rateLimit(), queue: pool.queueLength() });
  };
  const push = (): void => {
    timer ??= setTimeout(pushNow, 50);
  };
  worker.on('message', (message: unknown) => {
    if (!isPoolMessage(message)) return;
    if (message.op === 'acquire') {
      pool
        .acquire({ prefer: message.prefer, exclude: message.exclude === undefined ? undefined : new Set(message.exclude) })
        .then((acquired) => {
          if (acquired.kind === 'lease') {
            const id = ++next;
            leases.set(id, acquired.lease);
            send({
              t: MESSAGE_TAG,
              op: 'acquired',
              id: message.id,
              result: { kind: 'lease', lease: id, name: acquired.lease.name, switched: acquired.lease.switched },
            });
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
  let tokens: TokenReport[] = names.map(unknownReport);
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
      resolve(result.kind === 'lease' ? { kind: 'lease', lease: lease(result.lease, result.name, result.switched) } : result);
    } else if (message.op === 'state') {
      tokens = message.tokens;
      rateLimit = message.rateLimit;
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
