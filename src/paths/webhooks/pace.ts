/**
 * Pure: the pace a delivery's body must keep while it is read. GitHub sends a delivery whole and
 * at once (it gives up on the answer after 10 s itself); a sender that trickles would hold one of
 * the few read slots, so it is cut: past the deadline, or, after a first second of grace, when
 * fewer bytes than the floor rate have arrived on average since the read began.
 */

/** The floor: 16 KiB a second on average after the grace (a 1 MB delivery may take a minute; GitHub sends megabytes a second). */
export const MIN_BYTES_PER_SECOND = 16_384;
/** The first second brings what it brings: a connection's first segments, a slow start. */
export const GRACE_MS = 1_000;

export interface PaceRules {
  /** The whole body within this long (webhooks.read_timeout_ms). */
  readonly deadlineMs: number;
  readonly minBytesPerSecond: number;
  readonly graceMs: number;
}

export type Pace = 'on-pace' | 'too-slow' | 'past-deadline';

/** Where a read stands `elapsedMs` after it began, with `received` bytes so far. */
export function paceOf(elapsedMs: number, received: number, rules: PaceRules): Pace {
  if (elapsedMs >= rules.deadlineMs) return 'past-deadline';
  if (elapsedMs > rules.graceMs && received < (rules.minBytesPerSecond * (elapsedMs - rules.graceMs)) / 1000) return 'too-slow';
  return 'on-pace';
}
