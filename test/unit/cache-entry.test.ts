import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, ENTRY_HEAD_BYTES, ENTRY_VERSION, entryStamp } from '../../src/cache/store/entry-codec.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';

const entry: CacheEntry = {
  status: 200,
  headers: [
    ['content-type', 'application/json; charset=utf-8'],
    ['etag', 'W/"abc"'],
    ['link', '<https://api.github.com/x?page=2>; rel="next"'],
  ],
  body: Buffer.from([0, 1, 2, 255, 123, 34]),
  decodedSize: 60,
  etag: 'W/"abc"',
  lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT',
  storedAt: 1_700_000_000_000,
  initialAge: 1.5,
  currentAt: 1_699_999_998_750,
  lifetime: 60,
  staleIfError: 86_400,
  staleWhileRevalidate: 0,
  mustRevalidate: false,
  fetchedBy: { kind: 'client', credential: 'abcd1234' },
  vary: { 'x-tenant': 'a' },
};

describe('entry codec', () => {
  it('round-trips every field and the exact body bytes', () => {
    const decoded = decodeEntry(encodeEntry(entry));
    expect(decoded).toEqual(entry);
    expect(decoded!.body.equals(entry.body)).toBe(true);
  });
  it('round-trips optional validators and an empty body', () => {
    const sparse = { ...entry, etag: undefined, lastModified: undefined, body: Buffer.alloc(0), vary: null };
    expect(decodeEntry(encodeEntry(sparse))).toEqual({ ...sparse });
  });
  it('reads an entry stored without the time it was current (an older writer), and refuses one whose time is not a number', () => {
    const { currentAt: _at, ...older } = entry;
    expect(decodeEntry(encodeEntry(older))).not.toHaveProperty('currentAt');
    const bad = encodeEntry(entry)
      .toString('latin1')
      .replace('"currentAt":1699999998750', '"currentAt":"soon-soon-1"' /* same length: only the type differs */);
    expect(decodeEntry(Buffer.from(bad, 'latin1'))).toBeUndefined();
  });
  it('reads an entry of version 1 (identity bodies, no decoded size) as a miss', () => {
    const { decodedSize: _size, ...meta } = { ...entry, body: undefined };
    const json = Buffer.from(JSON.stringify(meta));
    const head = Buffer.from([1, 0, 0, 0, 0]);
    head.writeUInt32BE(json.length, 1);
    expect(ENTRY_VERSION).toBe(4);
    expect(decodeEntry(Buffer.concat([head, json, entry.body]))).toBeUndefined();
  });
  it('reads an entry of version 2 (no write stamp) as a miss', () => {
    const { body: _body, ...meta } = entry;
    const json = Buffer.from(JSON.stringify(meta));
    const head = Buffer.from([2, 0, 0, 0, 0]);
    head.writeUInt32BE(json.length, 1);
    const v2 = Buffer.concat([head, json, entry.body]);
    expect(decodeEntry(v2)).toBeUndefined();
    expect(entryStamp(v2)).toBeUndefined();
  });
  it('reads an entry of version 3 (fetchedBy a string) as a miss, and a fetcher of no known shape as a miss', () => {
    const v3 = encodeEntry({ ...entry, fetchedBy: 'cred:abcd1234' as unknown as CacheEntry['fetchedBy'] });
    v3[0] = 3;
    expect(decodeEntry(v3)).toBeUndefined();
    for (const fetchedBy of ['anon', { kind: 'pool' }, { kind: 'client' }, { kind: 'pool', token: 'a', credential: 1 }, null]) {
      const odd = encodeEntry({ ...entry, fetchedBy: fetchedBy as unknown as CacheEntry['fetchedBy'] });
      expect(decodeEntry(odd), JSON.stringify(fetchedBy)).toBeUndefined();
    }
    const pool = { ...entry, fetchedBy: { kind: 'pool', token: 'ci-app-1001', credential: 'Ab-_12cd' } as const };
    expect(decodeEntry(encodeEntry(pool))).toEqual(pool);
  });
  it('gives every encoding its own write stamp, read without decoding the rest', () => {
    const stamps = new Set<number | undefined>();
    for (let round = 0; round < 50; round++) stamps.add(entryStamp(encodeEntry(entry)));
    expect(stamps.size).toBe(50);
    expect(stamps.has(undefined)).toBe(false);
    const value = encodeEntry(entry);
    expect(entryStamp(value)).toBe(value.readUIntBE(1, 6));
  });
  it('decodes the body as a view into the stored value, without copying it', () => {
    const value = encodeEntry(entry);
    const decoded = decodeEntry(value)!;
    expect(decoded.body.buffer).toBe(value.buffer);
    expect(decoded.body.byteOffset).toBe(value.byteOffset + value.length - entry.body.length);
  });
  it('treats hostile heads of the stamped layout as a miss: truncated, wrong or huge lengths', () => {
    const good = encodeEntry(entry);
    const metaLength = good.readUInt32BE(7);
    const withLength = (length: number): Buffer => {
      const copy = Buffer.from(good);
      copy.writeUInt32BE(length, 7);
      return copy;
    };
    const hostile = [
      good.subarray(0, ENTRY_HEAD_BYTES - 1), // shorter than the head
      good.subarray(0, ENTRY_HEAD_BYTES), // a head and nothing else
      good.subarray(0, ENTRY_HEAD_BYTES + metaLength - 1), // cut inside the metadata
      withLength(0xffffffff), // huge
      withLength(good.length), // past the end by the head's bytes
      withLength(0), // no metadata
      withLength(metaLength - 1), // cuts the JSON short
      withLength(metaLength + 1), // takes a body byte into the JSON
      Buffer.concat([good.subarray(0, ENTRY_HEAD_BYTES - 4), Buffer.from([0, 0, 0, 4]), Buffer.from('null')]), // JSON, not an object
      Buffer.concat([good.subarray(0, ENTRY_HEAD_BYTES - 4), Buffer.from([0, 0, 0, 2]), Buffer.from('[]')]),
    ];
    for (const stored of hostile) expect(decodeEntry(stored)).toBeUndefined();
    // The stamp of a short value is not read past its end.
    expect(entryStamp(good.subarray(0, ENTRY_HEAD_BYTES - 1))).toBeUndefined();
    expect(entryStamp(Buffer.alloc(0))).toBeUndefined();
  });
  it('starts with the version byte', () => {
    expect(encodeEntry(entry)[0]).toBe(ENTRY_VERSION);
  });
  it('treats foreign, old, truncated or corrupt values as a miss', () => {
    const good = encodeEntry(entry);
    const wrongVersion = Buffer.from(good);
    wrongVersion[0] = ENTRY_VERSION + 1;
    const badLength = Buffer.from(good);
    badLength.writeUInt32BE(good.length, 7);
    const badJson = Buffer.from(good);
    badJson[ENTRY_HEAD_BYTES + 1] = 0x7b;
    const wrongShape = Buffer.concat([Buffer.from([ENTRY_VERSION, 1, 2, 3, 4, 5, 6, 0, 0, 0, 2]), Buffer.from('{}')]);
    for (const stored of [
      null,
      undefined,
      Buffer.alloc(0),
      Buffer.from('hello world'),
      wrongVersion,
      badLength,
      badJson,
      good.subarray(0, 10),
      wrongShape,
    ]) {
      expect(decodeEntry(stored)).toBeUndefined();
    }
  });
});
