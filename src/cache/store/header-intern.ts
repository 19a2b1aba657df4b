/**
 * Shared header pairs for stored entries. Most of a stored response's header fields are the same
 * on every response of an upstream (GitHub's Content-Type, Cache-Control, Vary, its security
 * headers, Server, the media type, `Content-Encoding: gzip`...), yet each entry held its own pair
 * array and value string: with gzip bodies of about 1 KB, those copies were a third of an entry's
 * memory. An entry's header list now points at one frozen `[name, value]` pair per distinct field
 * for those, and keeps its own pairs only for the fields that differ per response.
 *
 * One table per cache (createHeaderTable, built by services.ts: two apps in one process share
 * nothing). Bounded: at most MAX_PAIRS pairs of at most MAX_VALUE characters are ever shared (about
 * 1.2 MB in the worst case); once the table is full, new fields are stored as before, in their own
 * pairs.
 * Fields that name one response (its date, validators, request id, links, locations) and rate-limit
 * fields are never shared, so they cannot fill the table. Sharing changes nothing a client sees:
 * pairs are never modified in place (a 304 that changes a field gives the entry a new pair).
 */
import { isRateLimitHeader } from '../../http/headers/hop-by-hop.js';

/** A header field several entries can point at: frozen, never modified. */
export type SharedPair = readonly [string, string];

const MAX_PAIRS = 1024;
const MAX_VALUE = 1024;

/**
 * Bytes a header field of an entry's own holds beyond its two strings' characters (the pair, two
 * string headers, the slot in the list; bench/memory.ts): entrySize counts it, and the table counts
 * its fields the same way.
 */
export const FIELD_OVERHEAD = 110;

/** Fields whose value names one response: sharing them would only fill the table. */
const PER_RESPONSE = new Set([
  'date',
  'etag',
  'last-modified',
  'expires',
  'link',
  'location',
  'content-location',
  'content-md5',
  'digest',
  'content-digest',
  'repr-digest',
  'x-github-request-id',
  'x-request-id',
  'set-cookie',
]);

/** Whether a field of this name and value may be shared. */
function shareable(name: string, value: string): boolean {
  return value.length <= MAX_VALUE && !PER_RESPONSE.has(name) && !isRateLimitHeader(name);
}

/** The pair a field is stored as (classify takes the table's as its `pairOf`). */
export type StorePair = (name: string, value: string) => [string, string];

/** The shared pairs of one process's cache (built by src/main/services.ts, held by the cache). */
export interface HeaderTable {
  /** The pair to store for a field: the shared one when the table has it (or takes it now), else a pair of the entry's own. */
  readonly pair: StorePair;
  /** A header list with its shareable fields replaced by the shared pairs (a new list). */
  share(headers: ReadonlyArray<readonly [string, string]>): Array<[string, string]>;
  /** Pairs held. */
  readonly size: number;
  /** The table's bytes, counted as entrySize counts a field of an entry's own (etagere_cache_bytes{tier="shared_headers"}). */
  readonly bytes: number;
}

export function createHeaderTable(): HeaderTable {
  const table = new Map<string, SharedPair>();
  let bytes = 0;
  const pair: StorePair = (name, value) => {
    if (!shareable(name, value)) return [name, value];
    const id = `${name}\n${value}`;
    const found = table.get(id);
    if (found !== undefined) return found as [string, string];
    const own: [string, string] = [name, value];
    if (table.size >= MAX_PAIRS) return own;
    Object.freeze(own);
    table.set(id, own);
    bytes += name.length + value.length + FIELD_OVERHEAD;
    return own;
  };
  return {
    pair,
    share(headers) {
      const out: Array<[string, string]> = new Array(headers.length);
      for (let i = 0; i < headers.length; i++) {
        const [name, value] = headers[i]!;
        out[i] = pair(name, value);
      }
      return out;
    },
    get size() {
      return table.size;
    },
    get bytes() {
      return bytes;
    },
  };
}

/**
 * Whether an entry's pair is a shared one (its memory is counted once, in its table's bound): only
 * a table freezes the pairs it shares.
 */
export const isSharedPair = (pair: readonly [string, string]): boolean => Object.isFrozen(pair);
