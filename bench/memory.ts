/**
 * L1 memory benchmark: fills the in-process cache (`createMemoryStore`) with up to 1,000,000 small,
 * distinct entries shaped like a small GitHub response (a ~200-byte JSON body and the ~20 header
 * fields the proxy keeps of GitHub's) and measures what the process really holds against the configured bound. The store counts an
 * estimate (`entrySize`); this shows what the estimate costs in RSS.
 * Goal: RSS after the fill <= 1.25 x max_bytes + 100 MB (MB read as MiB).
 *
 *   npm run bench:memory [-- --max-mb N] [--entries N] [--smoke] [--json FILE] [--bodies small|repo|repo-gzip]
 *   (= node --expose-gc --import tsx bench/memory.ts; without --expose-gc the numbers include garbage)
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { storedHeaders } from '../src/cache/rules/classify.js';
import type { CacheEntry } from '../src/cache/rules/entry.js';
import { cacheKey, POOL } from '../src/cache/rules/key.js';
import { createMemoryStore } from '../src/cache/store/memory-store.js';
import { ownedCopy } from '../src/platform/bytes.js';
import { apiHeaders, CACHE_PRIVATE, JSON_TYPE } from '../fake-github/headers.js';

/**
 * The bodies the entries hold: `small` (~200 bytes of JSON, identity), or `repo` (a full GitHub
 * repository record, ~5 KB, every API address in it, as `GET /repos/:owner/:repo` answers) as
 * identity (`repo`) or gzip (`repo-gzip`, what the proxy stores when it asked the upstream for gzip).
 */
export type BodyKind = 'small' | 'repo' | 'repo-gzip';

export interface MemoryOptions {
  /** Default small. */
  bodies?: BodyKind;
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
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) return false;
  collect();
  collect();
  return true;
};

const sample = (): MemorySample => {
  const usage = process.memoryUsage();
  return { rss: usage.rss, heapUsed: usage.heapUsed, heapTotal: usage.heapTotal, external: usage.external };
};

/**
 * Header values arrive as bytes and are decoded per response (undici), so each response has its
 * own copies: one flat string each.
 */
const fromWire = (s: string): string => Buffer.from(s, 'latin1').toString('latin1');

/**
 * The headers the proxy stores for the response: GitHub's, as the fake upstream sends them
 * (fake-github/headers.ts: about 20 fields), through the proxy's own filter for a pool
 * entry (src/cache/rules/classify.ts: no framing, no rate-limit or token fields; shared pairs).
 */
function storedGithubHeaders(index: number, now: number, etag: string, lastModified: string, gzip: boolean): Array<[string, string]> {
  const sent = apiHeaders({
    status: 200,
    contentType: JSON_TYPE,
    contentLength: 0,
    requestId: `${hexOf(index, 4)}:${hexOf(index + 1, 4)}:${index.toString(16)}:${hexOf(index + 2, 8)}`.toUpperCase(),
    apiVersion: '2022-11-28',
    rate: { limit: 5000, used: index % 5000, reset: Math.floor(now / 1000) + 3600 },
    viewer: null,
    acceptedScopes: 'repo',
    cacheControl: CACHE_PRIVATE,
    etag,
    lastModified,
    link: null,
    retryAfter: null,
    contentEncoding: gzip ? 'gzip' : null,
  });
  const received: Record<string, string> = { date: fromWire(new Date(now).toUTCString()) };
  for (const [name, value] of Object.entries(sent)) if (value !== undefined) received[name] = fromWire(String(value));
  return storedHeaders(received, true);
}

/** `len` pseudo-random hex digits for entry `index`, as one flat string (like a parsed header value). */
const scratch = Buffer.alloc(64);
function hexOf(index: number, len: number): string {
  const bytes = scratch.subarray(0, Math.min(scratch.length, Math.ceil(len / 2)));
  let hash = Math.imul(index ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  for (let k = 0; k < bytes.length; k++) {
    hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35) >>> 0;
    bytes[k] = hash & 255;
  }
  return bytes.toString('hex', 0, bytes.length).slice(0, len);
}

const REPO_URLS = [
  'forks',
  'keys{/key_id}',
  'collaborators{/collaborator}',
  'teams',
  'hooks',
  'issues/events{/number}',
  'events',
  'assignees{/user}',
  'branches{/branch}',
  'tags',
  'git/blobs{/sha}',
  'git/tags{/sha}',
  'git/refs{/sha}',
  'git/trees{/sha}',
  'statuses/{sha}',
  'languages',
  'stargazers',
  'contributors',
  'subscribers',
  'subscription',
  'commits{/sha}',
  'git/commits{/sha}',
  'comments{/number}',
  'issues/comments{/number}',
  'contents/{+path}',
  'compare/{base}...{head}',
  'merges',
  '{archive_format}{/ref}',
  'downloads',
  'issues{/number}',
  'pulls{/number}',
  'milestones{/number}',
  'notifications{?since,all,participating}',
  'labels{/name}',
  'releases{/id}',
  'deployments',
];
const OWNER_URLS = [
  'followers',
  'following{/other_user}',
  'gists{/gist_id}',
  'starred{/owner}{/repo}',
  'subscriptions',
  'orgs',
  'repos',
  'events{/privacy}',
  'received_events',
];

