/**
 * Reading deliveries: at most `slots` bodies at once (each may be up to the body cap, so this bounds
 * memory), each at the pace of pace.ts. Every delivery is admitted: when the slots are full, the
 * read that began longest ago gives its slot up (it is answered 503). A genuine delivery arrives
 * whole within milliseconds, so senders that hold slots without finishing (trickling, stalled, or
 * forging a well-formed signature the body will not match) cannot keep it out: to push it out they
 * must open `slots` connections within those milliseconds, and each one they keep is cut by the
 * pace within about a second anyway.
 */
import type { IncomingMessage } from 'node:http';
import { CappedReader } from '../../platform/bytes.js';
import { paceOf, type PaceRules } from './pace.js';

export type Intake =
  | { kind: 'read'; body: Buffer }
  | { kind: 'too-large' }
  /** The sender went away. */
  | { kind: 'failed' }
  | { kind: 'too-slow'; why: 'rate' | 'deadline' }
  /** Its slot went to a later delivery. */
  | { kind: 'evicted' };

export interface IntakeSettings {
  readonly slots: number;
  readonly maxBytes: number;
  readonly pace: PaceRules;
}

export interface DeliveryIntake {
  /** The body of `req`, or why there is none; resolves within the deadline whatever the sender does. */
  read(req: IncomingMessage): Promise<Intake>;
  /** Bodies being read now. */
  readonly reading: number;
}

/** How often a read's pace is checked. */
const TICK_MS = 100;

export function createIntake(settings: IntakeSettings, now: () => number = Date.now): DeliveryIntake {
  /** Reads in progress, oldest first: how to stop each. */
  const reads = new Set<(outcome: Intake) => void>();
  return {
    read(req) {
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > settings.maxBytes) return Promise.resolve({ kind: 'too-large' });
      if (reads.size >= settings.slots) reads.values().next().value!({ kind: 'evicted' });
      return new Promise((resolve) => {
        const startedAt = now();
        const reader = new CappedReader(req, settings.maxBytes, ['error', 'close']);
        const stop = (outcome: Intake): void => {
          if (!reads.delete(stop)) return;
          clearInterval(ticker);
          reader.stop();
          resolve(outcome);
        };
        void reader.done.then((read) => {
          if (read.kind === 'failed') return stop({ kind: 'failed' });
          if (read.kind === 'read') return stop({ kind: 'read', body: Buffer.concat(read.chunks, read.size) });
          stop({ kind: 'too-large' });
          req.resume(); // the rest is read and dropped while the 413 goes out
        });
        const ticker = setInterval(() => {
          const pace = paceOf(now() - startedAt, reader.size, settings.pace);
          if (pace !== 'on-pace') stop({ kind: 'too-slow', why: pace === 'past-deadline' ? 'deadline' : 'rate' });
        }, TICK_MS);
        ticker.unref();
        reads.add(stop);
      });
    },
    get reading() {
      return reads.size;
    },
  };
}
