/**
 * Parity of the token pool's rules and their Lua twin: one table of cases runs step by step both
 * through the shared budget's scripts (shared-scripts.ts, EVAL'd on a real redis-server) and
 * through state.ts, which the in-process pool applies. After every step both sides must agree on
 * the verdict (reservation granted or refused, and whether waiting is worth it), on the reply's
 * numbers, on the numbers stored in the token's hash and on the live reservations.
 *
 * A step's `want` pins what the rules should give, so both sides being wrong the same way fails too.
 *
 * Every step works in one rate-limit resource (core unless it says otherwise): a token has a
 * window per resource, its pause and death hold in all of them, its reservations hold the quota of
 * their resource and the per-token cap over all of them. A settle answers with the numbers of the
 * resource the answer named (x-ratelimit-resource), else the step's. Whether no rate limit applies
 * to the token (`unlimited`: GitHub Enterprise Server with rate limiting off) is the token's too.
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify, mentionsRateLimit, readRateLimit, type Resource } from '../../src/pool/rules/rate-limit.js';
import {
  budgetKeys,
  decodeReply,
  hashOf,
  READ,
  readArgs,
  reservationId,
  RESERVE,
  reserveArgs,
  SETTLE,
  settleArgs,
  paceArgs,
} from '../../src/pool/backends/shared-scripts.js';
import { chargeOf, paceReadyAt, pruneLog, type PaceEntry } from '../../src/pool/rules/choose.js';
import { canReserve, DEAD_FLAG_TTL_MS, heldByOthers, react, settle, UNSEEN, type Settlement } from '../../src/pool/rules/state.js';
import type { TokenNumbers } from '../../src/pool/rules/types.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const NOW = 1_800_000_000_000;
const NOW_S = NOW / 1000;
const TOKEN = 'tok';
const CAP = 10;
const LEASE_MS = 60_000;

type Step =
  | { op: 'reserve'; id: string; resource?: Resource; at?: number; cap?: number; want?: Partial<Outcome> }
  | {
      op: 'settle';
      /** The reservation's id (its resource is the step's); '' or none: nothing reserved (GET /rate_limit). */
      id?: string;
      resource?: Resource;
      at?: number;
      status: number;
      headers?: Record<string, string>;
      body?: string;
      repeats?: number;
      /**
       * What GET /rate_limit said (learn): its 401 kills (`dead`), its 200 revives (`alive`), its 404
       * "Rate limiting is not enabled." revives without limits (`unlimited`); else the status is classified.
       */
      verdict?: 'dead' | 'alive' | 'unlimited';
      want?: Partial<Outcome>;
    }
  | { op: 'read'; resource?: Resource; at?: number; want?: Partial<Outcome> };

interface Case {
  name: string;
  /** The token's stored numbers (core, with its pause and death) before the first step; none: never seen (no hash). */
  stored?: TokenNumbers;
  /** Other resources' windows stored before the first step (their pause and death are the token's, from `stored`). */
  storedIn?: Partial<Record<Resource, TokenNumbers>>;
  /** Reservations held before the first step: id (core's, or "resource|id") -> expiry (epoch ms). */
  reservations?: Record<string, number>;
  steps: Step[];
}

/** What a step ends in. */
interface Outcome {
  /** The script's flag: a reservation granted (RESERVE), or 1 (SETTLE, READ). */
  granted: boolean;
  /** After a refusal: the units (or slots) are only held by requests in flight (the pool asks again). */
  heldByOthers: boolean;
  /** The token in the step's resource (a settle: the resource the answer spoke of). */
  numbers: TokenNumbers;
  /** Live reservations in that resource. */
  reserved: number;
  /** Live reservations over every resource. */
  reservedAll: number;
}

