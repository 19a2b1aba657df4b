/**
 * What a stored entry looks like to this client. Its headers are flattened once per entry, with
 * Link and Location pointed at the proxy's public base, and, on an upstream that rewrites body URLs
 * (`rewrite_body_urls`), its JSON body has the upstream's API addresses pointed there too. Both
 * depend only on the entry and the public base, so they are computed once per (entry, base) and
 * memoized beside the cache, never stored in it: a client's Host can only change its own answer.
 *
 * The body is stored in the coding it arrived in (gzip: src/cache/store/entry-coding.ts). A client that
 * takes it gets those bytes; one that does not gets them decoded, memoized per (entry, base) in a
 * bounded memo of its own (up to an eighth of cache.max_bytes, counted within it: services.ts).
 * Body URLs are rewritten on the decoded body, which goes back into gzip for a gzip client. So a
 * form is memoized per (entry, base, coding). An entry the proxy may not decode (`no-transform`) is
 * never served to a client that refused its coding (`refusesStoredCoding`).
 *
 * A rewritten or decoded body gets its own Content-Length, and a strong ETag is weakened (the bytes
 * are no longer the upstream's); the client's If-None-Match is still compared with the tag it was given.
 *
 * A body is decoded whole on the event loop only up to `cache.max_decoded_bytes`. A larger one (a
 * base64 blob of zeros is 100 MB from 100 KB of gzip) is decoded as a stream for each client that
 * does not take gzip (`decode`: chunked, in libuv's pool, paused while the socket is full), and
 * its body URLs are left as they are, as for a body over the entry cap. Which entries are over the
 * bound is known from their decoded size, or learnt once from a decode that hit it.
 */
import type { CacheEntry } from '../rules/entry.js';
import {
  publicBase,
  rewriteLink,
  rewriteLocation,
  rewritesLocation,
  withRoutePrefix,
  type LinkRewrite,
} from '../../http/representation/link.js';
import { isJsonMediaType } from '../../http/headers/media-type.js';
import { hasUrlsUnder, rewriteBodyUrls, weakened } from '../../http/representation/body-urls.js';
import type { RewrittenBodies } from './rewritten-bodies.js';
import type { AnswerContext } from '../../paths/context.js';
import { decodedBody, encodedBody, entryCoding } from './entry-coding.js';
import { acceptsGzip, refusesCoding } from '../../http/representation/coding.js';

export interface EntryForm {
  /** What the form was made for: the coding it is in and the public base (see formKey). */
  readonly base: string;
  /** [name, value, ...] ending with content-length (none when `decode`). */
  readonly headers: string[];
  readonly body: Buffer;
  /** `body` is the stored gzip, to be decoded on the way out (over `cache.max_decoded_bytes`). */
  readonly decode: boolean;
}

export type RewrittenForms = RewrittenBodies<EntryForm>;

interface Plain {
  /** The entry as stored: its bytes in their coding, and Vary listing Accept-Encoding when the proxy may decode it. */
  readonly form: EntryForm;
  /** It carries a Link header, or a Location to rewrite. */
  readonly links: boolean;
  /** Its JSON body holds API addresses of the upstream, and the upstream rewrites them. */
  bodyUrls: boolean;
  /** Its gzip body decodes to more than `cache.max_decoded_bytes`: only ever decoded as a stream. */
  overBound: boolean;
  /** Over the bound: its streamed identity form for the last public base seen. */
  streamed: EntryForm | undefined;
  /** Its body is gzip and may be decoded for a client that does not take gzip (entry-coding.ts). */
  readonly gzip: boolean;
  /** Its coding when the proxy may not decode it (no-transform, or not gzip): never for a client that refused it. */
  readonly fixed: string | undefined;
}

/** Per entry, its stored headers flattened and what of it depends on the public base and the coding. */
const plains = new WeakMap<CacheEntry, Plain>();
/** Per entry, the form with Link and Location rewritten for the last public base seen (stored coding, no body change). */
const linkForms = new WeakMap<CacheEntry, EntryForm>();

