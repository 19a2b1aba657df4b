/** A stored cache entry for tests: a small fresh JSON 200, with what a test cares about overridden. */
import type { CacheResult } from '../../src/cache/rules/classify.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import type { CacheRequest } from '../../src/cache/rules/request.js';

export function testEntry(over: Partial<CacheEntry> = {}): CacheEntry {
  const body = over.body ?? Buffer.from('{}');
  return {
    status: 200,
    headers: [['content-type', 'application/json']],
    body,
    decodedSize: body.length,
    etag: undefined,
    lastModified: undefined,
    storedAt: Date.now(),
    initialAge: 0,
    lifetime: 600,
    staleIfError: 0,
    staleWhileRevalidate: 0,
    mustRevalidate: false,
    fetchedBy: { kind: 'anonymous' },
    vary: null,
    ...over,
  };
}

/** An entry pool token `token` fetched: its body and weak ETag name it. */
export const poolEntry = (token: string, over: Partial<CacheEntry> = {}): CacheEntry =>
  testEntry({ body: Buffer.from(`{"by":"${token}"}`), etag: `W/"${token}"`, fetchedBy: { kind: 'pool', token }, ...over });

/** What an exchange on pool token `token` stores for `req` (as classify makes it). */
export const storedBy = (req: CacheRequest, token: string, value: CacheEntry): CacheResult => ({
  kind: 'entry',
  entry: value,
  fwdStatus: 200,
  storeKey: req.keys.store(token),
  dropKey: undefined,
  transient: false,
  token,
});
