/**
 * Bytes a cache entry keeps for long: always in memory of their own, exactly their size. A Buffer
 * under 4 KiB made by `Buffer.concat`, `Buffer.from` or `allocUnsafe` is a slice of a shared 8 KiB
 * slab, and a socket chunk or a Redis reply can be far larger than the part an entry needs: kept
 * in the cache, such a view pins all of it, which the cache's byte bound does not see (a gzipped
 * 1 KB body could hold 8 KiB, most of it the garbage of other requests).
 */

/** A copy of `bytes` in an allocation of its own. */
export function ownedCopy(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(bytes.length);
  out.set(bytes);
  return out;
}

/** `chunks` (`size` bytes in all) joined in an allocation of their own. */
export function ownedConcat(chunks: readonly Uint8Array[], size: number): Buffer {
  const out = Buffer.allocUnsafeSlow(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return at === size ? out : out.subarray(0, at);
}
