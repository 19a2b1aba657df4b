import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, ENTRY_VERSION, type CacheEntry } from '../../src/cache/entry.js';

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
  lifetime: 60,
  staleIfError: 86_400,
  staleWhileRevalidate: 0,
  mustRevalidate: false,
  fetchedBy: 'cred:abcd1234',
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
  it('reads an entry of version 1 (identity bodies, no decoded size) as a miss', () => {
    const { decodedSize: _size, ...meta } = { ...entry, body: undefined };
    const json = Buffer.from(JSON.stringify(meta));
    const head = Buffer.from([1, 0, 0, 0, 0]);
    head.writeUInt32BE(json.length, 1);
    expect(ENTRY_VERSION).toBe(2);
    expect(decodeEntry(Buffer.concat([head, json, entry.body]))).toBeUndefined();
  });
  it('starts with the version byte', () => {
    expect(encodeEntry(entry)[0]).toBe(ENTRY_VERSION);
  });
  it('treats foreign, old, truncated or corrupt values as a miss', () => {
    const good = encodeEntry(entry);
    const wrongVersion = Buffer.from(good);
    wrongVersion[0] = ENTRY_VERSION + 1;
    const badLength = Buffer.from(good);
    badLength.writeUInt32BE(good.length, 1);
    const badJson = Buffer.from(good);
    badJson[6] = 0x7b;
    const wrongShape = Buffer.concat([Buffer.from([ENTRY_VERSION, 0, 0, 0, 2]), Buffer.from('{}')]);
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
