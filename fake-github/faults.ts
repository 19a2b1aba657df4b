/**
 * Fault injection: the fake misbehaves the way real upstreams and networks do, on purpose.
 *
 *   POST   /__fake/faults  {"faults": [rule, ...], "seed"?: N}   replaces the active rules (seed: reproducible dice)
 *   GET    /__fake/faults                            {"faults": [...rules with their "injected" counts]}
 *   DELETE /__fake/faults                            clears them (so does POST /__fake/reset)
 *
 * A rule: {"kind", "path"?, "rate"?, "count"?, "ms"?, "status"?, "bytes"?}. Only API and cyclist
 * requests are faulted, never /__fake/*. The rules that match a request (path prefix, injections
 * left) share one roll of the dice, in order: each fires with its own `rate`, and the first that
 * fires wins. See docs/fake-upstream.md ("Fault injection").
 *
 * Two families:
 * - early kinds answer instead of the API, spend no quota and are not counted in stats:
 *   refuse, reset, reset-headers, slow-headers (then the request is answered normally), status, huge;
 * - body kinds corrupt the real answer on the wire (it is computed, counted and spends quota as
 *   usual, but as if unconditional, so there is always a body to cut): reset-body, truncate,
 *   slow-body, bad-json, bad-gzip.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { CACHE_PUBLIC, errorJson, JSON_TYPE, nextRequestId, VARY } from './headers.js';

export const FAULT_KINDS = [
  'refuse',
  'reset',
  'reset-headers',
  'reset-body',
  'truncate',
  'slow-headers',
  'slow-body',
  'status',
  'bad-json',
  'bad-gzip',
  'huge',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export const FAULT_STATUSES = [500, 502, 503, 504] as const;
export type FaultStatus = (typeof FAULT_STATUSES)[number];

/** Kinds that corrupt the real answer (the API runs first); the others answer instead of it. */
const BODY_KINDS: ReadonlySet<FaultKind> = new Set(['reset-body', 'truncate', 'slow-body', 'bad-json', 'bad-gzip']);

export const DEFAULT_SLOW_HEADERS_MS = 30_000;
export const DEFAULT_SLOW_BODY_MS = 5_000;
export const DEFAULT_HUGE_BYTES = 8 * 1024 * 1024;
const MAX_RULES = 100;
const MAX_MS = 600_000;
const MIN_HUGE_BYTES = 16;
const MAX_HUGE_BYTES = 256 * 1024 * 1024;
const RULE_FIELDS = ['kind', 'path', 'rate', 'count', 'ms', 'status', 'bytes'];

/** A rule as given (the JSON of POST /__fake/faults, or the `faults` option). */
export interface FaultRuleInput {
  kind: FaultKind;
  path?: string;
  rate?: number;
  count?: number | null;
  ms?: number;
  status?: FaultStatus;
  bytes?: number;
}

/** A rule with its defaults applied, and how often it fired. */
export interface FaultRule {
  kind: FaultKind;
  /** Path prefix (no query); "/" matches every API and cyclist request. */
  path: string;
  /** Probability per matching request, 0..1. */
  rate: number;
  /** Most injections; null = unlimited. */
  count: number | null;
  /** Delay of the slow kinds (slow-headers: before the first byte; slow-body: the whole drip). */
  ms: number;
  /** Status of kind "status". */
  status: FaultStatus;
  /** Body size of kind "huge". */
  bytes: number;
  injected: number;
}

/** Input the fault endpoints and `--faults` reject: the message says what is wrong. */
export class FaultSpecError extends Error {}

const isKind = (v: unknown): v is FaultKind => typeof v === 'string' && (FAULT_KINDS as readonly string[]).includes(v);

