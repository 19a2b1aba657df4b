/**
 * The body of a GraphQL call made with a client's own credential is read up to a cap (src/http/body.ts,
 * keeping what was read) so that the proxy can tell a query (cached) from a mutation (what it
 * touches purged). A body past the cap is not refused, as a pooled one is: what was read and the
 * rest go upstream unread (`continued`), as they would have without the proxy.
 */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

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
