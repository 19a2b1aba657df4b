/**
 * The freshness floor of a quota schedule: the fewest upstream requests, 304s included,
 * that any cache needs to answer the schedule when
 * (a) it never serves a response more than F simulated seconds after it last got it, or had it
 *     confirmed (a 304), from the upstream: what bounds the data's age when a webhook delivery is
 *     missed; and
 * (b) it never serves a version older than the current one: a change forces a fetch at the next
 *     read after it.
 *
 * Greedy per repository gives the minimum: the first read that no earlier fetch covers needs a
 * fetch of its own version, no earlier than the last change before it; the latest such fetch is at
 * the read itself, and it covers every later read of that version up to F seconds after it. Fetching
 * earlier, or between reads, never covers more. Pure: no I/O, no clock.
 *
 * Read times follow bench/quota.ts: in minute m, consumer c of C sends its j-th request of R at
 * (m + (j + c / C) / R) simulated minutes, and the minute's changes come after its last request.
 * Times are counted in ticks of 1 / (R x C) minute, so "exactly F seconds later" is exact.
 */

export interface FreshnessFloorSchedule {
  /** requests[minute][consumer]: ranks (1-based repository numbers) in sending order. */
  readonly requests: readonly (readonly ArrayLike<number>[])[];
  /** mutations[minute]: ranks changed after that minute's requests. */
  readonly mutations: readonly (readonly number[])[];
}

export interface FreshnessFloor {
  /** F, in simulated seconds. */
  freshSeconds: number;
  /** Distinct repositories requested: one first fetch each (200s). */
  initial: number;
  /** Reads that had to see a version after the one last fetched (200s); the same as the quota floor's `changesSeen`. */
  changesSeen: number;
  /** Reads of an unchanged repository more than F after its last fetch or confirmation (304s with any validator). */
  expired: number;
  /** initial + changesSeen + expired. */
  total: number;
}

/** Greedy per repository (see the file's comment); a read exactly F seconds after the fetch is still covered. */
export function computeFreshnessFloor(schedule: FreshnessFloorSchedule, freshSeconds: number): FreshnessFloor {
  if (!(freshSeconds >= 0)) throw new RangeError(`freshSeconds must be at least 0, got ${freshSeconds}`);
  const version = new Map<number, number>();
  /** rank -> [tick of the last fetch or confirmation, version it got]. */
  const fetched = new Map<number, [number, number]>();
  let initial = 0;
  let changesSeen = 0;
  let expired = 0;
  const consumers = Math.max(0, ...schedule.requests.map((perConsumer) => perConsumer.length));
  const rate = Math.max(0, ...schedule.requests.flatMap((perConsumer) => perConsumer.map((ranks) => ranks.length)));
  const ticksPerMinute = rate * consumers;
  const freshTicks = (freshSeconds * ticksPerMinute) / 60;
  schedule.requests.forEach((perConsumer, minute) => {
    // Tick of (minute, consumer, j) = minute * R * C + j * C + consumer: j-major order is time order.
    for (let j = 0; j < rate; j++) {
      for (let consumer = 0; consumer < consumers; consumer++) {
        const rank = perConsumer[consumer]?.[j];
        if (rank === undefined) continue;
        const tick = minute * ticksPerMinute + j * consumers + consumer;
        const current = version.get(rank) ?? 0;
        const last = fetched.get(rank);
        if (last !== undefined && last[1] === current && tick - last[0] <= freshTicks) continue;
        if (last === undefined) initial++;
        else if (last[1] !== current) changesSeen++;
        else expired++;
        fetched.set(rank, [tick, current]);
      }
    }
    for (const rank of schedule.mutations[minute] ?? []) version.set(rank, (version.get(rank) ?? 0) + 1);
  });
  return { freshSeconds, initial, changesSeen, expired, total: initial + changesSeen + expired };
}
