/**
 * Parity of the token pool's rules and their Lua twin: one table of cases runs step by step both
 * through the shared budget's scripts (shared-scripts.ts, EVAL'd on a real redis-server) and
 * through state.ts, which the in-process pool applies. After every step both sides must agree on
 * the verdict (reservation granted or refused, and whether waiting is worth it), on the reply's
 * numbers, on the numbers stored in the token's hash and on the live reservations.
 *
 * A step's `want` pins what the rules should give, so both sides being wrong the same way fails too.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify, readRateLimit } from '../../src/tokens/rate-limit.js';
import { budgetKeys, decodeReply, hashOf, READ, RESERVE, reserveArgs, SETTLE, settleArgs } from '../../src/tokens/shared-scripts.js';
import { canReserve, heldByOthers, react, settle, UNSEEN, type Settlement } from '../../src/tokens/state.js';
import type { TokenNumbers } from '../../src/tokens/types.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const NOW = 1_800_000_000_000;
const NOW_S = NOW / 1000;
const TOKEN = 'tok';
const CAP = 10;
const LEASE_MS = 60_000;

type Step =
  | { op: 'reserve'; id: string; at?: number; cap?: number; want?: Partial<Outcome> }
  | {
      op: 'settle';
      id?: string;
      at?: number;
      status: number;
      headers?: Record<string, string>;
      body?: string;
      repeats?: number;
      want?: Partial<Outcome>;
    }
  | { op: 'read'; at?: number; want?: Partial<Outcome> };

interface Case {
  name: string;
  /** The token's stored numbers before the first step; none: never seen (no hash). */
  stored?: TokenNumbers;
  /** Reservations held before the first step: id -> expiry (epoch ms). */
  reservations?: Record<string, number>;
  steps: Step[];
}

/** What a step ends in. */
interface Outcome {
  /** The script's flag: a reservation granted (RESERVE), or 1 (SETTLE, READ). */
  granted: boolean;
  /** After a refusal: the units are only held by requests in flight (the pool asks again). */
  heldByOthers: boolean;
  numbers: TokenNumbers;
  reserved: number;
}

/** A token seen with 5000 an hour, `remaining` left and its reset 10 minutes away. */
const seen = (remaining: number, more: Partial<TokenNumbers> = {}): TokenNumbers => ({
  limit: 5000,
  remaining,
  reset: NOW_S + 600,
  pausedUntil: 0,
  dead: false,
  known: true,
  ...more,
});
const rl = (remaining: number, limit = 5000, reset = NOW_S + 600): Record<string, string> => ({
  'x-ratelimit-limit': String(limit),
  'x-ratelimit-remaining': String(remaining),
  'x-ratelimit-reset': String(reset),
});
const SECONDARY_BODY = '{"message":"You have exceeded a secondary rate limit"}';

