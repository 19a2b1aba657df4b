import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, entrySize, decodedBody } from '../../src/cache/store/entry-codec.js';
import { createHeaderTable, isSharedPair } from '../../src/cache/store/header-intern.js';
import { ownedConcat, ownedCopy } from '../../src/platform/bytes.js';
import { testEntry } from '../helpers/entry.js';

/** A header value as undici hands it over: a string of its own per response. */
const received = (value: string): string => Buffer.from(value, 'latin1').toString('latin1');

describe('shared header pairs (L1 memory)', () => {
  const table = createHeaderTable();
  const storedPair = table.pair;
  const sharedHeaders = table.share;
  it('gives every entry the same frozen pair for a field common to many responses', () => {
    const first = storedPair('content-type', received('application/json; charset=utf-8'));
    const second = storedPair('content-type', received('application/json; charset=utf-8'));
    expect(first).toBe(second);
    expect(isSharedPair(first)).toBe(true);
    expect(Object.isFrozen(first)).toBe(true);
    expect(first).toEqual(['content-type', 'application/json; charset=utf-8']);
  });

  it('never shares the fields that name one response, nor rate-limit fields', () => {
    for (const name of [
      'date',
      'etag',
      'last-modified',
      'link',
      'location',
      'x-github-request-id',
      'x-ratelimit-remaining',
      'set-cookie',
    ]) {
      const first = storedPair(name, 'same value');
      const second = storedPair(name, 'same value');
      expect(first, name).not.toBe(second);
      expect(isSharedPair(first), name).toBe(false);
    }
  });

  it('keeps long values in pairs of their own', () => {
    const long = 'x'.repeat(1025);
    expect(isSharedPair(storedPair('x-long', long))).toBe(false);
    expect(storedPair('x-long', long)[1]).toBe(long);
  });

  it('shares the fields of an entry read back from L2, and keeps its validators', () => {
    const entry = testEntry({
      headers: [
        ['vary', 'Accept, Accept-Encoding'],
        ['etag', 'W/"1"'],
        ['x-github-media-type', 'github.v3; format=json'],
      ],
      etag: 'W/"1"',
    });
    const back = decodeEntry(encodeEntry(entry), table)!;
    expect(back.headers).toEqual(entry.headers);
    expect(back.etag).toBe('W/"1"');
    expect(isSharedPair(back.headers[0]!)).toBe(true);
    expect(isSharedPair(back.headers[1]!)).toBe(false);
    expect(back.headers[0]).toBe(sharedHeaders([['vary', 'Accept, Accept-Encoding']])[0]);
  });

  it('counts a shared field at its slot only, so the same max_bytes holds more entries', () => {
    const fields: Array<[string, string]> = [
      ['strict-transport-security', 'max-age=31536000; includeSubdomains; preload'],
      ['content-security-policy', "default-src 'none'"],
    ];
    const own = testEntry({ headers: fields.map(([name, value]): [string, string] => [name, value]) });
    const shared = testEntry({ headers: sharedHeaders(fields) });
    expect(entrySize('k', shared)).toBeLessThan(entrySize('k', own) - 200);
  });

  it('stays bounded when an upstream sends a new value on every response (hostile)', () => {
    for (let i = 0; i < 5000; i++) {
      const pair = storedPair('x-changing', `value-${i}`);
      expect(pair[1]).toBe(`value-${i}`);
    }
    expect(table.size).toBeLessThanOrEqual(1024);
    // A full table shares what it holds and stores the rest as before.
    expect(storedPair('x-changing', 'value-0')).toBe(storedPair('x-changing', 'value-0'));
    expect(isSharedPair(storedPair('x-changing', 'value-4999'))).toBe(false);
  });
});

describe('header tables are per cache (two apps in one process share nothing)', () => {
  it('keeps the pairs, counts and bytes of one table out of another', () => {
    const one = createHeaderTable();
    const other = createHeaderTable();
    const first = one.pair('content-type', 'application/json');
    expect(one.pair('content-type', 'application/json')).toBe(first);
    expect(one.size).toBe(1);
    expect(one.bytes).toBeGreaterThan(0);
    expect(other.size).toBe(0);
    expect(other.bytes).toBe(0);
    const second = other.pair('content-type', 'application/json');
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    expect(other.size).toBe(1);
  });
});

describe('owned bytes (a kept body pins nothing larger than itself)', () => {
  it('copies a small slice into an allocation of its own size', () => {
    const slab = Buffer.from('x'.repeat(100)); // a slice of Node's shared 8 KiB pool
    expect(slab.buffer.byteLength).toBeGreaterThan(100);
    const copy = ownedCopy(slab.subarray(10, 60));
    expect(copy.buffer.byteLength).toBe(50);
    expect(copy.toString()).toBe('x'.repeat(50));
  });

  it('keeps a small decoded body (identity clients) out of the shared slab', () => {
    const plain = Buffer.from(JSON.stringify({ name: 'r'.repeat(300) }));
    for (const expected of [plain.length, plain.length + 5, undefined]) {
      const decoded = decodedBody(gzipSync(plain), expected, 1 << 20)!;
      expect(decoded.equals(plain)).toBe(true);
      expect(decoded.buffer.byteLength).toBeLessThanOrEqual(plain.length + 1);
    }
  });

  it('joins chunks into one allocation of their total size', () => {
    const joined = ownedConcat([Buffer.from('ab'), Buffer.from('cde'), Buffer.alloc(0)], 5);
    expect(joined.toString()).toBe('abcde');
    expect(joined.buffer.byteLength).toBe(5);
  });
});
