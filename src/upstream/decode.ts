/**
 * The decoded form of a buffered upstream body, read once when the cache receives it: a gzip body
 * is inflated (off the event loop, in libuv's pool) so that its JSON can be checked before it is
 * stored, and a body that fails to decode becomes a failure, as a truncated body does. The
 * encoded bytes are what the cache keeps; the decoded ones are checked and dropped.
 */
import { gunzip } from 'node:zlib';
import { promisify } from 'node:util';
import { contentCodingOf } from '../http/representation/coding.js';
import type { Fetched } from './fetch.js';

const inflate = promisify(gunzip);

export type Decoded =
  /** The response, and its body decoded (the body itself for identity; undefined for a coding the proxy does not decode). */
  { ok: true; decoded: Buffer | undefined } | { ok: false; failure: Extract<Fetched, { kind: 'failed' }> };

/**
 * Decodes `fetched`'s body; more than `maxDecodedBytes` decoded (a compression bomb) is a failure
 * too, so that no small upstream body can make the proxy hold a huge one.
 */
export async function decodeFetched(fetched: Extract<Fetched, { kind: 'response' }>, maxDecodedBytes: number): Promise<Decoded> {
  const coding = contentCodingOf(fetched.headers['content-encoding']);
  if (coding === undefined || fetched.body.length === 0) return { ok: true, decoded: fetched.body };
  if (coding !== 'gzip' && coding !== 'x-gzip') return { ok: true, decoded: undefined };
  try {
    return { ok: true, decoded: await inflate(fetched.body, { maxOutputLength: maxDecodedBytes }) };
  } catch (err) {
    const tooLarge = (err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE';
    const detail = tooLarge ? 'decoded body over the limit' : 'body failed to decode (gzip)';
    return { ok: false, failure: { kind: 'failed', failure: { status: 502, detail } } };
  }
}
