/**
 * The body of a GraphQL call made with a client's own credential, read up to a cap so that the
 * proxy can tell a query (cached) from a mutation (what it touches purged). A body past the cap
 * is not refused, as a pooled one is: what was read and the rest go upstream unread
 * (`continued`), as they would have without the proxy.
 */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

export type ClientBody =
  | { kind: 'read'; body: Buffer }
  /** Past the cap: what was read so far (the request is paused, its listeners removed). */
  | { kind: 'over'; head: Buffer[] }
  /** The client went away. */
  | { kind: 'failed' };

export function readClientBody(req: IncomingMessage, maxBytes: number): Promise<ClientBody> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (read: ClientBody): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      resolve(read);
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      size += chunk.length;
      if (size <= maxBytes) return;
      req.pause();
      done({ kind: 'over', head: chunks });
    };
    const onEnd = (): void => done({ kind: 'read', body: Buffer.concat(chunks, size) });
    const onError = (): void => done({ kind: 'failed' });
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('aborted', onError);
  });
}

/** What was read of a request's body, then the rest of it, as one stream. */
export function continued(head: readonly Buffer[], req: IncomingMessage): Readable {
  return Readable.from(
    (async function* body() {
      yield* head;
      for await (const chunk of req) yield chunk as Buffer;
    })(),
    { objectMode: false },
  );
}