/** A token seen with 5000 an hour, `remaining` left and its reset 10 minutes away. */
const seen = (remaining: number, more: Partial<TokenNumbers> = {}): TokenNumbers => ({
  limit: 5000,
  remaining,
  reset: NOW_S + 600,
  pausedUntil: 0,
  dead: false,
  known: true,
  unlimited: false,
  ...more,
});
/** A token no rate limit applies to (nothing learnt of any window). */
const free = (more: Partial<TokenNumbers> = {}): TokenNumbers => ({ ...UNSEEN, unlimited: true, ...more });
const rl = (remaining: number, limit = 5000, reset = NOW_S + 600): Record<string, string> => ({
  'x-ratelimit-limit': String(limit),
  'x-ratelimit-remaining': String(remaining),
  'x-ratelimit-reset': String(reset),
});
const SECONDARY_BODY = '{"message":"You have exceeded a secondary rate limit"}';
const RATE_LIMIT_BODY = '{"message":"API rate limit exceeded"}';
const search = (headers: Record<string, string>): Record<string, string> => ({ ...headers, 'x-ratelimit-resource': 'search' });

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
    name: "an answer that names another resource goes to that resource, not the request's",
    stored: seen(50),
    steps: [
      { op: 'settle', status: 200, headers: search(rl(1, 30, NOW_S + 60)), want: { numbers: seen(1, { limit: 30, reset: NOW_S + 60 }) } },
      { op: 'read', want: { numbers: seen(50) } },
    ],
  },
  {
    name: 'an exhausted search budget (403, remaining 0, resource search) spends search, never core',
    stored: seen(100),
    storedIn: { search: seen(1, { limit: 30, reset: NOW_S + 40 }) },
    steps: [
      { op: 'reserve', id: 's1', resource: 'search', want: { granted: true, reserved: 1 } },
      {
        op: 'settle',
        id: 's1',
        resource: 'search',
        status: 403,
        headers: search(rl(0, 30, NOW_S + 40)),
        body: RATE_LIMIT_BODY,
        want: { numbers: seen(0, { limit: 30, reset: NOW_S + 40 }), reserved: 0 },
      },
      { op: 'reserve', id: 's2', resource: 'search', want: { granted: false, heldByOthers: false } },
      { op: 'reserve', id: 'c1', want: { granted: true, numbers: seen(100) } },
      // The search window comes back after its own reset, a minute away; core never waited.
      { op: 'reserve', id: 's3', resource: 'search', at: (NOW_S + 41) * 1000, want: { granted: true } },
    ],
  },
  {
    name: 'a core request the upstream counted as search spends search (the answer names it)',
    stored: seen(100),
    storedIn: { search: seen(5, { limit: 30, reset: NOW_S + 40 }) },
    steps: [
      { op: 'reserve', id: 'c1', want: { granted: true } },
      {
        op: 'settle',
        id: 'c1',
        status: 403,
        headers: search(rl(0, 30, NOW_S + 40)),
        body: RATE_LIMIT_BODY,
        want: { numbers: seen(0, { limit: 30, reset: NOW_S + 40 }), reserved: 0 },
      },
      { op: 'read', want: { numbers: seen(100), reserved: 0 } },
    ],
  },
  {
    name: 'reservations hold the quota of their resource; the per-token cap counts them all',
    stored: seen(100),
    storedIn: { search: seen(1, { limit: 30, reset: NOW_S + 40 }) },
    steps: [
      { op: 'reserve', id: 's1', resource: 'search', cap: 3, want: { granted: true, reserved: 1, reservedAll: 1 } },
      { op: 'reserve', id: 's2', resource: 'search', cap: 3, want: { granted: false, heldByOthers: true, reserved: 1 } },
      { op: 'reserve', id: 'c1', cap: 3, want: { granted: true, reserved: 1, reservedAll: 2 } },
      { op: 'reserve', id: 'c2', cap: 3, want: { granted: true, reserved: 2, reservedAll: 3 } },
      { op: 'reserve', id: 'c3', cap: 3, want: { granted: false, heldByOthers: true, reserved: 2, reservedAll: 3 } },
      { op: 'settle', id: 's1', resource: 'search', status: 200, headers: search(rl(0, 30, NOW_S + 40)), want: { reservedAll: 2 } },
      { op: 'reserve', id: 'c4', cap: 3, want: { granted: true, reservedAll: 3 } },
    ],
  },
  {
    name: 'a secondary limit pauses the token in every resource',
    stored: seen(100),
    storedIn: { search: seen(20, { limit: 30, reset: NOW_S + 40 }) },
    steps: [
      {
        op: 'settle',
        resource: 'search',
        status: 403,
        headers: { ...search(rl(19, 30, NOW_S + 40)), 'retry-after': '30' },
        body: SECONDARY_BODY,
        want: { numbers: seen(19, { limit: 30, reset: NOW_S + 40, pausedUntil: NOW + 30_000 }) },
      },
      { op: 'reserve', id: 'c1', want: { granted: false, heldByOthers: false } },
      { op: 'reserve', id: 'c2', at: NOW + 30_000, want: { granted: true } },
    ],
  },
  {
    name: 'a dead token is dead in every resource until a probe finds it answering (alive)',
    stored: seen(100, { dead: true }),
    storedIn: { search: seen(30, { limit: 30, reset: NOW_S + 40 }) },
    steps: [
      { op: 'reserve', id: 's1', resource: 'search', want: { granted: false, heldByOthers: false } },
      { op: 'settle', id: '', status: 200, headers: rl(99), verdict: 'alive', want: { numbers: seen(99) } },
      { op: 'reserve', id: 's2', resource: 'search', want: { granted: true } },
    ],
  },
  {
    name: 'settling frees the reservation',
    stored: seen(10),
    reservations: { r1: NOW + LEASE_MS, other: NOW + LEASE_MS },
    steps: [{ op: 'settle', id: 'r1', status: 200, headers: rl(9), want: { reserved: 1, numbers: seen(9) } }],
  },
  {
    name: "a request's 401 changes nothing; the confirmation (GET /rate_limit answered 401) kills the token",
    stored: seen(10),
    steps: [
      // Its numbers are not the token's either (another budget, or whatever the upstream says).
      {
        op: 'settle',
        status: 401,
        headers: rl(0, 60, NOW_S + 3000),
        body: '{"message":"A JSON web token could not be decoded"}',
        want: { numbers: seen(10) },
      },
      { op: 'reserve', id: 'r1', want: { granted: true } },
      { op: 'settle', id: '', status: 401, verdict: 'dead', want: { numbers: seen(10, { dead: true }), reserved: 1 } },
      { op: 'reserve', id: 'r2', want: { granted: false, heldByOthers: false } },
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
      { op: 'settle', id: '', status: 401, verdict: 'dead', want: { numbers: seen(4321, { dead: true }) } },
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
  {
    name: 'rate limiting off (GET /rate_limit 404): a dead token comes back unlimited, and takes requests up to its cap only',
    stored: seen(0, { dead: true }),
    steps: [
      { op: 'settle', id: '', status: 404, verdict: 'unlimited', want: { numbers: seen(0, { unlimited: true }) } },
      { op: 'reserve', id: 'r1', cap: 2, want: { granted: true } },
      { op: 'reserve', id: 'r2', cap: 2, want: { granted: true } },
      { op: 'reserve', id: 'r3', cap: 2, want: { granted: false, heldByOthers: true } },
      { op: 'settle', id: 'r1', status: 200, want: { numbers: seen(0, { unlimited: true }), reservedAll: 1 } },
      { op: 'reserve', id: 'r4', cap: 2, want: { granted: true } },
    ],
  },
  {
    name: 'an answer without any rate-limit header makes a token with no numbers unlimited',
    steps: [
      { op: 'reserve', id: 'r1', want: { granted: true } },
      { op: 'reserve', id: 'r2', want: { granted: false, heldByOthers: true } },
      { op: 'settle', id: 'r1', status: 200, want: { numbers: free() } },
      { op: 'reserve', id: 'r3', cap: 3, want: { granted: true } },
      { op: 'reserve', id: 'r4', cap: 3, want: { granted: true } },
      { op: 'reserve', id: 'r5', cap: 3, want: { granted: true } },
      { op: 'reserve', id: 'r6', cap: 3, want: { granted: false, heldByOthers: true } },
      // In every resource: it is the credential's.
      { op: 'read', resource: 'search', want: { numbers: free() } },
    ],
  },
  {
    name: 'silence never makes a token with numbers unlimited',
    stored: seen(10),
    steps: [{ op: 'settle', status: 304, want: { numbers: seen(10) } }],
  },
  {
    name: 'garbage rate-limit headers are not silence: nothing learnt, nothing unlimited',
    steps: [
      {
        op: 'settle',
        status: 200,
        headers: { 'x-ratelimit-limit': 'lots', 'x-ratelimit-remaining': '-1', 'x-ratelimit-reset': '1e99' },
        want: { numbers: UNSEEN },
      },
      { op: 'settle', status: 200, headers: { 'x-ratelimit-remaining': '0' }, want: { numbers: UNSEEN } },
    ],
  },
  {
    name: 'a failure without headers (5xx) and a 401 teach nothing; a plain 403 without any is silence',
    steps: [
      { op: 'settle', status: 502, want: { numbers: UNSEEN } },
      { op: 'settle', status: 401, body: '{"message":"Bad credentials"}', want: { numbers: UNSEEN } },
      { op: 'settle', status: 403, body: '{"message":"Resource not accessible"}', want: { numbers: free() } },
    ],
  },
  {
    name: 'numbers seen later end unlimited (the administrator turned rate limiting on)',
    steps: [
      { op: 'settle', status: 200, want: { numbers: free() } },
      { op: 'settle', status: 200, headers: rl(4999), want: { numbers: seen(4999) } },
      { op: 'settle', status: 200, want: { numbers: seen(4999) } },
    ],
  },
  {
    name: 'a spent limit ends unlimited',
    steps: [
      { op: 'settle', id: '', status: 404, verdict: 'unlimited', want: { numbers: free() } },
      {
        op: 'settle',
        status: 403,
        headers: { 'x-ratelimit-remaining': '0' },
        body: RATE_LIMIT_BODY,
        want: { numbers: { ...UNSEEN, remaining: 0, reset: NOW_S + 60, known: true } },
      },
      { op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } },
    ],
  },
  {
    name: 'an unlimited token is paused by a secondary limit and killed by a confirmed 401 like any',
    steps: [
      { op: 'settle', id: '', status: 404, verdict: 'unlimited' },
      { op: 'settle', status: 429, headers: { 'retry-after': '5' }, want: { numbers: free({ pausedUntil: NOW + 5_000 }) } },
      { op: 'reserve', id: 'r1', want: { granted: false, heldByOthers: false } },
      { op: 'reserve', id: 'r2', at: NOW + 5_000, want: { granted: true } },
      { op: 'settle', id: '', status: 401, verdict: 'dead', want: { numbers: free({ pausedUntil: NOW + 5_000, dead: true }) } },
      { op: 'reserve', id: 'r3', at: NOW + 5_000, want: { granted: false, heldByOthers: false } },
    ],
  },
];

