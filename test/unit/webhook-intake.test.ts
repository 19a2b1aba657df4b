/**
 * Reading webhook deliveries: a body read whole, at most `slots` at once, a later delivery taking
 * the slot of the read that began longest ago, and a read cut when it falls behind the pace.
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createIntake, type Intake } from '../../src/paths/webhooks/intake.js';

/** A request body the test writes into. */
const incoming = (headers: Record<string, string> = {}): PassThrough & { headers: Record<string, string> } =>
  Object.assign(new PassThrough(), { headers });
const asRequest = (stream: PassThrough): IncomingMessage => stream as unknown as IncomingMessage;

describe('the delivery intake', () => {
  let clock = 0;
  const intake = () =>
    createIntake({ slots: 2, maxBytes: 1_000, pace: { deadlineMs: 5_000, minBytesPerSecond: 100, graceMs: 1_000 } }, () => clock);
  beforeEach(() => {
    clock = 0;
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());

  /** Advances the clock and the pace's ticker together. */
  const pass = async (ms: number): Promise<void> => {
    clock += ms;
    await vi.advanceTimersByTimeAsync(ms);
  };

  it('reads a body whole and gives its slot back', async () => {
    const reader = intake();
    const req = incoming();
    const read = reader.read(asRequest(req));
    expect(reader.reading).toBe(1);
    req.end(Buffer.from('{"a":1}'));
    expect(await read).toEqual({ kind: 'read', body: Buffer.from('{"a":1}') });
    expect(reader.reading).toBe(0);
  });

  it('gives the slot of the read that began longest ago to a later delivery, which is read', async () => {
    const reader = intake();
    const [first, second, third] = [incoming(), incoming(), incoming()];
    const oldest = reader.read(asRequest(first));
    const next = reader.read(asRequest(second));
    await pass(10);
    const later = reader.read(asRequest(third));
    expect(await oldest).toEqual({ kind: 'evicted' });
    expect(reader.reading).toBe(2);
    third.end(Buffer.from('{}'));
    expect((await later).kind).toBe('read');
    second.end();
    expect((await next).kind).toBe('read');
  });

  it('cuts a read that falls below the floor after the grace, or passes the deadline', async () => {
    const reader = intake();
    const slow = incoming();
    const cut = reader.read(asRequest(slow));
    slow.write(Buffer.from('x'));
    await pass(1_200);
    expect(await cut).toEqual<Intake>({ kind: 'too-slow', why: 'rate' });
    const steady = incoming();
    const late = reader.read(asRequest(steady));
    let settled: Intake | undefined;
    void late.then((outcome) => (settled = outcome));
    for (let second = 0; second < 4; second++) {
      steady.write(Buffer.alloc(150));
      await pass(1_000);
    }
    expect(settled).toBeUndefined(); // above the floor
    steady.write(Buffer.alloc(150));
    await pass(1_000);
    expect(await late).toEqual<Intake>({ kind: 'too-slow', why: 'deadline' });
    expect(reader.reading).toBe(0);
  });

  it('refuses a body over the cap, by Content-Length at once or as it arrives', async () => {
    const reader = intake();
    expect(await reader.read(asRequest(incoming({ 'content-length': '1001' })))).toEqual({ kind: 'too-large' });
    expect(reader.reading).toBe(0);
    const chunked = incoming();
    const read = reader.read(asRequest(chunked));
    chunked.write(Buffer.alloc(1_001));
    expect(await read).toEqual({ kind: 'too-large' });
  });

  it('says so when the sender goes away', async () => {
    const reader = intake();
    const gone = incoming();
    const read = reader.read(asRequest(gone));
    gone.destroy();
    expect(await read).toEqual({ kind: 'failed' });
  });
});
