/**
 * A request's body as text, read up to a cap (the control endpoints, GraphQL): past the cap the rest
 * is read and dropped, so the answer can go out on a connection left clean.
 */
import type { IncomingMessage } from 'node:http';

export type BodyRead = { kind: 'ok'; text: string } | { kind: 'too-large' } | { kind: 'failed'; error: unknown };

export function readCappedBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (read: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      resolve(read);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        finish({ kind: 'too-large' });
        req.resume();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => finish({ kind: 'ok', text: Buffer.concat(chunks).toString('utf8') });
    const onError = (error: unknown): void => finish({ kind: 'failed', error });
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
  });
}
