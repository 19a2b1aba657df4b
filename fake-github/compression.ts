/**
 * Gzip, as GitHub serves it: a request whose Accept-Encoding takes gzip gets its rendered 200 body
 * gzipped, with `Content-Encoding: gzip` (Vary lists Accept-Encoding on every answer). The ETag is
 * the same for both codings, as GitHub's weak ETags are. A rendered body is gzipped once and the
 * result kept beside it, so a hot resource costs one compression, not one per request.
 */
import { gzipSync } from 'node:zlib';
import type { Rendered } from './etag.js';

/** The q-value an Accept-Encoding value gives `coding` (else `*`); undefined when it names neither. */
function acceptedQuality(header: string, coding: string): number | undefined {
  let wildcard: number | undefined;
  for (const part of header.split(',')) {
    const [rawName, ...params] = part.split(';');
    const name = rawName!.trim().toLowerCase();
    if (name !== coding && name !== '*') continue;
    let quality = 1;
    for (const param of params) {
      const [key, value] = param.split('=');
      if (key?.trim().toLowerCase() === 'q') quality = Number(value?.trim());
    }
    if (!Number.isFinite(quality)) quality = 0;
    if (name === coding) return quality;
    wildcard = quality;
  }
  return wildcard;
}

/** The request accepts gzip (RFC 9110 section 12.5.3: named or `*`, with a q-value above 0). */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  const text = Array.isArray(header) ? header.join(',') : header;
  return (acceptedQuality(text, 'gzip') ?? 0) > 0;
}

/** The gzipped form of a rendered body (`body`, the answer's own when it is not the rendered one). */
export function gzippedBody(rendered: Rendered, body: Buffer): Buffer {
  if (body !== rendered.body) return gzipSync(body);
  // A copy: zlib's output can be a view into a chunk of 16 KiB or more, which a kept body would pin.
  rendered.gzipped ??= Buffer.from(gzipSync(rendered.body));
  return rendered.gzipped;
}
