/**
 * Reads a client's request body, up to a size: a GraphQL call from a pooled consumer is read
 * whole before anything goes upstream (it must be parsed and checked first).
 */
import type { IncomingMessage } from 'node:http';
import { readCapped } from '../platform/bytes.js';

export type BodyRead =
  | { kind: 'read'; body: Buffer }
  /** Past the cap. `head`: what was read so far, when the caller asked to keep it (the request is then paused). */
  | { kind: 'too-large'; head?: Buffer[] }
  | { kind: 'failed' };

/**
 * The body, or `too-large` as soon as it (or its Content-Length) passes `maxBytes`: the rest is
 * dropped unread, or with `keep` left in the paused request behind what was read (`head`), for
 * the caller to send on as it is. `failed`: the client went away.
 */
export async function readBody(req: IncomingMessage, maxBytes: number, keep = false): Promise<BodyRead> {
  const declared = Number(req.headers['content-length']);
  if (!keep && Number.isFinite(declared) && declared > maxBytes) return { kind: 'too-large' };
  const read = await readCapped(req, maxBytes, ['error', 'aborted']);
  if (read.kind === 'failed') return { kind: 'failed' };
  if (read.kind === 'over') {
    if (keep) return { kind: 'too-large', head: read.chunks }; // the request stays paused behind them
    req.resume(); // the rest is read and dropped while the 413 goes out
    return { kind: 'too-large' };
  }
  return { kind: 'read', body: Buffer.concat(read.chunks, read.size) };
}
