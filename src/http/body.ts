/**
 * Reads a client's request body, up to a size: a GraphQL call from a pooled consumer is read
 * whole before anything goes upstream (it must be parsed and checked first).
 */
import type { IncomingMessage } from 'node:http';
import { readCapped } from '../platform/capped-read.js';

export type BodyRead = { kind: 'read'; body: Buffer } | { kind: 'too-large' } | { kind: 'failed' };

/**
 * The body, or `too-large` as soon as it (or its Content-Length) passes `maxBytes`: the rest is
 * dropped unread. `failed`: the client went away.
 */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return { kind: 'too-large' };
  const read = await readCapped(req, maxBytes, ['error', 'aborted']);
  if (read.kind === 'failed') return { kind: 'failed' };
  if (read.kind === 'over') {
    req.resume(); // the rest is read and dropped while the 413 goes out
    return { kind: 'too-large' };
  }
  return { kind: 'read', body: Buffer.concat(read.chunks, read.size) };
}