const CASES: Case[] = [
  {
    name: 'an unseen token holds one unit until an answer teaches its numbers',
    steps: [
      { op: 'reserve', id: 'r1', want: { granted: true, reserved: 1 } },
      { op: 'reserve', id: 'r2', want: { granted: false, heldByOthers: true } },
      { op: 'settle', id: 'r1', status: 200, headers: rl(4999), want: { numbers: seen(4999), reserved: 0 } },
      { op: 'reserve', id: 'r3', want: { granted: true } },
    ],
  },
  { name: 'reserve with quota', stored: seen(10), steps: [{ op: 'reserve', id: 'r1', want: { granted: true, reserved: 1 } }] },
  { name: 'reserve without quota', stored: seen(0), steps: [{ op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } }] },
  {
    name: 'every unit reserved by requests in flight',
    stored: seen(2),
    reservations: { a: NOW + LEASE_MS, b: NOW + LEASE_MS },
    steps: [{ op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: true, reserved: 2 } }],
  },
  {
    name: 'expired reservations are dropped before reserving',
    stored: seen(2),
    reservations: { a: NOW - 1, b: NOW, c: NOW + 1 },
    steps: [
      { op: 'reserve', id: 'r1', want: { granted: true, reserved: 2 } },
      { op: 'reserve', id: 'r2', want: { granted: false } },
    ],
  },
  {
    name: 'the per-token concurrency cap',
    stored: seen(100),
    reservations: { a: NOW + LEASE_MS, b: NOW + LEASE_MS },
    steps: [
      { op: 'reserve', id: 'r1', cap: 2, want: { granted: false, heldByOthers: true } },
      { op: 'reserve', id: 'r2', cap: 3, want: { granted: true } },
    ],
  },
  {
    name: 'a dead token is never reserved',
    stored: seen(100, { dead: true }),
    steps: [{ op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } }],
  },
  {
    name: 'a paused token is reserved again when its pause ends',
    stored: seen(100, { pausedUntil: NOW + 5_000 }),
    steps: [
      { op: 'reserve', id: 'r1', at: NOW + 4_999, want: { granted: false, heldByOthers: false } },
      { op: 'reserve', id: 'r2', at: NOW + 5_000, want: { granted: true } },
    ],
  },
  {
    name: 'window rollover: a spent token holds its whole limit after its reset and the grace',
    stored: seen(0, { reset: NOW_S }),
    steps: [
      { op: 'reserve', id: 'r1', at: NOW + 999, want: { granted: false, heldByOthers: false } },
      { op: 'reserve', id: 'r2', at: NOW + 1_000, want: { granted: true } },
      { op: 'read', at: NOW + 1_000, want: { heldByOthers: true, reserved: 1 } },
    ],
  },
  {
    name: 'settle 200: within one window the lowest remaining wins',
    stored: seen(100),
    steps: [
      { op: 'settle', status: 200, headers: rl(90), want: { numbers: seen(90) } },
      { op: 'settle', status: 200, headers: rl(95), want: { numbers: seen(90) } },
    ],
  },
  {
    name: 'settle 304 with its numbers',
    stored: seen(100),
    steps: [{ op: 'settle', status: 304, headers: rl(80), want: { numbers: seen(80) } }],
  },
  {
    name: 'a later reset starts a new window',
    stored: seen(3),
    steps: [{ op: 'settle', status: 200, headers: rl(4999, 5000, NOW_S + 4200), want: { numbers: seen(4999, { reset: NOW_S + 4200 }) } }],
  },
  {
    name: 'a late answer from an old window is ignored',
    stored: seen(50),
    steps: [{ op: 'settle', status: 200, headers: rl(10, 5000, NOW_S + 60), want: { numbers: seen(50) } }],
  },
  {
    name: 'other resources are not tracked',
    stored: seen(50),
    steps: [
      { op: 'settle', status: 200, headers: { ...rl(1, 30, NOW_S + 60), 'x-ratelimit-resource': 'search' }, want: { numbers: seen(50) } },
    ],
  },
  {
    name: 'settling frees the reservation',
    stored: seen(10),
    reservations: { r1: NOW + LEASE_MS, other: NOW + LEASE_MS },
    steps: [{ op: 'settle', id: 'r1', status: 200, headers: rl(9), want: { reserved: 1, numbers: seen(9) } }],
  },
  {
    name: '401 kills the token',
    stored: seen(10),
    steps: [
      { op: 'settle', status: 401, body: '{"message":"Bad credentials"}', want: { numbers: seen(10, { dead: true }) } },
      { op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } },
    ],
  },
  {
    name: '403 primary: spent until the reset the upstream gave',
    stored: seen(5),
    steps: [
      {
        op: 'settle',
        status: 403,
        headers: rl(0, 5000, NOW_S + 900),
        body: '{"message":"API rate limit exceeded"}',
        want: { numbers: seen(0, { reset: NOW_S + 900 }) },
      },
      { op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } },
    ],
  },
  {
    name: '429 primary without a reset: the stored reset stands while it is ahead',
    stored: seen(5, { reset: NOW_S + 30 }),
    steps: [{ op: 'settle', status: 429, headers: { 'x-ratelimit-remaining': '0' }, want: { numbers: seen(0, { reset: NOW_S + 30 }) } }],
  },
  {
    name: 'primary without any usable reset: the no-reset fallback',
    stored: seen(5, { reset: NOW_S - 100 }),
    steps: [{ op: 'settle', status: 403, headers: { 'x-ratelimit-remaining': '0' }, want: { numbers: seen(0, { reset: NOW_S + 60 }) } }],
  },
  {
    name: 'primary with a reset already past: the no-reset fallback',
    steps: [
      {
        op: 'settle',
        status: 403,
        headers: rl(0, 60, NOW_S - 5),
        at: NOW + 500,
        want: { numbers: seen(0, { limit: 60, reset: NOW_S + 61 }) },
      },
      { op: 'reserve', id: 'r1', at: NOW + 500, want: { granted: false } },
    ],
  },
  {
    name: '403 secondary (told in the message): paused for 60 s',
    stored: seen(100),
    steps: [
      { op: 'settle', status: 403, headers: rl(99), body: SECONDARY_BODY, want: { numbers: seen(99, { pausedUntil: NOW + 60_000 }) } },
      { op: 'reserve', id: 'r1', at: NOW + 59_999, want: { granted: false, heldByOthers: false } },
    ],
  },
  {
    name: '429 secondary, the third in a row: the pause doubles twice',
    stored: seen(100),
    steps: [{ op: 'settle', status: 429, repeats: 2, want: { numbers: seen(100, { pausedUntil: NOW + 240_000 }) } }],
  },
  {
    name: '429 with Retry-After',
    steps: [{ op: 'settle', status: 429, headers: { 'retry-after': '7' }, want: { numbers: { ...UNSEEN, pausedUntil: NOW + 7_000 } } }],
  },
  {
    name: 'a shorter pause never shortens a longer one',
    stored: seen(100, { pausedUntil: NOW + 600_000 }),
    steps: [
      {
        op: 'settle',
        status: 403,
        headers: { 'retry-after': '5' },
        body: SECONDARY_BODY,
        want: { numbers: seen(100, { pausedUntil: NOW + 600_000 }) },
      },
    ],
  },
  {
    name: 'a plain 403 says nothing about the token but its numbers',
    stored: seen(100),
    steps: [{ op: 'settle', status: 403, headers: rl(70), body: '{"message":"Resource not accessible"}', want: { numbers: seen(70) } }],
  },
  {
    name: 'learning without a reservation (GET /rate_limit): numbers, then a 401',
    steps: [
      { op: 'settle', id: '', status: 200, headers: rl(4321), want: { numbers: seen(4321) } },
      { op: 'settle', id: '', status: 401, want: { numbers: seen(4321, { dead: true }) } },
    ],
  },
  {
    name: 'read drops expired reservations and answers the numbers',
    stored: seen(7),
    reservations: { a: NOW - 1, b: NOW + 1_000 },
    steps: [{ op: 'read', want: { reserved: 1, numbers: seen(7), heldByOthers: true } }],
  },
  {
    name: 'a window spent to the last unit, then renewed',
    steps: [
      { op: 'reserve', id: 'r1', want: { granted: true } },
      { op: 'settle', id: 'r1', status: 200, headers: rl(2, 3) },
      { op: 'reserve', id: 'r2', want: { granted: true } },
      { op: 'reserve', id: 'r3', want: { granted: true } },
      { op: 'reserve', id: 'r4', want: { granted: false, heldByOthers: true } },
      { op: 'settle', id: 'r2', status: 304, headers: rl(2, 3) },
      { op: 'settle', id: 'r3', status: 403, headers: rl(0, 3), body: '{"message":"API rate limit exceeded"}' },
      { op: 'reserve', id: 'r5', want: { granted: false, heldByOthers: false, numbers: seen(0, { limit: 3 }) } },
      { op: 'reserve', id: 'r6', at: (NOW_S + 601) * 1000, want: { granted: true, reserved: 1 } },
    ],
  },
];