/** A repository record shaped like GitHub's (fake-github/render.ts), for entry `index`. */
function repoBody(index: number, updatedAt: string): Record<string, unknown> {
  const full = `etagere-org/r${index}`;
  const api = `https://api.github.com/repos/${full}`;
  const ownerUrl = 'https://api.github.com/users/etagere-org';
  const owner: Record<string, unknown> = {
    login: 'etagere-org',
    id: 9_000_001,
    node_id: 'MDEyOk9yZ2FuaXphdGlvbjkwMDAwMDE=',
    avatar_url: 'https://avatars.githubusercontent.com/u/9000001?v=4',
    gravatar_id: '',
    url: ownerUrl,
    html_url: 'https://github.com/etagere-org',
  };
  for (const suffix of OWNER_URLS) owner[`${suffix.split('{')[0]!}_url`] = `${ownerUrl}/${suffix}`;
  Object.assign(owner, { type: 'Organization', user_view_type: 'public', site_admin: false });
  const record: Record<string, unknown> = {
    id: 8_000_000 + index,
    node_id: Buffer.from(`010:Repository${8_000_000 + index}`).toString('base64'),
    name: `r${index}`,
    full_name: full,
    private: false,
    owner,
    html_url: `https://github.com/${full}`,
    description: `Repository ${index}: ${hexOf(index, 24)}.`,
    fork: false,
    url: api,
  };
  for (const suffix of REPO_URLS)
    record[
      `${
        suffix
          .replace(/[{}?+./,]+/g, '_')
          .replace(/_+$/, '')
          .split('_')[0]!
      }_url`
    ] = `${api}/${suffix}`;
  Object.assign(record, {
    created_at: '2020-01-01T00:00:00Z',
    updated_at: updatedAt,
    pushed_at: updatedAt,
    git_url: `git://github.com/${full}.git`,
    ssh_url: `git@github.com:${full}.git`,
    clone_url: `https://github.com/${full}.git`,
    svn_url: `https://github.com/${full}`,
    homepage: null,
    size: index % 100_000,
    stargazers_count: index % 5000,
    watchers_count: index % 5000,
    language: 'TypeScript',
    has_issues: true,
    has_projects: true,
    has_downloads: true,
    has_wiki: true,
    has_pages: false,
    has_discussions: false,
    forks_count: index % 97,
    mirror_url: null,
    archived: false,
    disabled: false,
    open_issues_count: index % 13,
    license: { key: 'mit', name: 'MIT License', spdx_id: 'MIT', url: 'https://api.github.com/licenses/mit', node_id: 'MDc6TGljZW5zZTEz' },
    allow_forking: true,
    is_template: false,
    web_commit_signoff_required: false,
    topics: ['cache', `t${index % 50}`],
    visibility: 'public',
    forks: index % 97,
    open_issues: index % 13,
    watchers: index % 5000,
    default_branch: 'main',
    permissions: { admin: false, maintain: false, push: false, triage: false, pull: true },
    temp_clone_token: null,
    organization: owner,
    network_count: index % 97,
    subscribers_count: index % 300,
  });
  return record;
}

