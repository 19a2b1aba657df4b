/**
 * The decoded form of a buffered upstream body, read once when the cache receives it: a gzip body
 * is inflated (in libuv's pool, a chunk at a time) so that its JSON can be checked before it is
 * stored, and a body that fails to decode becomes a failure, as a truncated body does. The
 * encoded bytes are what the cache keeps; the decoded ones are checked and dropped.
 *
 * The decoded body is never held whole: each chunk is checked as it comes (json-syntax.ts) and
 * dropped, and the cache's rules get its size, its first bytes and the verdict. So no step on the
 * event loop is larger than a chunk, whatever the body decodes to (a base64 blob of zeros is
 * 100 MB from 300 KB of gzip): no joining of the decoded whole, no parse of it.
 */
import { createGunzip } from 'node:zlib';
import { isJsonMediaType, headerValue } from '../http/headers/fields.js';
import { contentCodingOf } from '../http/representation.js';
import type { Fetched } from './fetch.js';
import { JsonSyntax } from './json-syntax.js';

/** A body decoded without being held: what the cache's rules read of it. */
export interface CheckedBody {
  /** Bytes decoded. */
  readonly size: number;
  /** Its first bytes (at most HEAD_BYTES): what a rule reads of a body's start (a 401's message). */
  readonly head: Buffer;
  /** Whether it is one JSON text; undefined when its Content-Type is not JSON (not checked). */
  readonly json: boolean | undefined;
}

export type Decoded =
  /** The response, and its body: itself for identity, checked for gzip, undefined for a coding the proxy does not decode. */
  { ok: true; decoded: Buffer | CheckedBody | undefined } | { ok: false; failure: Extract<Fetched, { kind: 'failed' }> };

/** Output chunk of the decoder: the most JSON checked in one turn of the event loop. */
const DECODE_CHUNK = 64 * 1024;
const HEAD_BYTES = 1024;

/**
 * Decodes `fetched`'s body; more than `maxDecodedBytes` decoded (a compression bomb) is a failure
 * too, so that no small upstream body can make the proxy hold a huge one.
 */
export async function decodeFetched(fetched: Extract<Fetched, { kind: 'response' }>, maxDecodedBytes: number): Promise<Decoded> {
  const coding = contentCodingOf(fetched.headers['content-encoding']);
  if (coding === undefined || fetched.body.length === 0) return { ok: true, decoded: fetched.body };
  if (coding !== 'gzip' && coding !== 'x-gzip') return { ok: true, decoded: undefined };
  const json = isJsonMediaType(headerValue(fetched.headers['content-type'])) ? new JsonSyntax() : undefined;
  const read = await inflate(fetched.body, maxDecodedBytes, json);
  if (read.kind === 'checked') return { ok: true, decoded: read.body };
  const detail = read.kind === 'too-large' ? 'decoded body over the limit' : 'body failed to decode (gzip)';
  return { ok: false, failure: { kind: 'failed', failure: { status: 502, detail } } };
}

type Inflated = { kind: 'checked'; body: CheckedBody } | { kind: 'too-large' } | { kind: 'failed' };

/** The gzip `body` inflated as a stream, each chunk checked (`json`, when given) and dropped. */
function inflate(body: Buffer, maxDecodedBytes: number, json: JsonSyntax | undefined): Promise<Inflated> {
  return new Promise((resolve) => {
    const decoder = createGunzip({ chunkSize: DECODE_CHUNK });
    const head: Buffer[] = [];
    let size = 0;
    decoder.on('data', (chunk: Buffer) => {
      if (size < HEAD_BYTES) head.push(chunk.subarray(0, HEAD_BYTES - size));
      size += chunk.length;
      if (size > maxDecodedBytes) {
        decoder.destroy();
        resolve({ kind: 'too-large' });
        return;
      }
      if (json?.valid === true) json.write(chunk);
    });
    decoder.once('end', () => {
      const checked = { size, head: Buffer.concat(head), json: json === undefined ? undefined : json.valid && json.end() };
      resolve({ kind: 'checked', body: checked });
    });
    decoder.once('error', () => resolve({ kind: 'failed' }));
    decoder.end(body);
  });
}
