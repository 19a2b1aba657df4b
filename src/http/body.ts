/**
 * Reads a client's request body, up to a size: a GraphQL call from a pooled consumer is read
 * whole before anything goes upstream (it must be parsed and checked first).
 */
import type { IncomingMessage } from 'node:http';

export type BodyRead = { kind: 'read'; body: Buffer } | { kind: 'too-large' } | { kind: 'failed' };

/**
 * The body, or `too-large` as soon as it (or its Content-Length) passes `maxBytes`: the rest is
 * dropped unread. `failed`: the client went away.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve({ kind: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (read: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      resolve(read);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        done({ kind: 'too-large' });
        req.resume(); // the rest is read and dropped while the 413 goes out
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => done({ kind: 'read', body: Buffer.concat(chunks, size) });
    const onError = (): void => done({ kind: 'failed' });
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('aborted', onError);
  });
}