// ---------------------------------------------------------------------------------------------
// The two sides

/** The Redis side's state, as state.ts sees it: windows, pause and death, and reservations (member -> expiry). */
interface Model {
  windows: Map<Resource, TokenNumbers>;
  pausedUntil: number;
  dead: boolean;
  unlimited: boolean;
  reservations: Map<string, number>;
}

/** The token as seen in one resource (an unseen window: the placeholder's numbers). */
function viewOf(model: Model, resource: Resource): TokenNumbers {
  return { ...(model.windows.get(resource) ?? UNSEEN), pausedUntil: model.pausedUntil, dead: model.dead, unlimited: model.unlimited };
}

function writeBack(model: Model, resource: Resource, numbers: TokenNumbers): void {
  model.windows.set(resource, numbers);
  model.pausedUntil = numbers.pausedUntil;
  model.dead = numbers.dead;
  model.unlimited = numbers.unlimited;
}

/** ZREMRANGEBYSCORE -inf now: a reservation whose expiry is not after `now` is gone. */
function dropExpired(model: Model, now: number): void {
  for (const [member, expiry] of model.reservations) if (expiry <= now) model.reservations.delete(member);
}

function held(model: Model, resource: Resource): number {
  let count = 0;
  for (const member of model.reservations.keys()) if (member.startsWith(`${resource}|`)) count++;
  return count;
}

