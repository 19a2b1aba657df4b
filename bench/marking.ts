/**
 * What marking a path scope stale costs, by the size of L1 and of the scope. L1 (the cache,
 * one process, no Redis) is filled with `--entries` keys over `--repos` repositories (each key one
 * path, partition and query of one repository); then one repository's exact path, one repository's
 * prefix, and an owner's prefix are marked, and the cost of keeping the path index on every store
 * is timed against a store without it.
 *
 *   npx tsx bench/marking.ts [--entries N] [--repos N]
 */
import { parseArgs } from 'node:util';
import type { CacheEntry } from '../src/cache/rules/entry.js';
import { cacheKey } from '../src/cache/rules/key.js';
import { createMemoryStore, createPathIndex } from '../src/cache/store/memory-store.js';
import { Cache } from '../src/cache/store/cache.js';
import { createLogger } from '../src/platform/log/logger.js';
import { createMetrics } from '../src/platform/metrics/registry.js';

const { values } = parseArgs({ options: { entries: { type: 'string' }, repos: { type: 'string' } }, strict: true });
const ENTRIES = Number(values.entries ?? 200_000);
const REPOS = Number(values.repos ?? 2_000);
const SUFFIXES = [
  '',
  '/issues',
  '/issues/1',
  '/issues/1/comments',
  '/pulls',
  '/commits',
  '/branches',
  '/contents/README.md',
  '/releases',
  '/tags',
];

const entry = (): CacheEntry => ({
  status: 200,
  headers: [['content-type', 'application/json; charset=utf-8']],
  body: Buffer.from('{}'),
  decodedSize: 2,
  etag: 'W/"x"',
  lastModified: undefined,
  storedAt: Date.now(),
  initialAge: 0,
  lifetime: 600,
  staleIfError: 0,
  staleWhileRevalidate: 0,
  mustRevalidate: false,
  fetchedBy: { kind: 'anonymous' },
  vary: null,
});

function keyAt(index: number): string {
  const repo = index % REPOS;
  const suffix = SUFFIXES[Math.floor(index / REPOS) % SUFFIXES.length]!;
  return cacheKey({
    upstream: 'github',
    pathname: `/repos/org-${repo % 20}/repo-${repo}${suffix}`,
    search: `?page=${Math.floor(index / (REPOS * SUFFIXES.length))}`,
    accept: undefined,
    apiVersion: undefined,
    partition: index % 3 === 0 ? 'anon' : 'pool',
  });
}

const ms = (started: bigint): number => Number(process.hrtime.bigint() - started) / 1e6;
const keys = Array.from({ length: ENTRIES }, (_, index) => keyAt(index));
const one = entry();

/** Stores every key into a bare memory store, with and without the path index's hooks. */
function storeCost(withIndex: boolean): number {
  const index = createPathIndex();
  const store = createMemoryStore({
    maxBytes: 1 << 30,
    maxEntryBytes: 1 << 20,
    ...(withIndex ? { onKeys: { added: index.add, removed: index.remove } } : {}),
  });
  const started = process.hrtime.bigint();
  for (const key of keys) store.set(key, one, 600_000);
  return (ms(started) * 1000) / keys.length;
}
storeCost(true); // warm-up
const bare = storeCost(false);
const indexed = storeCost(true);

const cache = new Cache(
  { l1: true, maxBytes: 1 << 30, maxEntryBytes: 1 << 20, lockMs: 1000 },
  createMetrics({ defaultMetrics: false }),
  createLogger({ level: 'silent' }),
  undefined,
);
for (const key of keys) cache.promote(key, one);
/** Marks one scope: the entries, the longest turn the marking held the event loop, and the time until all were marked. */
const mark = async (path: string, prefix: boolean): Promise<string> => {
  const started = process.hrtime.bigint();
  const marked = cache.validity.markStale([{ upstream: 'github', path, prefix }], 'purge');
  let longest = ms(started);
  // Marking goes on in later turns past 2,000 entries: wait for each.
  for (let turn = 1; turn * 2_000 < marked; turn++) {
    const before = process.hrtime.bigint();
    await new Promise<void>((resolve) => setImmediate(resolve));
    longest = Math.max(longest, ms(before));
  }
  return `${marked.toLocaleString('en-US')} entries, ${ms(started).toFixed(2)} ms in all, at most ${longest.toFixed(2)} ms in one turn`;
};
const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
await mark('/repos/org-1/repo-1', true); // warm-up
process.stdout.write(
  [
    `L1: ${ENTRIES.toLocaleString('en-US')} entries over ${REPOS.toLocaleString('en-US')} repositories (path index: ${cache.validity.marking.index.size.toLocaleString('en-US')} keys; RSS ${rss} MiB)`,
    `store into L1: ${bare.toFixed(2)} µs a key without the path index, ${indexed.toFixed(2)} µs with it`,
    `mark one path:             ${await mark('/repos/org-7/repo-7', false)}`,
    `mark one repository (/**): ${await mark('/repos/org-8/repo-8', true)}`,
    `mark one owner (/**):      ${await mark('/repos/org-9', true)}`,
    `mark everything (/**):     ${await mark('/', true)}`,
    `mark a path nobody holds:  ${await mark('/repos/nobody/nothing', true)}`,
  ].join('\n') + '\n',
);
cache.close();