// ---------------------------------------------------------------------------------------------
// The two sides

/** The Redis side's state, as state.ts sees it: numbers and reservations (id -> expiry). */
interface Model {
  numbers: TokenNumbers;
  reservations: Map<string, number>;
}

/** ZREMRANGEBYSCORE -inf now: a reservation whose expiry is not after `now` is gone. */
function dropExpired(model: Model, now: number): void {
  for (const [id, expiry] of model.reservations) if (expiry <= now) model.reservations.delete(id);
}

/** The settlement both sides apply: what the shared pool builds from an answer. */
function settlementOf(step: Extract<Step, { op: 'settle' }>, now: number): Settlement {
  const header = (name: string): string | undefined => step.headers?.[name];
  return react(step.status, classify(step.status, header, step.body, now), readRateLimit(header), step.repeats ?? 0, now).settlement;
}

function outcome(granted: boolean, numbers: TokenNumbers, reserved: number, now: number): Outcome {
  return { granted, heldByOthers: heldByOthers(numbers, reserved, now), numbers, reserved };
}

function stepState(model: Model, step: Step): Outcome {
  const now = step.at ?? NOW;
  if (step.op === 'reserve') {
    dropExpired(model, now);
    const granted = canReserve({ ...model.numbers, inFlight: model.reservations.size }, now, step.cap ?? CAP);
    if (granted) model.reservations.set(step.id, now + LEASE_MS);
    return outcome(granted, model.numbers, model.reservations.size, now);
  }
  if (step.op === 'settle') {
    model.reservations.delete(step.id ?? '');
    model.numbers = settle(model.numbers, settlementOf(step, now), now);
    return outcome(true, model.numbers, model.reservations.size, now);
  }
  dropExpired(model, now);
  return outcome(true, model.numbers, model.reservations.size, now);
}

