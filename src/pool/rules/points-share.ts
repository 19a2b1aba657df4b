/**
 * Pure: the secondary-limit points consumers leave each other (consumer keys on). A token's points
 * come back as its sliding windows move (choose.ts); without this rule a consumer that asks
 * without pause takes each point the moment it returns, and one that asks every few seconds finds
 * none left (its request waits for points it never gets, or is refused).
 *
 * In each window of the pace (the minute, the 10 s burst), per points budget:
 * - a consumer that asked for points in the window is active there;
 * - its share is its weight over the active consumers' weights of the pool's points in the window,
 *   and its reserve `reserve_fraction` of that share (as for the quota: fair-share.ts);
 * - it is owed max(min(share, asked + 1), reserve) - spent: what it asked for and did not get and
 *   one point more for its next request, up to its share, and at least its reserve;
 * - another consumer's request may take points only while the pool's points left in the window,
 *   after it, still cover what every other active consumer is owed.
 *
 * So a consumer asking within its share finds its next point, and one that just became active
 * finds at least its reserve although another took every point as it came back; one asking for
 * more than its share takes everything the others leave. A consumer that asked nothing in a
 * window holds nothing there. No I/O, no timers: counts and budgets are arguments.
 */

/** A consumer's numbers in one window: its weight, the requests for points it made, the points it spent. */
export interface WindowUse {
  readonly weight: number;
  readonly asked: number;
  readonly spent: number;
}

/**
 * The points a consumer is owed in a window: max(min(share, asked + 1), reserve) - spent, never
 * below 0. Its share is its weight over `totalWeight` (the active consumers') of `poolPoints`, its
 * reserve `reserveFraction` of the share. Not active (no ask in the window): nothing.
 */
export function owedPoints(use: WindowUse, totalWeight: number, poolPoints: number, reserveFraction: number): number {
  if (use.asked <= 0 || totalWeight <= 0 || poolPoints <= 0) return 0;
  const share = (poolPoints * use.weight) / totalWeight;
  const reserve = share * Math.min(1, Math.max(0, reserveFraction));
  return Math.max(0, Math.max(Math.min(share, use.asked + 1), reserve) - use.spent);
}

/**
 * Whether a request of `charge` points may go now: the points left in the window after it (`free`
 * less `charge`) cover `held`, what the other active consumers are owed.
 */
export function leavesOwed(free: number, charge: number, held: number): boolean {
  return free - charge >= held - 1e-9;
}
