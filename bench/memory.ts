/**
 * L1 memory benchmark: fills the in-process cache (`createMemoryStore`) with up to 1,000,000 small,
 * distinct entries shaped like a small GitHub response (a ~200-byte JSON body and a dozen headers)
 * and measures what the process really holds against the configured bound. The store counts an
 * estimate (`entrySize`); this shows what the estimate costs in RSS.
 * Goal: RSS after the fill <= 1.25 x max_bytes + 100 MB (MB read as MiB).
 *
 *   npm run bench:memory [-- --max-mb N] [--entries N] [--smoke] [--json FILE]
 *   (= node --expose-gc --import tsx bench/memory.ts; without --expose-gc the numbers include garbage)
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { CacheEntry } from '../src/cache/entry.js';
import { cacheKey, POOL } from '../src/cache/key.js';
import { createMemoryStore } from '../src/cache/memory-store.js';

export interface MemoryOptions {
  /** Entries to insert. Default 1,000,000. */
  entries?: number;
  /** cache.max_bytes in MiB. Default 256. */
  maxMb?: number;
}

export interface MemorySample {
  rss: number;
  heapUsed: number;
  /** V8 heap committed (used plus free space V8 keeps). */
  heapTotal: number;
  /** Memory outside the V8 heap: Buffer backing stores among others. */
  external: number;
}

export interface MemoryResults {
  inserted: number;
  maxBytes: number;
  /** Entries in the store at the end. */
  held: number;
  /** The store's own count of its bytes (sum of entrySize), at most maxBytes. */
  storeBytes: number;
  evictions: number;
  before: MemorySample;
  after: MemorySample;
  /** Highest RSS of the process (getrusage maxrss). */
  peakRss: number;
  /** RSS allowed by the goal: 1.25 x maxBytes + 100 MiB. */
  goalRss: number;
  gc: boolean;
  /** Mean body and header count of the inserted entries. */
  bodyBytes: number;
  headers: number;
  seconds: number;
}

const MIB = 1024 * 1024;
const GOAL_FACTOR = 1.25;
const GOAL_SLACK = 100 * MIB;

const gc = (): boolean => {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g === undefined) return false;
  g();
  g();
  return true;
};

const sample = (): MemorySample => {
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external };
};

/**
 * Header values arrive as bytes and are decoded per response (undici), so each entry holds its
 * own copies; header names are interned, as undici's known names and object keys are.
 */
const wire = (s: string): Buffer => Buffer.from(s, 'latin1');
const CONSTANT_HEADERS: Array<[string, Buffer]> = [
  ['content-type', wire('application/json; charset=utf-8')],
  ['cache-control', wire('private, max-age=60, s-maxage=60')],
  ['vary', wire('Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, X-Requested-With')],
  ['server', wire('github.com')],
  ['x-github-media-type', wire('github.v3; format=json')],
  ['x-github-api-version-selected', wire('2022-11-28')],
  ['x-oauth-scopes', wire('public_repo')],
  ['access-control-allow-origin', wire('*')],
];

/** `len` pseudo-random hex digits for entry i, as one flat string (like a parsed header value). */
const scratch = Buffer.alloc(64);
function hexOf(i: number, len: number): string {
  const bytes = scratch.subarray(0, Math.min(scratch.length, Math.ceil(len / 2)));
  let x = Math.imul(i ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  for (let k = 0; k < bytes.length; k++) {
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35) >>> 0;
    bytes[k] = x & 255;
  }
  return bytes.toString('hex', 0, bytes.length).slice(0, len);
}

/** One entry as the L1 would hold it for `GET /repos/etagere-org/r<i>` fetched with a pool token. */
export function makeEntry(i: number, now: number): { key: string; entry: CacheEntry } {
  const key = cacheKey({
    upstream: 'github',
    pathname: `/repos/etagere-org/r${i}`,
    search: '',
    accept: 'application/vnd.github+json',
    apiVersion: '2022-11-28',
    partition: POOL,
  });
  const updated = new Date(Date.UTC(2024, 0, 1) + (i % 86_400) * 60_000);
  const body = Buffer.from(
    JSON.stringify({
      id: 8_000_000 + i,
      name: `r${i}`,
      full_name: `etagere-org/r${i}`,
      private: false,
      description: `Repository ${i}.`,
      fork: false,
      language: 'TypeScript',
      stargazers_count: i % 5000,
      forks_count: i % 97,
      open_issues_count: i % 13,
      default_branch: 'main',
      updated_at: updated.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    }),
  );
  const etag = `W/"${hexOf(i, 64)}"`;
  const lastModified = updated.toUTCString();
  const headers: Array<[string, string]> = CONSTANT_HEADERS.map(([name, value]) => [name, value.toString('latin1')]);
  headers.push(
    ['etag', etag],
    ['last-modified', lastModified],
    ['date', new Date(now).toUTCString()],
    ['x-github-request-id', `${hexOf(i, 4)}:${hexOf(i + 1, 4)}:${i.toString(16)}:${hexOf(i + 2, 8)}`.toUpperCase()],
  );
  const entry: CacheEntry = {
    status: 200,
    headers,
    body,
    etag,
    lastModified,
    storedAt: now,
    initialAge: 0,
    lifetime: 60,
    staleIfError: 86_400,
    staleWhileRevalidate: 0,
    mustRevalidate: false,
    fetchedBy: 'pool:sim',
    vary: null,
  };
  return { key, entry };
}

