/**
 * The pool's bounded wait queue. A request that finds no token it can use right now waits here
 * until a reservation comes back, a short pause ends, or its timeout passes (then it is answered
 * busy). The queue knows nothing of tokens: `attempt` says whether a request can be answered now,
 * and the pool calls `pump()` whenever something frees up.
 *
 * Free slots go to the waiters in weighted fair order by consumer (start-time fair queueing): each
 * consumer has a lane; a request that joins a lane is tagged with the later of the queue's virtual
 * time and the end of the lane's previous request, and each request advances its lane by
 * 1 / weight. The waiter with the smallest tag is served next (ties: the earlier arrival), and the
 * virtual time moves to its tag. So one consumer's burst never holds another consumer's request
 * for more than about one turn per other waiting consumer, a consumer that was idle banks no
 * credit, and while several wait, each gets slots in proportion to its weight. Requests without a
 * consumer share one lane: first in, first out.
 *
 * With consumers, each lane has a bound of its own (`laneBound`: pool.max_queue split by weight,
 * fair-share.ts `queueBounds`), so one consumer's burst never fills the room another needs to wait
 * its turn; without, `maxQueue` bounds the whole queue.
 *
 * A lane whose head waits for a reason of its own (its consumer's points are owed to other
 * consumers: points-share.ts) holds up no other lane. A newcomer first lets the waiters take what
 * came back since the last pump (points return with time, not with an event), then tries.
 */
import type { AcquireOptions, Acquired, PoolEvents } from '../rules/types.js';

/**
 * One try at answering a request: an answer, or "wait" (until something frees up, or until
 * `until`, epoch ms). `own`: what holds it is its own (its consumer's points are owed to others),
 * so the waiters of other consumers may be served meanwhile.
 */
export type Attempt = Acquired | { kind: 'wait'; until?: number; own?: boolean };

export interface WaitQueueSettings {
  attempt(opts: AcquireOptions): Attempt;
  /** How long a request may wait; 0: never wait. */
  timeoutMs: number;
  /** How many requests may wait at once in all (when there is no `laneBound`). */
  maxQueue: number;
  /** How many requests of one consumer ('' for none) may wait at once; replaces the whole-queue bound. */
  laneBound?: ((consumer: string) => number) | undefined;
  now: () => number;
  events: Pick<PoolEvents, 'rejected' | 'queued'>;
  /** The answer to a waiter whose time ran out, when it is not busy (the pool's points were spent); it tells its event. */
  timedOut?(opts: AcquireOptions): Acquired | undefined;
}

export interface WaitQueue {
  /** Answers now when `attempt` can; else queues the request (or answers busy when it may not wait). */
  acquire(opts: AcquireOptions): Promise<Acquired>;
  /** Answers waiters, in weighted fair order, for as long as `attempt` can. */
  pump(): void;
  length(): number;
  /** Answers every waiter busy and stops the wake-up timer. */
  close(): void;
}

interface Waiter {
  opts: AcquireOptions;
  since: number;
  /** Virtual start time: the order of service. */
  tag: number;
  /** Arrival order, for equal tags. */
  seq: number;
  lane: Lane;
  timer: NodeJS.Timeout;
  resolve(answer: Acquired): void;
}

interface Lane {
  readonly name: string;
  readonly waiters: Waiter[];
  /** Virtual end of the lane's last queued request. */
  finish: number;
}

/** Weights are bounded, so that no lane's step is too small (or too large) to move its tags. */
const MIN_WEIGHT = 1e-3;
const MAX_WEIGHT = 1e3;

function stepOf(weight: number | undefined): number {
  const usable = weight !== undefined && Number.isFinite(weight) && weight > 0 ? weight : 1;
  return 1 / Math.min(MAX_WEIGHT, Math.max(MIN_WEIGHT, usable));
}

/** The answer when no slot freed up in time, the queue is full, or the pool is closed. */
export function busy(): Acquired {
  return { kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 };
}

/** Background work that found no token free at once: skipped, not queued. */
function skipped(settings: WaitQueueSettings): Acquired {
  settings.events.rejected?.('background');
  return busy();
}

/** The lanes, the virtual time and the count of waiters: the functions below take it. */
interface Lanes {
  readonly byName: Map<string, Lane>;
  virtual: number;
  seq: number;
  count: number;
}

/** The waiter served next: the smallest tag over the lanes' heads (then the earlier arrival), lanes held back in this pump aside. */
function next(lanes: Lanes, held: ReadonlySet<Lane> | undefined): Waiter | undefined {
  let best: Waiter | undefined;
  for (const lane of lanes.byName.values()) {
    if (held?.has(lane) === true) continue;
    const head = lane.waiters[0];
    if (head !== undefined && (best === undefined || head.tag < best.tag || (head.tag === best.tag && head.seq < best.seq))) best = head;
  }
  return best;
}

