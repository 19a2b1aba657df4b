/**
 * Decoding an upstream body once when the cache receives it (src/upstream/decode.ts): within the
 * bound it comes back whole, as before; past it, it is checked a chunk at a time and not held, and
 * the cache's rules read the check (a JSON body that does not parse is still a 502, never stored).
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { corruptBody } from '../../src/cache/rules/policy.js';
import { decodeFetched, type CheckedBody } from '../../src/upstream/decode.js';
import type { Fetched } from '../../src/upstream/fetch.js';

type Response = Extract<Fetched, { kind: 'response' }>;

const WHOLE = 64 * 1024;
const MAX = 8 * 1024 * 1024;

function gzipResponse(body: Buffer | string, contentType = 'application/json; charset=utf-8', status = 200): Response {
  return {
    kind: 'response',
    status,
    headers: { 'content-encoding': 'gzip', 'content-type': contentType },
    body: gzipSync(body),
    requestTime: 0,
    responseTime: 0,
  };
}

/** A JSON text of about `bytes` bytes: one long string, as a blob's base64 content is. */
const blob = (bytes: number): string => JSON.stringify({ message: 'Bad credentials', content: 'A'.repeat(bytes) });

describe('decoding an upstream body for the cache', () => {
  it('a body within the bound comes back whole', async () => {
    const text = blob(1000);
    const decoded = await decodeFetched(gzipResponse(text), MAX, WHOLE);
    expect(decoded).toEqual({ ok: true, decoded: Buffer.from(text) });
  });

  it('past the bound: its size, its first bytes, and whether it is JSON, without the body', async () => {
    const text = blob(3 * WHOLE);
    const decoded = await decodeFetched(gzipResponse(text), MAX, WHOLE);
    if (!decoded.ok || decoded.decoded === undefined || Buffer.isBuffer(decoded.decoded)) throw new Error('not checked');
    const checked: CheckedBody = decoded.decoded;
    expect(checked.size).toBe(Buffer.byteLength(text));
    expect(checked.head.toString()).toBe(text.slice(0, 1024));
    expect(checked.json).toBe(true);
    expect(corruptBody(200, 'application/json', checked)).toBe(false);
  });

  it('hostile: a large JSON body cut short, or with junk after it, is corrupt, as a small one is', async () => {
    const text = blob(3 * WHOLE);
    for (const bad of [text.slice(0, -1), `${text}<html>`, `${text.slice(0, 2 * WHOLE)}\u0001${text.slice(2 * WHOLE)}`]) {
      const decoded = await decodeFetched(gzipResponse(bad), MAX, WHOLE);
      if (!decoded.ok || decoded.decoded === undefined || Buffer.isBuffer(decoded.decoded)) throw new Error('not checked');
      expect(decoded.decoded.json).toBe(false);
      expect(corruptBody(200, 'application/json', decoded.decoded)).toBe(true);
      expect(corruptBody(200, 'application/json', Buffer.from(bad))).toBe(true); // the same verdict whole
    }
  });

  it('a large body that is not JSON is not checked, and not corrupt', async () => {
    const decoded = await decodeFetched(gzipResponse(Buffer.alloc(3 * WHOLE, 0x7b), 'application/octet-stream'), MAX, WHOLE);
    if (!decoded.ok || decoded.decoded === undefined || Buffer.isBuffer(decoded.decoded)) throw new Error('not checked');
    expect(decoded.decoded.json).toBeUndefined();
    expect(corruptBody(200, 'application/octet-stream', decoded.decoded)).toBe(false);
  });

  it('hostile: a bomb past the limit, and gzip that does not decode, are failures', async () => {
    expect(await decodeFetched(gzipResponse(Buffer.alloc(MAX + 1)), MAX, WHOLE)).toEqual({
      ok: false,
      failure: { kind: 'failed', failure: { status: 502, detail: 'decoded body over the limit' } },
    });
    const broken = gzipResponse(blob(3 * WHOLE));
    for (const body of [broken.body.subarray(0, broken.body.length - 10), Buffer.from('not gzip at all')])
      expect(await decodeFetched({ ...broken, body }, MAX, WHOLE)).toEqual({
        ok: false,
        failure: { kind: 'failed', failure: { status: 502, detail: 'body failed to decode (gzip)' } },
      });
  });
});