/** The settlement both sides apply: what the shared pool builds from an answer (or from a probe). */
function settlementOf(step: Extract<Step, { op: 'settle' }>, now: number): Settlement {
  const header = (name: string): string | undefined => step.headers?.[name];
  const verdict = step.verdict !== undefined ? { kind: step.verdict } : classify(step.status, header, step.body, now);
  const silent = !mentionsRateLimit(header);
  return react(step.status, verdict, readRateLimit(header), step.repeats ?? 0, now, step.resource ?? 'core', silent).settlement;
}

function outcome(granted: boolean, numbers: TokenNumbers, reserved: number, reservedAll: number, now: number): Outcome {
  return { granted, heldByOthers: heldByOthers(numbers, reservedAll, now), numbers, reserved, reservedAll };
}

const memberOf = (resource: Resource, id: string): string => (id === '' ? '' : reservationId(resource, id));

function stepState(model: Model, step: Step): Outcome {
  const now = step.at ?? NOW;
  const resource = step.resource ?? 'core';
  if (step.op === 'reserve') {
    dropExpired(model, now);
    const numbers = viewOf(model, resource);
    const granted = canReserve({ ...numbers, inFlight: held(model, resource), concurrent: model.reservations.size }, now, step.cap ?? CAP);
    if (granted) model.reservations.set(memberOf(resource, step.id), now + LEASE_MS);
    return outcome(granted, numbers, held(model, resource), model.reservations.size, now);
  }
  if (step.op === 'settle') {
    model.reservations.delete(memberOf(resource, step.id ?? ''));
    const settlement = settlementOf(step, now);
    writeBack(model, settlement.resource, settle(viewOf(model, settlement.resource), settlement, now));
    return outcome(true, viewOf(model, settlement.resource), held(model, settlement.resource), model.reservations.size, now);
  }
  dropExpired(model, now);
  return outcome(true, viewOf(model, resource), held(model, resource), model.reservations.size, now);
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

  /** The token's hash as stored in a resource, read field by field (a missing field is the unseen placeholder's). */
  async function stored(key: string, resource: Resource, now: number): Promise<TokenNumbers> {
    const fields = [`${resource}:limit`, `${resource}:remaining`, `${resource}:reset`, 'paused', 'dead', `${resource}:known`, 'unlimited'];
    const [limit, remaining, reset, paused, dead, known, unlimited] = await client.hmget(key, ...fields);
    const num = (v: string | null | undefined, fallback: number): number => (v === null || v === undefined ? fallback : Number(v));
    return {
      limit: num(limit, UNSEEN.limit),
      remaining: num(remaining, UNSEEN.remaining),
      reset: num(reset, UNSEEN.reset),
      pausedUntil: num(paused, UNSEEN.pausedUntil),
      dead: num(dead, 0) > now, // the flag is "dead until": it expires
      known: num(known, 0) === 1,
      unlimited: num(unlimited, 0) === 1,
    };
  }

  async function stepRedis(keys: { token: string; reservations: string }, step: Step): Promise<Outcome> {
    const now = step.at ?? NOW;
    const resource = step.resource ?? 'core';
    let reply: number[];
    let numbersOf = resource;
    if (step.op === 'reserve') {
      const args = reserveArgs(now, memberOf(resource, step.id), now + LEASE_MS, step.cap ?? CAP, resource);
      reply = (await client.eval(RESERVE, 2, keys.token, keys.reservations, ...args)) as number[];
    } else if (step.op === 'settle') {
      const settlement = settlementOf(step, now);
      numbersOf = settlement.resource;
      const args = settleArgs(memberOf(resource, step.id ?? ''), settlement, now);
      reply = (await client.eval(SETTLE, 2, keys.token, keys.reservations, ...args)) as number[];
    } else {
      reply = (await client.eval(READ, 2, keys.token, keys.reservations, ...readArgs(now, [resource]))) as number[];
    }
    const decoded = decodeReply(reply);
    // What the script answered is what it stored.
    expect(await stored(keys.token, numbersOf, now)).toEqual(decoded.numbers);
    expect(await client.zcard(keys.reservations)).toBe(decoded.reservedAll);
    return outcome(decoded.granted, decoded.numbers, decoded.reserved, decoded.reservedAll, now);
  }

  it.each(CASES.map((testCase, caseIndex) => ({ ...testCase, caseIndex })))('$name', async (testCase) => {
    const budget = budgetKeys(`parity-${testCase.caseIndex}:`);
    const keys = { token: budget.token(TOKEN), reservations: budget.reservations(TOKEN) };
    const core = testCase.stored ?? UNSEEN;
    const members = Object.entries(testCase.reservations ?? {}).map(([id, expiry]): [string, number] => [
      id.includes('|') ? id : reservationId('core', id),
      expiry,
    ]);
    const model: Model = {
      windows: new Map(),
      pausedUntil: core.pausedUntil,
      dead: core.dead,
      unlimited: core.unlimited,
      reservations: new Map(members),
    };
    if (testCase.stored !== undefined) {
      model.windows.set('core', testCase.stored);
      await client.hset(keys.token, hashOf(testCase.stored, 'core', NOW + DEAD_FLAG_TTL_MS));
    }
    for (const [resource, numbers] of Object.entries(testCase.storedIn ?? {}) as Array<[Resource, TokenNumbers]>) {
      model.windows.set(resource, numbers);
      const fields = hashOf(numbers, resource);
      delete fields.paused; // the token's pause, death and want of limits come from `stored`
      delete fields.dead;
      delete fields.unlimited;
      await client.hset(keys.token, fields);
    }
    for (const [member, expiry] of model.reservations) await client.zadd(keys.reservations, expiry, member);

    for (const [index, step] of testCase.steps.entries()) {
      const fromLua = await stepRedis(keys, step);
      const fromState = stepState(model, step);
      expect(fromLua, `step ${index + 1} (${step.op})`).toEqual(fromState);
      if (step.want !== undefined) expect(fromState, `step ${index + 1} (${step.op}) as wanted`).toMatchObject(step.want);
    }
  });

  it('the shared dead flag expires (Redis only: in process, the revive probe brings a token back)', async () => {
    const budget = budgetKeys('parity-dead-expiry:');
    const keys = [budget.token(TOKEN), budget.reservations(TOKEN)];
    await client.hset(keys[0]!, hashOf(seen(100), 'core'));
    const confirmed = react(401, { kind: 'dead' }, undefined, 0, NOW).settlement;
    expect(confirmed.deadUntil).toBe(NOW + DEAD_FLAG_TTL_MS);
    const settled = decodeReply((await client.eval(SETTLE, 2, ...keys, ...settleArgs('', confirmed, NOW))) as number[]);
    expect(settled.numbers.dead).toBe(true);
    expect(Number(await client.hget(keys[0]!, 'dead'))).toBe(NOW + DEAD_FLAG_TTL_MS);
    const reserve = async (at: number): Promise<boolean> =>
      decodeReply(
        (await client.eval(RESERVE, 2, ...keys, ...reserveArgs(at, reservationId('core', `r${at}`), at + LEASE_MS, CAP))) as number[],
      ).granted;
    expect(await reserve(NOW + DEAD_FLAG_TTL_MS - 1)).toBe(false);
    expect(await reserve(NOW + DEAD_FLAG_TTL_MS)).toBe(true);
  });

  it('points: the script grants and refuses as choose.ts does, and says the same time when they are back', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 24, max: 1200 }),
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 3_000 }), points: fc.constantFrom(1, 1, 5), background: fc.boolean() }), {
          maxLength: 120,
        }),
        async (perMinute, steps) => {
          const budget = budgetKeys(`parity-points-${++run}:`);
          const keys = [budget.token(TOKEN), budget.reservations(TOKEN), budget.points(TOKEN, 'rest')];
          await client.hset(keys[0]!, hashOf(seen(100_000), 'core'));
          let log: PaceEntry[] = [];
          let at = NOW;
          for (const [index, step] of steps.entries()) {
            at += step.gap;
            const member = reservationId('core', `p${index}`);
            const args = [...reserveArgs(at, member, at + 1, 1_000, 'core'), ...paceArgs(step.points, perMinute, step.background)];
            const fromLua = decodeReply((await client.eval(RESERVE, 3, ...keys, ...args)) as number[]);
            const ready = paceReadyAt(log, step.points, perMinute, at, step.background);
            expect(fromLua.granted, `step ${index + 1}`).toBe(ready === at);
            expect(fromLua.paceReady, `step ${index + 1}`).toBe(ready === at ? 0 : ready);
            if (ready === at) log = [...pruneLog(log, at), { at, points: chargeOf(step.points, perMinute) }];
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it('points: a reservation without pacing arguments spends no points (the script before pacing)', async () => {
    const budget = budgetKeys('parity-points-off:');
    const keys = [budget.token(TOKEN), budget.reservations(TOKEN), budget.points(TOKEN, 'rest')];
    await client.hset(keys[0]!, hashOf(seen(100), 'core'));
    for (let i = 0; i < 50; i++) {
      const args = reserveArgs(NOW, reservationId('core', `n${i}`), NOW + 1, 1_000, 'core');
      expect(decodeReply((await client.eval(RESERVE, 3, ...keys, ...args)) as number[]).granted).toBe(true);
      await client.zrem(keys[1]!, reservationId('core', `n${i}`));
    }
    expect(await client.exists(keys[2]!)).toBe(0);
  });
});
