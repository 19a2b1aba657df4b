/**
 * Pure: what `GET /admin/cache` shows of one entry. Never a secret: a client credential's
 * partition shows as `credential` with the entry's short keyed id (the same id as the log's), never
 * the partition hash or anything of the credential; a pool entry names its token (by name). The
 * stored body is shown only on request and only for anonymous and pool entries: a client's own
 * entry is that client's business.
 */
import { gunzipSync } from 'node:zlib';
import { contentCodingOf } from '../../http/representation.js';
import { currentAge } from './policy.js';
import { ANONYMOUS, POOL } from './key.js';
import type { CacheEntry, FetchedBy } from './entry.js';

/** The parts of a cache key (key.ts: upstream, path, query, accept, api version, partition[, selecting]). */
export interface KeyParts {
  readonly upstream: string;
  readonly path: string;
  readonly query: string;
  readonly accept: string;
  readonly apiVersion: string;
  readonly partition: string;
}

export function keyParts(key: string): KeyParts | undefined {
  const parts = key.split('\n');
  if (parts.length < 6) return undefined;
  const [upstream, path, query, accept, apiVersion, partition] = parts as [string, string, string, string, string, string];
  return { upstream, path, query, accept, apiVersion, partition };
}

export type PartitionKind = 'anonymous' | 'pool' | 'credential';

export function partitionKind(partition: string): PartitionKind {
  if (partition === ANONYMOUS) return 'anonymous';
  return partition === POOL || partition.startsWith(`${POOL}:`) ? 'pool' : 'credential';
}

/** Who fetched an entry, as shown: "anonymous", "pool token <name>", "credential <id>". */
export function fetcherOf(fetchedBy: FetchedBy): string {
  if (fetchedBy.kind === 'pool') return `pool token ${fetchedBy.token}`;
  return fetchedBy.kind === 'client' ? `credential ${fetchedBy.credential}` : 'anonymous';
}

export interface EntryView {
  upstream: string;
  path: string;
  query: string;
  partition: PartitionKind;
  /** Non-equivalent pool tokens: the token whose partition it is. */
  pool_token?: string;
  accept: string | null;
  api_version: string | null;
  status: number;
  age: number;
  /** Seconds of freshness left (negative: stale by that much). */
  ttl: number;
  etag: string | null;
  last_modified: string | null;
  size: number;
  fetched_by: string;
  stored_at: string;
  body?: string | null;
  body_encoding?: 'utf8' | 'base64';
  body_withheld?: string;
}

/** The view of one entry; `withBody`: add its body when its partition allows. */
export function entryView(parts: KeyParts, entry: CacheEntry, now: number, withBody: boolean): EntryView {
  const kind = partitionKind(parts.partition);
  const age = currentAge(entry, now);
  const view: EntryView = {
    upstream: parts.upstream,
    path: parts.path,
    query: parts.query,
    partition: kind,
    accept: parts.accept === '' ? null : parts.accept,
    api_version: parts.apiVersion === '' ? null : parts.apiVersion,
    status: entry.status,
    age,
    ttl: entry.lifetime - age,
    etag: entry.etag ?? null,
    last_modified: entry.lastModified ?? null,
    size: entry.body.length,
    fetched_by: fetcherOf(entry.fetchedBy),
    stored_at: new Date(entry.storedAt).toISOString(),
  };
  if (parts.partition.startsWith(`${POOL}:`)) view.pool_token = parts.partition.slice(POOL.length + 1);
  if (!withBody) return view;
  if (kind === 'credential') {
    view.body = null;
    view.body_withheld = "a client credential's entry: its body is never shown";
    return view;
  }
  const body = shownBody(entry);
  const text = body.toString('utf8');
  const utf8 = Buffer.byteLength(text) === body.length && !text.includes('\uFFFD');
  view.body = utf8 ? text : body.toString('base64');
  view.body_encoding = utf8 ? 'utf8' : 'base64';
  return view;
}

/** The body as a client would read it: a gzip-stored body decoded (it was checked at store time). */
function shownBody(entry: CacheEntry): Buffer {
  const coding = contentCodingOf(entry.headers.find(([name]) => name === 'content-encoding')?.[1]);
  if (coding !== 'gzip') return entry.body;
  try {
    return gunzipSync(entry.body);
  } catch {
    return entry.body;
  }
}