function intIn(rule: Record<string, unknown>, key: string, min: number, max: number, where: string): number | undefined {
  const value = rule[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new FaultSpecError(`${where}: "${key}" must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** One rule from JSON, defaults applied. */
export function parseFaultRule(value: unknown, where = 'fault'): FaultRule {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new FaultSpecError(`${where} must be a JSON object`);
  const rule = value as Record<string, unknown>;
  for (const key of Object.keys(rule)) {
    if (!RULE_FIELDS.includes(key)) throw new FaultSpecError(`${where}: unknown field "${key}" (allowed: ${RULE_FIELDS.join(', ')})`);
  }
  if (!isKind(rule.kind)) throw new FaultSpecError(`${where}: "kind" must be one of ${FAULT_KINDS.join(', ')}`);
  const kind = rule.kind;
  let path = '/';
  if (rule.path !== undefined) {
    if (typeof rule.path !== 'string' || !rule.path.startsWith('/') || /[?#\s]/.test(rule.path) || rule.path.length > 1024) {
      throw new FaultSpecError(`${where}: "path" must be a path prefix starting with "/" (no query, no spaces)`);
    }
    path = rule.path;
  }
  let rate = 1;
  if (rule.rate !== undefined) {
    if (typeof rule.rate !== 'number' || !Number.isFinite(rule.rate) || rule.rate < 0 || rule.rate > 1) {
      throw new FaultSpecError(`${where}: "rate" must be a number from 0 to 1`);
    }
    rate = rule.rate;
  }
  const count = rule.count === null ? undefined : intIn(rule, 'count', 0, 1e9, where);
  const ms = intIn(rule, 'ms', 0, MAX_MS, where) ?? (kind === 'slow-body' ? DEFAULT_SLOW_BODY_MS : DEFAULT_SLOW_HEADERS_MS);
  let status: FaultStatus = 500;
  if (rule.status !== undefined) {
    if (!(FAULT_STATUSES as readonly unknown[]).includes(rule.status)) {
      throw new FaultSpecError(`${where}: "status" must be one of ${FAULT_STATUSES.join(', ')}`);
    }
    status = rule.status as FaultStatus;
  }
  const bytes = intIn(rule, 'bytes', MIN_HUGE_BYTES, MAX_HUGE_BYTES, where) ?? DEFAULT_HUGE_BYTES;
  return { kind, path, rate, count: count ?? null, ms, status, bytes, injected: 0 };
}

/** The rules of a `POST /__fake/faults` body: `{"faults": [rule, ...], "seed"?: N}` (faultSeed reads the seed). */
export function parseFaultRules(body: Record<string, unknown>): FaultRule[] {
  for (const key of Object.keys(body)) {
    if (key !== 'faults' && key !== 'seed') throw new FaultSpecError(`Unknown field "${key}" (allowed: faults, seed)`);
  }
  const list = body.faults;
  if (!Array.isArray(list)) throw new FaultSpecError('"faults" must be an array of rules');
  if (list.length > MAX_RULES) throw new FaultSpecError(`at most ${MAX_RULES} fault rules`);
  return list.map((r, i) => parseFaultRule(r, `faults[${i}]`));
}

/** The `seed` of a `POST /__fake/faults` body (an integer from 0 to 2^32 - 1), or undefined. */
export function faultSeed(body: Record<string, unknown>): number | undefined {
  return intIn(body, 'seed', 0, 0xffff_ffff, 'faults');
}

/** mulberry32: a small seeded PRNG with floats in [0, 1), so that a seeded run rolls the same dice. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The `--faults` flag: `KIND[:RATE]` entries separated by commas, e.g.
 * "reset-body:0.05,status:0.02,slow-headers:0.01". Other fields take their defaults.
 */
export function parseFaultSpec(spec: string): FaultRuleInput[] {
  const entries = spec.split(',').map((s) => s.trim());
  if (entries.length > MAX_RULES) throw new FaultSpecError(`at most ${MAX_RULES} fault rules`);
  return entries.map((entry, index) => {
    const colon = entry.indexOf(':');
    const kind = colon < 0 ? entry : entry.slice(0, colon);
    const rateText = colon < 0 ? undefined : entry.slice(colon + 1);
    if (!isKind(kind))
      throw new FaultSpecError(`entry ${index + 1} ("${entry.slice(0, 40)}"): the kind must be one of ${FAULT_KINDS.join(', ')}`);
    if (rateText !== undefined && !/^(?:0|1|0?\.\d+|1\.0*)$/.test(rateText)) {
      throw new FaultSpecError(`entry ${index + 1} ("${entry.slice(0, 40)}"): the rate must be a number from 0 to 1`);
    }
    const rule = parseFaultRule(rateText === undefined ? { kind } : { kind, rate: Number(rateText) }, `entry ${index + 1}`);
    return { kind: rule.kind, rate: rule.rate };
  });
}

/** The active rules of one fake. */
export class Faults {
  private rules: FaultRule[] = [];
  private roll: () => number;

  constructor(private readonly random: () => number = Math.random) {
    this.roll = random;
  }

  /** Replaces the rules; with `seed`, the dice are rolled from it (the same requests, the same faults). */
  set(rules: FaultRule[], seed?: number): void {
    this.rules = rules.map((r) => ({ ...r, injected: 0 }));
    this.roll = seed === undefined ? this.random : mulberry32(seed);
  }

  clear(): void {
    this.rules = [];
  }

  /** The rule to inject for a request to `path`, or null; counts the injection. */
  pick(path: string): FaultRule | null {
    const rules = this.rules;
    if (rules.length === 0) return null;
    const roll = this.roll();
    let cumulative = 0;
    for (const rule of rules) {
      if (!path.startsWith(rule.path) || (rule.count !== null && rule.injected >= rule.count)) continue;
      cumulative += rule.rate;
      if (roll < cumulative) {
        rule.injected++;
        return rule;
      }
    }
    return null;
  }

  /** The rules as JSON, each with the fields of its kind and its `injected` count. */
  describe(): Array<Record<string, unknown>> {
    return this.rules.map((rule) => {
      const out: Record<string, unknown> = { kind: rule.kind, path: rule.path, rate: rule.rate, count: rule.count };
      if (rule.kind === 'slow-headers' || rule.kind === 'slow-body') out.ms = rule.ms;
      if (rule.kind === 'status') out.status = rule.status;
      if (rule.kind === 'huge') out.bytes = rule.bytes;
      out.injected = rule.injected;
      return out;
    });
  }
}

export const isBodyFault = (rule: FaultRule): boolean => BODY_KINDS.has(rule.kind);

/** Timers of delayed answers: the fake clears them all on close. */
export interface FaultTimers {
  readonly timers: Set<NodeJS.Timeout>;
}

/** Runs `fn` after `ms` unless the connection closes first. */
function later(ctx: FaultTimers, socket: Socket, ms: number, fn: () => void): void {
  const cancel = (): void => {
    clearTimeout(timer);
    ctx.timers.delete(timer);
  };
  const timer = setTimeout(() => {
    ctx.timers.delete(timer);
    socket.off('close', cancel);
    fn();
  }, ms);
  ctx.timers.add(timer);
  socket.once('close', cancel);
}

/** Sends a TCP RST once what was written has been handed to the kernel. */
function resetSoon(socket: Socket): void {
  setImmediate(() => {
    if (!socket.destroyed) socket.resetAndDestroy();
  });
}

const STATUS_MESSAGES: Record<FaultStatus, string> = {
  500: 'Server Error',
  502: 'Server Error',
  503: 'Service Unavailable',
  504: "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists.",
};

function errorHeaders(length: number): OutgoingHttpHeaders {
  return {
    server: 'github.com',
    'content-type': JSON_TYPE,
    'content-length': length,
    vary: VARY,
    'x-github-media-type': 'github.v3; format=json',
    'x-github-request-id': nextRequestId(),
  };
}

/** Valid, cacheable JSON bodies of exactly `bytes` bytes, by size (a few sizes at most). */
const hugeBodies = new Map<number, { body: Buffer; etag: string }>();

function hugeBody(bytes: number): { body: Buffer; etag: string } {
  let hit = hugeBodies.get(bytes);
  if (hit === undefined) {
    const head = '{"huge":"';
    const tail = '"}';
    const body = Buffer.alloc(bytes, 'x');
    body.write(head, 0, 'latin1');
    body.write(tail, bytes - tail.length, 'latin1');
    const etag = `W/"${createHash('sha256').update(body).digest('hex')}"`;
    if (hugeBodies.size >= 4) hugeBodies.clear();
    hit = { body, etag };
    hugeBodies.set(bytes, hit);
  }
  return hit;
}

const LAST_MODIFIED = 'Thu, 20 Jun 2024 10:00:00 GMT';

/**
 * An early fault: answers (or breaks) the request instead of the API. `proceed` answers it
 * normally (slow-headers, once its delay is over).
 */
export function injectEarly(rule: FaultRule, req: IncomingMessage, res: ServerResponse, ctx: FaultTimers, proceed: () => void): void {
  const socket = req.socket;
  const head = req.method === 'HEAD';
  switch (rule.kind) {
    case 'refuse':
      socket.destroy();
      return;
    case 'reset':
      // A TCP reset before any byte of the answer (the connection, not just the request, is lost).
      socket.resetAndDestroy();
      return;
    case 'reset-headers':
      // A status line and some headers, never the blank line that ends them.
      socket.write(
        `HTTP/1.1 200 OK\r\nserver: github.com\r\ncontent-type: ${JSON_TYPE}\r\nx-github-request-id: ${nextRequestId()}\r\n`,
        () => resetSoon(socket),
      );
      return;
    case 'slow-headers':
      later(ctx, socket, rule.ms, proceed);
      return;
    case 'status': {
      const body = errorJson(STATUS_MESSAGES[rule.status]);
      res.writeHead(rule.status, errorHeaders(body.length));
      res.end(head ? undefined : body);
      return;
    }
    case 'huge': {
      const { body, etag } = hugeBody(rule.bytes);
      res.writeHead(200, {
        server: 'github.com',
        'content-type': JSON_TYPE,
        'content-length': body.length,
        'cache-control': CACHE_PUBLIC,
        vary: VARY,
        etag,
        'last-modified': LAST_MODIFIED,
        'x-github-media-type': 'github.v3; format=json',
        'x-github-request-id': nextRequestId(),
      });
      res.end(head ? undefined : body);
      return;
    }
    default:
      // Body kinds are applied to the real answer (writeFaulted).
      proceed();
  }
}

/** A tail that makes any prefix invalid JSON (nothing valid can be followed by "<"). */
const BAD_TAIL = Buffer.from('\n<html><body>upstream error</body></html>');

/**
 * A body fault applied to the real answer `status`/`headers`/`body` (the body is empty for HEAD,
 * 204 and 304). Headers always go out with the content-length of what was promised.
 */
export function writeFaulted(
  rule: FaultRule,
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  body: Buffer,
  ctx: FaultTimers,
): void {
  const socket = res.socket;
  if (socket === null || socket.destroyed) return;
  switch (rule.kind) {
    case 'reset-body': {
      res.writeHead(status, headers);
      const half = body.subarray(0, Math.floor(body.length / 2));
      if (half.length === 0) {
        res.flushHeaders();
        resetSoon(socket);
      } else {
        res.write(half, () => resetSoon(socket));
      }
      return;
    }
    case 'truncate': {
      res.writeHead(status, headers);
      const part = body.subarray(0, Math.floor(body.length / 2));
      // FIN after the part: a clean close, short of the promised content-length.
      if (part.length === 0) {
        res.flushHeaders();
        setImmediate(() => socket.end());
      } else {
        res.write(part, () => socket.end());
      }
      return;
    }
    case 'slow-body': {
      res.writeHead(status, headers);
      res.flushHeaders();
      const pieces = Math.min(10, body.length);
      if (pieces === 0) {
        later(ctx, socket, rule.ms, () => res.end());
        return;
      }
      const size = Math.ceil(body.length / pieces);
      const step = rule.ms / pieces;
      const drip = (piece: number): void => {
        later(ctx, socket, step, () => {
          const chunk = body.subarray(piece * size, (piece + 1) * size);
          if (piece + 1 >= pieces || (piece + 1) * size >= body.length) res.end(chunk);
          else {
            res.write(chunk);
            drip(piece + 1);
          }
        });
      };
      drip(0);
      return;
    }
    case 'bad-json': {
      const gzipped = headers['content-encoding'] === 'gzip';
      const plain = gzipped ? gunzipSync(body) : body;
      const text = Buffer.concat([plain.subarray(0, Math.floor(plain.length / 2)), BAD_TAIL]);
      const bad = gzipped ? gzipSync(text) : text;
      const out: OutgoingHttpHeaders = { ...headers, 'content-type': JSON_TYPE, 'content-length': bad.length };
      out['cache-control'] ??= CACHE_PUBLIC;
      out.etag ??= `W/"${createHash('sha256').update(bad).digest('hex')}"`;
      out['last-modified'] ??= LAST_MODIFIED;
      delete out['retry-after'];
      res.writeHead(200, out);
      res.end(res.req.method === 'HEAD' ? undefined : bad);
      return;
    }
    case 'bad-gzip': {
      // A gzip stream cut in half: its header is right, its data ends early and its trailer is missing.
      const gzipped = headers['content-encoding'] === 'gzip' ? body : gzipSync(body);
      const bad = gzipped.subarray(0, Math.max(10, Math.floor(gzipped.length / 2)));
      res.writeHead(status, { ...headers, 'content-encoding': 'gzip', 'content-length': bad.length });
      res.end(res.req.method === 'HEAD' ? undefined : bad);
      return;
    }
    default:
      res.writeHead(status, headers);
      res.end(body);
  }
}