export function runMemoryBench(opts: MemoryOptions = {}): MemoryResults {
  const inserted = opts.entries ?? 1_000_000;
  const maxBytes = Math.round((opts.maxMb ?? 256) * MIB);
  let evictions = 0;
  const store = createMemoryStore({ maxBytes, maxEntryBytes: 4 * MIB, onEvict: () => evictions++ });
  const hasGc = gc();
  const before = sample();
  const started = performance.now();
  const now = Date.now();
  const ttlMs = (60 + 86_400) * 1000;
  let bodyBytes = 0;
  let headers = 0;
  for (let i = 0; i < inserted; i++) {
    const { key, entry } = makeEntry(i, now);
    bodyBytes += entry.body.length;
    headers += entry.headers.length;
    store.set(key, entry, ttlMs);
  }
  const seconds = (performance.now() - started) / 1000;
  gc();
  const after = sample();
  return {
    inserted,
    maxBytes,
    held: store.size,
    storeBytes: store.bytes,
    evictions,
    before,
    after,
    peakRss: process.resourceUsage().maxRSS * 1024,
    goalRss: GOAL_FACTOR * maxBytes + GOAL_SLACK,
    gc: hasGc,
    bodyBytes: inserted === 0 ? 0 : bodyBytes / inserted,
    headers: inserted === 0 ? 0 : headers / inserted,
    seconds,
  };
}

const mb = (bytes: number): string => (bytes / MIB).toFixed(1);

export function formatMemory(r: MemoryResults): string {
  const rows = [
    [
      'max_bytes',
      'inserted',
      'held',
      'evictions',
      'store bytes',
      'RSS before',
      'RSS after',
      'RSS peak',
      'heapUsed before',
      'heapUsed after',
      'heapTotal after',
      'external after',
      'goal RSS',
      'RSS / goal',
    ],
    [
      `${mb(r.maxBytes)} MiB`,
      r.inserted.toLocaleString('en-US'),
      r.held.toLocaleString('en-US'),
      r.evictions.toLocaleString('en-US'),
      `${mb(r.storeBytes)} MiB`,
      `${mb(r.before.rss)} MiB`,
      `${mb(r.after.rss)} MiB`,
      `${mb(r.peakRss)} MiB`,
      `${mb(r.before.heapUsed)} MiB`,
      `${mb(r.after.heapUsed)} MiB`,
      `${mb(r.after.heapTotal)} MiB`,
      `${mb(r.after.external)} MiB`,
      `${mb(r.goalRss)} MiB`,
      (r.after.rss / r.goalRss).toFixed(2),
    ],
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  const table = rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
  const perEntryStore = r.held === 0 ? 0 : r.storeBytes / r.held;
  const perEntryReal = r.held === 0 ? 0 : (r.after.rss - r.before.rss) / r.held;
  const perEntryHeap = r.held === 0 ? 0 : (r.after.heapUsed - r.before.heapUsed) / r.held;
  return [
    `L1 memory: ${r.inserted.toLocaleString('en-US')} distinct entries (body ${r.bodyBytes.toFixed(0)} bytes of JSON, ${r.headers.toFixed(0)} headers) ` +
      `into createMemoryStore({ maxBytes: ${r.maxBytes.toLocaleString('en-US')} }) in ${r.seconds.toFixed(1)} s`,
    `goal: RSS after the fill <= ${GOAL_FACTOR} x max_bytes + 100 MiB = ${mb(r.goalRss)} MiB (the goal's MB read as MiB)` +
      (r.gc ? '; measured after a full GC' : '; WARNING: no global.gc (run node with --expose-gc), so the numbers include garbage'),
    '',
    table,
    '',
    `per held entry: the store counts ${perEntryStore.toFixed(0)} bytes (entrySize); RSS grew ${perEntryReal.toFixed(0)} bytes and heapUsed ${perEntryHeap.toFixed(0)} bytes ` +
      `(RSS growth / store bytes = ${r.storeBytes === 0 ? 'n/a' : ((r.after.rss - r.before.rss) / r.storeBytes).toFixed(2)}).`,
    'RSS peak is the process high-water mark (getrusage), garbage of the fill included. heapTotal - heapUsed is heap V8 keeps committed after the churn of evictions.',
  ].join('\n');
}

export function memoryGoalFailures(r: MemoryResults): string[] {
  const out: string[] = [];
  if (r.after.rss > r.goalRss)
    out.push(`RSS ${mb(r.after.rss)} MiB > goal ${mb(r.goalRss)} MiB (${GOAL_FACTOR} x ${mb(r.maxBytes)} MiB + 100 MiB)`);
  if (r.storeBytes > r.maxBytes) out.push(`the store counts ${r.storeBytes} bytes, above max_bytes ${r.maxBytes}`);
  if (!r.gc) out.push('no global.gc: run with node --expose-gc (npm run bench:memory does)');
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      'max-mb': { type: 'string' },
      entries: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      json: { type: 'string' },
    },
    strict: true,
  });
  try {
    const opts: MemoryOptions = values.smoke ? { entries: 100_000, maxMb: 32 } : {};
    if (values['max-mb'] !== undefined) opts.maxMb = Number(values['max-mb']);
    if (values.entries !== undefined) opts.entries = Number(values.entries);
    const results = runMemoryBench(opts);
    if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
    const failures = memoryGoalFailures(results);
    const verdict = failures.length > 0 ? `memory: goals not met:\n  ${failures.join('\n  ')}\n` : 'memory: goal met\n';
    process.stdout.write(`${formatMemory(results)}\n${verdict}`, () => process.exit(values.smoke && failures.length > 0 ? 1 : 0));
  } catch (err) {
    process.stderr.write(`memory: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  }
}