/** One entry as the L1 would hold it for `GET /repos/etagere-org/r<index>` fetched with a pool token. */
export function makeEntry(index: number, now: number, bodies: BodyKind = 'small'): { key: string; entry: CacheEntry } {
  const key = cacheKey({
    upstream: 'github',
    pathname: `/repos/etagere-org/r${index}`,
    search: '',
    accept: 'application/vnd.github+json',
    apiVersion: '2022-11-28',
    partition: POOL,
  });
  const updated = new Date(Date.UTC(2024, 0, 1) + (index % 86_400) * 60_000);
  const updatedAt = updated.toISOString().replace(/\.\d{3}Z$/, 'Z');
  const small = bodies === 'small';
  const plain = Buffer.from(
    JSON.stringify(
      small
        ? {
            id: 8_000_000 + index,
            name: `r${index}`,
            full_name: `etagere-org/r${index}`,
            private: false,
            description: `Repository ${index}.`,
            fork: false,
            language: 'TypeScript',
            stargazers_count: index % 5000,
            forks_count: index % 97,
            open_issues_count: index % 13,
            default_branch: 'main',
            updated_at: updatedAt,
          }
        : repoBody(index, updatedAt),
    ),
  );
  // A copy in an allocation of its own, as the proxy keeps bodies (src/platform/bytes.ts).
  const body = ownedCopy(bodies === 'repo-gzip' ? gzipSync(plain) : plain);
  const headers = storedGithubHeaders(index, now, `W/"${hexOf(index, 64)}"`, updated.toUTCString(), bodies === 'repo-gzip');
  // The entry's validators are its header fields' own strings (src/cache/rules/classify.ts).
  const etag = headers.find(([name]) => name === 'etag')?.[1];
  const lastModified = headers.find(([name]) => name === 'last-modified')?.[1];
  const entry: CacheEntry = {
    status: 200,
    headers,
    body,
    decodedSize: plain.length,
    etag,
    lastModified,
    storedAt: now,
    initialAge: 0,
    lifetime: 60,
    staleIfError: 86_400,
    staleWhileRevalidate: 0,
    mustRevalidate: false,
    fetchedBy: { kind: 'pool', token: 'sim' },
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
    const { key, entry } = makeEntry(i, now, opts.bodies);
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

export function formatMemory(results: MemoryResults): string {
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
      `${mb(results.maxBytes)} MiB`,
      results.inserted.toLocaleString('en-US'),
      results.held.toLocaleString('en-US'),
      results.evictions.toLocaleString('en-US'),
      `${mb(results.storeBytes)} MiB`,
      `${mb(results.before.rss)} MiB`,
      `${mb(results.after.rss)} MiB`,
      `${mb(results.peakRss)} MiB`,
      `${mb(results.before.heapUsed)} MiB`,
      `${mb(results.after.heapUsed)} MiB`,
      `${mb(results.after.heapTotal)} MiB`,
      `${mb(results.after.external)} MiB`,
      `${mb(results.goalRss)} MiB`,
      (results.after.rss / results.goalRss).toFixed(2),
    ],
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  const table = rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
  const perEntryStore = results.held === 0 ? 0 : results.storeBytes / results.held;
  const perEntryReal = results.held === 0 ? 0 : (results.after.rss - results.before.rss) / results.held;
  const perEntryHeap = results.held === 0 ? 0 : (results.after.heapUsed - results.before.heapUsed) / results.held;
  return [
    `L1 memory: ${results.inserted.toLocaleString('en-US')} distinct entries (body ${results.bodyBytes.toFixed(0)} bytes of JSON, ${results.headers.toFixed(0)} headers) ` +
      `into createMemoryStore({ maxBytes: ${results.maxBytes.toLocaleString('en-US')} }) in ${results.seconds.toFixed(1)} s`,
    `goal: RSS after the fill <= ${GOAL_FACTOR} x max_bytes + 100 MiB = ${mb(results.goalRss)} MiB (the goal's MB read as MiB)` +
      (results.gc ? '; measured after a full GC' : '; WARNING: no global.gc (run node with --expose-gc), so the numbers include garbage'),
    '',
    table,
    '',
    `per held entry: the store counts ${perEntryStore.toFixed(0)} bytes (entrySize); RSS grew ${perEntryReal.toFixed(0)} bytes and heapUsed ${perEntryHeap.toFixed(0)} bytes ` +
      `(RSS growth / store bytes = ${results.storeBytes === 0 ? 'n/a' : ((results.after.rss - results.before.rss) / results.storeBytes).toFixed(2)}).`,
    'RSS peak is the process high-water mark (getrusage), garbage of the fill included. heapTotal - heapUsed is heap V8 keeps committed after the churn of evictions.',
  ].join('\n');
}

export function memoryGoalFailures(results: MemoryResults): string[] {
  const out: string[] = [];
  if (results.after.rss > results.goalRss)
    out.push(`RSS ${mb(results.after.rss)} MiB > goal ${mb(results.goalRss)} MiB (${GOAL_FACTOR} x ${mb(results.maxBytes)} MiB + 100 MiB)`);
  if (results.storeBytes > results.maxBytes) out.push(`the store counts ${results.storeBytes} bytes, above max_bytes ${results.maxBytes}`);
  if (!results.gc) out.push('no global.gc: run with node --expose-gc (npm run bench:memory does)');
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      'max-mb': { type: 'string' },
      entries: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      json: { type: 'string' },
      bodies: { type: 'string' },
    },
    strict: true,
  });
  try {
    const opts: MemoryOptions = values.smoke ? { entries: 100_000, maxMb: 32 } : {};
    if (values['max-mb'] !== undefined) opts.maxMb = Number(values['max-mb']);
    if (values.entries !== undefined) opts.entries = Number(values.entries);
    if (values.bodies !== undefined) {
      if (!['small', 'repo', 'repo-gzip'].includes(values.bodies)) throw new Error('--bodies must be small, repo or repo-gzip');
      opts.bodies = values.bodies as BodyKind;
    }
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
