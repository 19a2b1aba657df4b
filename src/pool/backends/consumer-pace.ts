/**
 * What each consumer asked of the pool's secondary-limit points lately, and spent (consumer keys
 * on), per points budget: counts per second over the last minute, so a flood of requests costs no
 * memory and no allocation. Before a lease, the pool asks it how many points a consumer must
 * leave to the others in a window (points-share.ts has the rule; local-token.ts `heldUntil` applies
 * it). Configured consumers only (keys and OIDC issuers' accounts): the table never grows.
 */
import { LOG_SPAN_MS } from '../rules/choose.js';
import type { PaceKind } from '../rules/types.js';
import { owedPoints, type WindowUse } from '../rules/points-share.js';

/** Seconds the counts look back: the pace's longest window. */
const SPAN_SECONDS = Math.ceil(LOG_SPAN_MS / 1000);

/** Counts per second over the last SPAN_SECONDS seconds, in a ring. */
class SecondCounts {
  readonly #counts = new Int32Array(SPAN_SECONDS);
  /** The newest second the ring holds. */
  #second = 0;

  /** Moves the ring on to `second`, clearing the seconds that went by. */
  #advance(second: number): void {
    if (second <= this.#second) return;
    const gone = Math.min(SPAN_SECONDS, second - this.#second);
    for (let step = 1; step <= gone; step++) this.#counts[(this.#second + step) % SPAN_SECONDS] = 0;
    this.#second = second;
  }

  add(at: number, count: number): void {
    const second = Math.floor(at / 1000);
    this.#advance(second);
    if (second <= this.#second - SPAN_SECONDS) return; // older than the ring
    const slot = second % SPAN_SECONDS;
    this.#counts[slot] = Math.max(0, this.#counts[slot]! + count);
  }

  /** The count over the last `windowMs` up to `at` (to the second). */
  within(at: number, windowMs: number): number {
    const second = Math.floor(at / 1000);
    this.#advance(second);
    const seconds = Math.min(SPAN_SECONDS, Math.ceil(windowMs / 1000));
    let sum = 0;
    for (let back = 0; back < seconds; back++) sum += this.#counts[(second - back) % SPAN_SECONDS]!;
    return sum;
  }
}

/** One consumer's counts in one points budget; `asked` and `spent` are those of the window last looked at (owedPoints reads them). */
interface Tally extends WindowUse {
  readonly asks: SecondCounts;
  readonly spends: SecondCounts;
  /** When it last asked (epoch ms): whether it is active in a window. */
  lastAsk: number;
  asked: number;
  spent: number;
}

export class ConsumerPace {
  readonly #byKind: Record<PaceKind, Map<string, Tally>>;
  readonly #reserveFraction: number;

  /** `weights`: every configured consumer's weight (queue.ts's lanes have the same); `reserveFraction`: consumers.reserve_fraction. */
  constructor(weights: ReadonlyMap<string, number>, reserveFraction: number) {
    const tally = (weight: number): Tally => ({
      weight,
      asks: new SecondCounts(),
      spends: new SecondCounts(),
      lastAsk: -Infinity,
      asked: 0,
      spent: 0,
    });
    const table = (): Map<string, Tally> => new Map([...weights].map(([name, weight]) => [name, tally(weight)]));
    this.#byKind = { rest: table(), graphql: table() };
    this.#reserveFraction = reserveFraction;
  }

  /** A request of `consumer` asks for points (once per lease it asks for). */
  ask(consumer: string | undefined, kind: PaceKind, at: number): void {
    const tally = consumer === undefined ? undefined : this.#byKind[kind].get(consumer);
    if (tally === undefined) return;
    tally.asks.add(at, 1);
    tally.lastAsk = at;
  }

  /** `points` were sent for `consumer` at `at` (a negative count gives them back: the shared budget refused the lease). */
  spend(consumer: string | undefined, kind: PaceKind, points: number, at: number): void {
    const tally = consumer === undefined ? undefined : this.#byKind[kind].get(consumer);
    tally?.spends.add(at, points);
  }

  /**
   * The points `consumer` must leave unspent in a window of `windowMs` that holds `poolPoints` in
   * all: what every other consumer active in it is owed (points-share.ts). 0 when none is.
   */
  held(consumer: string, kind: PaceKind, windowMs: number, poolPoints: number, at: number): number {
    const tallies = this.#byKind[kind];
    const since = at - windowMs;
    let total = tallies.get(consumer)?.weight ?? 0;
    let others = false;
    for (const [name, tally] of tallies) {
      if (name === consumer || tally.lastAsk <= since) continue;
      total += tally.weight;
      others = true;
    }
    if (!others) return 0;
    let held = 0;
    for (const [name, tally] of tallies) {
      if (name === consumer || tally.lastAsk <= since) continue;
      tally.asked = tally.asks.within(at, windowMs);
      tally.spent = tally.spends.within(at, windowMs);
      held += owedPoints(tally, total, poolPoints, this.#reserveFraction);
    }
    return held;
  }
}
