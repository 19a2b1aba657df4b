/**
 * Reads a client's request body, up to a size: a GraphQL call from a pooled consumer is read
 * whole before anything goes upstream (it must be parsed and checked first).
 */
import type { IncomingMessage } from 'node:http';

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
export function readBody(req: IncomingMessage, maxBytes: number, keep = false): Promise<BodyRead> {
  const declared = Number(req.headers['content-length']);
  if (!keep && Number.isFinite(declared) && declared > maxBytes) return Promise.resolve({ kind: 'too-large' });
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
        if (keep) {
          req.pause();
          done({ kind: 'too-large', head: [...chunks, chunk] });
          return;
        }
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