describe('token pool parity: the Lua scripts on a real Redis and state.ts', () => {
  let redis: TestRedis;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /** The token's hash as stored, read field by field (a missing field is the unseen placeholder's). */
  async function stored(key: string): Promise<TokenNumbers> {
    const [limit, remaining, reset, paused, dead, known] = await client.hmget(
      key,
      'limit',
      'remaining',
      'reset',
      'paused',
      'dead',
      'known',
    );
    const num = (v: string | null | undefined, fallback: number): number => (v === null || v === undefined ? fallback : Number(v));
    return {
      limit: num(limit, UNSEEN.limit),
      remaining: num(remaining, UNSEEN.remaining),
      reset: num(reset, UNSEEN.reset),
      pausedUntil: num(paused, UNSEEN.pausedUntil),
      dead: num(dead, 0) === 1,
      known: num(known, 0) === 1,
    };
  }

  async function stepRedis(keys: { token: string; reservations: string }, step: Step): Promise<Outcome> {
    const now = step.at ?? NOW;
    let reply: number[];
    if (step.op === 'reserve') {
      reply = (await client.eval(
        RESERVE,
        2,
        keys.token,
        keys.reservations,
        ...reserveArgs(now, step.id, now + LEASE_MS, step.cap ?? CAP),
      )) as number[];
    } else if (step.op === 'settle') {
      reply = (await client.eval(
        SETTLE,
        2,
        keys.token,
        keys.reservations,
        ...settleArgs(step.id ?? '', settlementOf(step, now), now),
      )) as number[];
    } else {
      reply = (await client.eval(READ, 2, keys.token, keys.reservations, now)) as number[];
    }
    const decoded = decodeReply(reply);
    // What the script answered is what it stored.
    expect(await stored(keys.token)).toEqual(decoded.numbers);
    expect(await client.zcard(keys.reservations)).toBe(decoded.reserved);
    return outcome(decoded.granted, decoded.numbers, decoded.reserved, now);
  }

  it.each(CASES.map((testCase, caseIndex) => ({ ...testCase, caseIndex })))('$name', async (testCase) => {
    const budget = budgetKeys(`parity-${testCase.caseIndex}:`);
    const keys = { token: budget.token(TOKEN), reservations: budget.reservations(TOKEN) };
    const model: Model = { numbers: testCase.stored ?? UNSEEN, reservations: new Map(Object.entries(testCase.reservations ?? {})) };
    if (testCase.stored !== undefined) await client.hset(keys.token, hashOf(testCase.stored));
    for (const [id, expiry] of model.reservations) await client.zadd(keys.reservations, expiry, id);

    for (const [index, step] of testCase.steps.entries()) {
      const fromLua = await stepRedis(keys, step);
      const fromState = stepState(model, step);
      expect(fromLua, `step ${index + 1} (${step.op})`).toEqual(fromState);
      if (step.want !== undefined) expect(fromState, `step ${index + 1} (${step.op}) as wanted`).toMatchObject(step.want);
    }
  });
});