function plainOf(ctx: AnswerContext, entry: CacheEntry): Plain {
  const known = plains.get(entry);
  if (known !== undefined) return known;
  const headers: string[] = [];
  let links = false;
  let contentType: string | undefined;
  for (const [name, value] of entry.headers) {
    headers.push(name, value);
    if (name === 'link' || (name === 'location' && rewritesLocation(entry.status))) links = true;
    else if (name === 'content-type') contentType = value;
  }
  const { gzip, fixed, variesOnCoding, noTransform } = entryCoding(entry.headers);
  // Either way what a client gets depends on its Accept-Encoding (decoded, or its request forwarded).
  if ((gzip || fixed !== undefined) && !variesOnCoding) headers.push('vary', 'Accept-Encoding');
  headers.push('content-length', String(entry.body.length));
  const maxDecoded = ctx.upstream.maxDecodedBytes;
  let overBound = gzip && entry.decodedSize > maxDecoded;
  let bodyUrls = false;
  if (ctx.upstream.rewrittenBodies !== undefined && !noTransform && !overBound && isJsonMediaType(contentType)) {
    const decoded = gzip ? decodedBody(entry.body, entry.decodedSize, maxDecoded) : entry.body;
    overBound = decoded === undefined;
    bodyUrls = decoded !== undefined && hasUrlsUnder(decoded, ctx.upstream.linkBase);
  }
  const form = { base: '', headers, body: entry.body, decode: false };
  const plain: Plain = { form, links, bodyUrls, overBound, streamed: undefined, gzip, fixed };
  plains.set(entry, plain);
  return plain;
}

/**
 * The client explicitly refused the coding of an entry the proxy may not decode (`fixed`): it must
 * not get the entry, and the cached path forwards its request instead (cached.ts). A client without
 * Accept-Encoding takes any coding, and one that takes the coding costs a lookup of the entry's
 * memoized facts, nothing more.
 */
export function refusesStoredCoding(ctx: AnswerContext, entry: CacheEntry): boolean {
  const header = ctx.req.headers['accept-encoding'];
  if (header === undefined) return false;
  const { fixed } = plainOf(ctx, entry);
  return fixed !== undefined && refusesCoding(header, fixed);
}

/** The memo key of a form: its coding (`stored` or `identity`) and its public base ('' for none). */
const formKey = (identity: boolean, base: string | undefined): string => `${identity ? 'identity' : 'stored'} ${base ?? ''}`;

/**
 * The headers and body this client gets for a stored entry. A client that takes gzip, or an entry
 * that is not gzip, gets the stored bytes (the hit path: no copy, no work); one that does not take
 * gzip gets the body decoded, kept in a bounded memo beside the cache (`decodedForms`).
 */
export function entryForm(ctx: AnswerContext, entry: CacheEntry): EntryForm {
  const plain = plainOf(ctx, entry);
  const identity = plain.gzip && !acceptsGzip(ctx.req.headers['accept-encoding']);
  if (!identity && !plain.links && !plain.bodyUrls) return plain.form;
  if (identity && plain.overBound) return streamedForm(ctx, entry, plain);
  const base = plain.links || plain.bodyUrls ? proxyBaseFor(ctx) : undefined;
  if (!identity && base === undefined) return plain.form;
  const bodyUrls = plain.bodyUrls && base !== undefined;
  const forms = bodyUrls ? ctx.upstream.rewrittenBodies : identity ? ctx.upstream.decodedForms : undefined;
  if (forms === undefined) {
    const known = linkForms.get(entry);
    if (known !== undefined && known.base === base) return known;
    const form = {
      base: base ?? '',
      headers: rewrittenHeaders(ctx, entry, plain.form.headers, { base, body: entry.body, identity }),
      body: entry.body,
      decode: false,
    };
    linkForms.set(entry, form);
    return form;
  }
  const key = formKey(identity, base);
  const known = forms.get(entry, key);
  if (known !== undefined) return known;
  const body = formBody(ctx, entry, plain.gzip, { base: bodyUrls ? base : undefined, identity });
  if (body === undefined) {
    // Over the decode bound after all (its stored size said less): from now on only streamed, never rewritten.
    plain.overBound = true;
    plain.bodyUrls = false;
    return entryForm(ctx, entry);
  }
  const form = { base: key, headers: rewrittenHeaders(ctx, entry, plain.form.headers, { base, body, identity }), body, decode: false };
  forms.set(entry, form);
  return form;
}

