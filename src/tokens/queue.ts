/**
 * The pool's bounded wait queue. A request that finds no token it can use right now waits here, in
 * arrival order, until a reservation comes back, a short pause ends, or its timeout passes (then it
 * is answered busy). The queue knows nothing of tokens: `attempt` says whether a request can be
 * answered now, and the pool calls `pump()` whenever something frees up.
 */
import type { AcquireOptions, Acquired, PoolEvents } from './types.js';

/** One try at answering a request: an answer, or "wait" (until something frees up, or until `until`, epoch ms). */
export type Attempt = Acquired | { kind: 'wait'; until?: number };

export interface WaitQueueSettings {
  attempt(opts: AcquireOptions): Attempt;
  /** How long a request may wait; 0: never wait. */
  timeoutMs: number;
  maxQueue: number;
  now: () => number;
  events: Pick<PoolEvents, 'rejected' | 'queued'>;
}

export interface WaitQueue {
  /** Answers now when `attempt` can; else queues the request (or answers busy when it may not wait). */
  acquire(opts: AcquireOptions): Promise<Acquired>;
  /** Answers waiters from the head for as long as `attempt` can. */
  pump(): void;
  length(): number;
  /** Answers every waiter busy and stops the wake-up timer. */
  close(): void;
}

interface Waiter {
  opts: AcquireOptions;
  since: number;
  timer: NodeJS.Timeout;
  resolve(answer: Acquired): void;
}

/** The answer when no slot freed up in time, the queue is full, or the pool is closed. */
export function busy(): Acquired {
  return { kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 };
}

export function createWaitQueue(settings: WaitQueueSettings): WaitQueue {
  const queue: Waiter[] = [];
  let wake: { at: number; timer: NodeJS.Timeout } | undefined;

  /** Pumps the queue again at `at` (a pause ends), keeping only the earliest such timer. */
  const wakeAt = (at: number): void => {
    if (wake !== undefined && wake.at <= at) return;
    if (wake !== undefined) clearTimeout(wake.timer);
    const timer = setTimeout(
      () => {
        wake = undefined;
        pump();
      },
      Math.max(0, at - settings.now()) + 1,
    );
    timer.unref();
    wake = { at, timer };
  };

  const pump = (): void => {
    while (queue.length > 0) {
      const waiter = queue[0]!;
      const tried = settings.attempt(waiter.opts);
      if (tried.kind === 'wait') {
        if (tried.until !== undefined) wakeAt(tried.until);
        return;
      }
      queue.shift();
      clearTimeout(waiter.timer);
      settings.events.queued?.((settings.now() - waiter.since) / 1000);
      waiter.resolve(tried);
    }
  };

  const enqueue = (opts: AcquireOptions, until: number | undefined): Promise<Acquired> =>
    new Promise<Acquired>((resolve) => {
      const waiter: Waiter = {
        opts,
        since: settings.now(),
        resolve,
        timer: setTimeout(() => {
          const index = queue.indexOf(waiter);
          if (index >= 0) queue.splice(index, 1);
          settings.events.rejected?.('queue_timeout');
          resolve(busy());
        }, settings.timeoutMs),
      };
      waiter.timer.unref();
      queue.push(waiter);
      if (until !== undefined) wakeAt(until);
    });

  return {
    acquire(opts) {
      const tried = settings.attempt(opts);
      if (tried.kind !== 'wait') return Promise.resolve(tried);
      if (queue.length >= settings.maxQueue || settings.timeoutMs === 0) {
        settings.events.rejected?.('queue_full');
        return Promise.resolve(busy());
      }
      return enqueue(opts, tried.until);
    },
    pump,
    length: () => queue.length,
    close() {
      if (wake !== undefined) clearTimeout(wake.timer);
      for (const waiter of queue.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.resolve(busy());
      }
    },
  };
}