function remove(lanes: Lanes, waiter: Waiter): boolean {
  const { lane } = waiter;
  const index = lane.waiters.indexOf(waiter);
  if (index < 0) return false;
  lane.waiters.splice(index, 1);
  lanes.count--;
  // An empty lane is forgotten: its consumer comes back at the virtual time, with no credit.
  if (lane.waiters.length === 0) lanes.byName.delete(lane.name);
  return true;
}

function join(lanes: Lanes, opts: AcquireOptions): { lane: Lane; tag: number; seq: number } {
  const name = opts.consumer ?? '';
  let lane = lanes.byName.get(name);
  if (lane === undefined) {
    lane = { name, waiters: [], finish: lanes.virtual };
    lanes.byName.set(name, lane);
  }
  const tag = Math.max(lanes.virtual, lane.finish);
  lane.finish = tag + stepOf(opts.weight);
  return { lane, tag, seq: lanes.seq++ };
}

/** Whether a request of `consumer` finds no room to wait: its lane's bound, else the whole queue's. */
function full(lanes: Lanes, settings: WaitQueueSettings, consumer: string): boolean {
  if (settings.laneBound === undefined) return lanes.count >= settings.maxQueue;
  return (lanes.byName.get(consumer)?.waiters.length ?? 0) >= settings.laneBound(consumer);
}

export function createWaitQueue(settings: WaitQueueSettings): WaitQueue {
  const lanes: Lanes = { byName: new Map(), virtual: 0, seq: 0, count: 0 };
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
    /** Lanes whose head waits for a reason of its own (its consumer's points are owed to others): the next lanes go meanwhile. */
    let held: Set<Lane> | undefined;
    for (let waiter = next(lanes, held); waiter !== undefined; waiter = next(lanes, held)) {
      const tried = settings.attempt(waiter.opts);
      if (tried.kind === 'wait') {
        if (tried.until !== undefined) wakeAt(tried.until);
        if (tried.own !== true) return;
        (held ??= new Set()).add(waiter.lane);
        continue;
      }
      remove(lanes, waiter);
      lanes.virtual = Math.max(lanes.virtual, waiter.tag);
      clearTimeout(waiter.timer);
      settings.events.queued?.((settings.now() - waiter.since) / 1000);
      waiter.resolve(tried);
    }
  };

  const enqueue = (opts: AcquireOptions, until: number | undefined): Promise<Acquired> =>
    new Promise<Acquired>((resolve) => {
      const place = join(lanes, opts);
      const waiter: Waiter = {
        opts,
        since: settings.now(),
        ...place,
        resolve,
        timer: setTimeout(() => {
          if (!remove(lanes, waiter)) return;
          const answer = settings.timedOut?.(opts);
          if (answer === undefined) settings.events.rejected?.('queue_timeout');
          resolve(answer ?? busy());
        }, settings.timeoutMs),
      };
      waiter.timer.unref();
      place.lane.waiters.push(waiter);
      lanes.count++;
      if (until !== undefined) wakeAt(until);
    });

  return {
    acquire(opts) {
      // Background work goes after waiting clients, and never waits itself.
      if (opts.background === true && lanes.count > 0) return Promise.resolve(skipped(settings));
      // Waiters first: what came back since the last pump (points return with time) goes in their order, not to a newcomer.
      if (lanes.count > 0) pump();
      const tried = settings.attempt(opts);
      if (tried.kind === 'wait' && opts.background === true) return Promise.resolve(skipped(settings));
      if (tried.kind !== 'wait') return Promise.resolve(tried);
      if (full(lanes, settings, opts.consumer ?? '') || settings.timeoutMs === 0) {
        // No wait allowed: what a waiter gets when its time runs out (a 429 for points), else busy.
        const answer = settings.timeoutMs === 0 ? settings.timedOut?.(opts) : undefined;
        if (answer !== undefined) return Promise.resolve(answer);
        settings.events.rejected?.('queue_full');
        return Promise.resolve(busy());
      }
      return enqueue(opts, tried.until);
    },
    pump,
    length: () => lanes.count,
    close() {
      if (wake !== undefined) clearTimeout(wake.timer);
      for (const lane of [...lanes.byName.values()]) {
        for (const waiter of lane.waiters.splice(0)) {
          clearTimeout(waiter.timer);
          waiter.resolve(busy());
        }
      }
      lanes.byName.clear();
      lanes.count = 0;
    },
  };
}