/** The form of an entry over the decode bound for a client that does not take gzip: the stored bytes, decoded as they go out. */
function streamedForm(ctx: AnswerContext, entry: CacheEntry, plain: Plain): EntryForm {
  const base = plain.links ? proxyBaseFor(ctx) : undefined;
  const known = plain.streamed;
  if (known !== undefined && known.base === (base ?? '')) return known;
  const headers = rewrittenHeaders(ctx, entry, plain.form.headers, { base, body: entry.body, identity: true, streamed: true });
  const form = { base: base ?? '', headers, body: entry.body, decode: true };
  plain.streamed = form;
  return form;
}

/**
 * The body of a form: decoded for an identity client, with body URLs rewritten for `base`, back in
 * gzip for a gzip client; undefined when it decodes to more than `cache.max_decoded_bytes`.
 */
function formBody(
  ctx: AnswerContext,
  entry: CacheEntry,
  gzip: boolean,
  to: { base: string | undefined; identity: boolean },
): Buffer | undefined {
  const decoded = gzip ? decodedBody(entry.body, entry.decodedSize, ctx.upstream.maxDecodedBytes) : entry.body;
  if (decoded === undefined) return undefined;
  const rewritten = to.base === undefined ? decoded : (rewriteBodyUrls(decoded, ctx.upstream.linkBase, to.base) ?? decoded);
  if (to.identity || !gzip) return rewritten;
  return rewritten === decoded ? entry.body : encodedBody(rewritten);
}

/**
 * The flat header list of a form: Link and Location rewritten for `base`; with a body that is not
 * the stored one (rewritten, or decoded), its length and a weak ETag (RFC 9110 section 8.8.1: the
 * bytes are no longer the upstream's, as nginx does when it changes the coding); for identity, no
 * Content-Encoding; `streamed` (decoded on the way out), a weak ETag and no Content-Length (chunked).
 */
function rewrittenHeaders(
  ctx: AnswerContext,
  entry: CacheEntry,
  flat: string[],
  form: { base: string | undefined; body: Buffer; identity: boolean; streamed?: boolean },
): string[] {
  const out: string[] = [];
  const rewrite: LinkRewrite | undefined =
    form.base === undefined ? undefined : { upstreamBase: ctx.upstream.linkBase, proxyBase: form.base };
  const locationToo = rewritesLocation(entry.status);
  const changed = form.streamed === true || form.body !== entry.body;
  for (let index = 0; index < flat.length; index += 2) {
    const name = flat[index]!;
    let value = flat[index + 1]!;
    if (form.identity && name === 'content-encoding') continue;
    if (rewrite !== undefined && name === 'link') value = rewriteLink(value, rewrite);
    else if (rewrite !== undefined && locationToo && name === 'location') value = rewriteLocation(value, rewrite);
    else if (changed && name === 'etag') value = weakened(value);
    out.push(name, value);
  }
  // The content-length pair is always last: a streamed form has none (chunked).
  if (form.streamed === true) out.length -= 2;
  else out[out.length - 1] = String(form.body.length);
  return out;
}

/**
 * Per upstream, the last proxy base and what it was built from (`public_url`, else the Host value):
 * clients mostly send one Host, so a hit compares one string instead of validating it and building
 * a URL. Not used with trust_forwarded (the base then depends on more than one header).
 */
const baseMemo = new WeakMap<AnswerContext['upstream'], { from: string; base: string | undefined }>();

/** The proxy base URL that Link, Location and body addresses should point at for this request, or undefined (no rewrite). */
export function proxyBaseFor(ctx: AnswerContext): string | undefined {
  const headers = ctx.req.headers;
  const { links, cfg } = ctx.upstream;
  const from = links.publicUrl ?? (links.trustForwarded ? undefined : (headers.host ?? ''));
  const memo = from === undefined ? undefined : baseMemo.get(ctx.upstream);
  if (memo !== undefined && memo.from === from) return memo.base;
  const found = publicBase(links.publicUrl, links.trustForwarded, (name) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  });
  const base = found === undefined ? undefined : withRoutePrefix(found, cfg.strip_prefix, cfg.prefix);
  if (from !== undefined) baseMemo.set(ctx.upstream, { from, base });
  return base;
}
