/**
 * Shared header pairs for stored entries. Most of a stored response's header fields are the same
 * on every response of an upstream (GitHub's Content-Type, Cache-Control, Vary, its security
 * headers, Server, the media type, `Content-Encoding: gzip`...), yet each entry held its own pair
 * array and value string: with gzip bodies of about 1 KB, those copies were a third of an entry's
 * memory. An entry's header list now points at one frozen `[name, value]` pair per distinct field
 * for those, and keeps its own pairs only for the fields that differ per response.
 *
 * Bounded: at most MAX_PAIRS pairs of at most MAX_VALUE characters are ever shared (about 1.2 MB in
 * the worst case); once the table is full, new fields are stored as before, in their own pairs.
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

const table = new Map<string, SharedPair>();
const shared = new WeakSet<SharedPair>();
/** The table's bytes, counted as entrySize counts a field of an entry's own. */
let tableBytes = 0;

/** Whether a field of this name and value may be shared. */
function shareable(name: string, value: string): boolean {
  return value.length <= MAX_VALUE && !PER_RESPONSE.has(name) && !isRateLimitHeader(name);
}

/**
 * The pair to store for a field: the shared one when the table has it (or takes it now), else a
 * pair of the entry's own.
 */
export function storedPair(name: string, value: string): [string, string] {
  if (!shareable(name, value)) return [name, value];
  const id = `${name}\n${value}`;
  const found = table.get(id);
  if (found !== undefined) return found as [string, string];
  const pair: [string, string] = [name, value];
  if (table.size >= MAX_PAIRS) return pair;
  Object.freeze(pair);
  table.set(id, pair);
  shared.add(pair);
  tableBytes += name.length + value.length + FIELD_OVERHEAD;
  return pair;
}

/** A header list with its shareable fields replaced by the shared pairs (a new list). */
export function sharedHeaders(headers: ReadonlyArray<readonly [string, string]>): Array<[string, string]> {
  const out: Array<[string, string]> = new Array(headers.length);
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    out[i] = storedPair(name, value);
  }
  return out;
}

/** Whether an entry's pair is one of the shared ones (its memory is counted once, in the table's bound). */
export const isSharedPair = (pair: readonly [string, string]): boolean => shared.has(pair);

/** The table's size (tests). */
export const sharedPairCount = (): number => table.size;

/** The table's bytes (etagere_cache_bytes{tier="shared_headers"}): at most about 1.2 MB. */
export const sharedPairBytes = (): number => tableBytes;
