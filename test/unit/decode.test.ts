/**
 * Decoding an upstream gzip body once when the cache receives it (src/upstream/fetch.ts): it is
 * checked a chunk at a time and never held whole, and the cache's rules read the check (a JSON body
 * that does not parse is still a 502, never stored), its size and its first bytes.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { corruptBody } from '../../src/cache/rules/policy.js';
import { decodeFetched, type CheckedBody, type Fetched } from '../../src/upstream/fetch.js';

type Response = Extract<Fetched, { kind: 'response' }>;

/** Several of the decoder's 64 KiB chunks. */
const LARGE = 200 * 1024;
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

/** The check of a gzip body that decodes. */
async function checkedOf(response: Response): Promise<CheckedBody> {
  const decoded = await decodeFetched(response, MAX);
  if (!decoded.ok || decoded.decoded === undefined || Buffer.isBuffer(decoded.decoded)) throw new Error('not checked');
  return decoded.decoded;
}

/** A JSON text of about `bytes` bytes: one long string, as a blob's base64 content is. */
const blob = (bytes: number): string => JSON.stringify({ message: 'Bad credentials', content: 'A'.repeat(bytes) });

describe('decoding an upstream body for the cache', () => {
  it('an identity body comes back as it is, to be parsed whole', async () => {
    const text = blob(1000);
    const identity: Response = { ...gzipResponse(text), headers: { 'content-type': 'application/json' }, body: Buffer.from(text) };
    expect(await decodeFetched(identity, MAX)).toEqual({ ok: true, decoded: Buffer.from(text) });
  });

  it('a gzip body, small or large: its size, its first bytes, and whether it is JSON, without the body', async () => {
    for (const text of [blob(10), blob(1000), blob(LARGE)]) {
      const checked = await checkedOf(gzipResponse(text));
      expect(checked.size).toBe(Buffer.byteLength(text));
      expect(checked.head.toString()).toBe(text.slice(0, 1024));
      expect(checked.json).toBe(true);
      expect(corruptBody(200, 'application/json', checked)).toBe(false);
    }
  });

  it('hostile: a JSON body cut short, with junk after it, or a control byte deep inside, is corrupt, as it is whole', async () => {
    for (const text of [blob(10), blob(LARGE)]) {
      const middle = Math.floor(text.length / 2);
      for (const bad of [text.slice(0, -1), `${text}<html>`, `${text.slice(0, middle)}\u0001${text.slice(middle)}`]) {
        const checked = await checkedOf(gzipResponse(bad));
        expect(checked.json).toBe(false);
        expect(corruptBody(200, 'application/json', checked)).toBe(true);
        expect(corruptBody(200, 'application/json', Buffer.from(bad))).toBe(true); // the same verdict whole
      }
    }
  });

  it('a body that is not JSON is not checked, and not corrupt', async () => {
    const checked = await checkedOf(gzipResponse(Buffer.alloc(LARGE, 0x7b), 'application/octet-stream'));
    expect(checked.json).toBeUndefined();
    expect(corruptBody(200, 'application/octet-stream', checked)).toBe(false);
  });

  it('hostile: a bomb past the limit, and gzip that does not decode, are failures', async () => {
    expect(await decodeFetched(gzipResponse(Buffer.alloc(MAX + 1)), MAX)).toEqual({
      ok: false,
      failure: { kind: 'failed', failure: { status: 502, detail: 'decoded body over the limit' } },
    });
    const broken = gzipResponse(blob(LARGE));
    for (const body of [broken.body.subarray(0, broken.body.length - 10), Buffer.from('not gzip at all')])
      expect(await decodeFetched({ ...broken, body }, MAX)).toEqual({
        ok: false,
        failure: { kind: 'failed', failure: { status: 502, detail: 'body failed to decode (gzip)' } },
      });
  });
});
