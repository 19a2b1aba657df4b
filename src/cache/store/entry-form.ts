/**
 * What a stored entry looks like to this client. Its headers are flattened once per entry, with
 * Link and Location pointed at the proxy's public base, and, on an upstream that rewrites body URLs
 * (`rewrite_body_urls`), its JSON body has the upstream's API addresses pointed there too. Both
 * depend only on the entry and the public base, so they are computed once per (entry, base) and
 * memoized beside the cache, never stored in it: a client's Host can only change its own answer.
 * The cached path resolves a hit's form once (`formFor`), and answer() writes it (src/http/answer.ts).
 *
 * The body is stored in the coding it arrived in (gzip: src/cache/store/entry-codec.ts). A client that
 * takes it gets those bytes; one that does not gets them decoded, memoized per (entry, base) in a
 * bounded memo of its own (up to an eighth of cache.max_bytes, counted within it: services.ts).
 * Body URLs are rewritten on the decoded body, which goes back into gzip for a gzip client. So a
 * form is memoized per (entry, base, coding). An entry the proxy may not decode (`no-transform`) is
 * never served to a client that refused its coding (`formFor` has no form for it).
 *
 * A rewritten or decoded body gets its own Content-Length, and a strong ETag is weakened (the bytes
 * are no longer the upstream's); the client's If-None-Match is still compared with the tag it was given.
 *
 * A body is decoded whole on the event loop only up to `cache.max_decoded_bytes`. A larger one (a
 * base64 blob of zeros is 100 MB from 100 KB of gzip) is decoded as a stream for each client that
 * does not take gzip (`decode`: chunked, in libuv's pool, paused while the socket is full), and
 * its body URLs are left as they are, as for a body over the entry cap. Which entries are over the
 * bound is known from their decoded size, or learnt once from a decode that hit it.
 * The memo of rewritten bodies (`createRewrittenBodies`) is at the end.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { CacheEntry } from '../rules/entry.js';
import {
  rewriteLink,
  rewriteLocation,
  rewritesLocation,
  type LinkRewrite,
  hasUrlsUnder,
  rewriteBodyUrls,
  weakened,
  type PublicAddresses,
  acceptsGzip,
  refusesCoding,
} from '../../http/representation.js';
import { isJsonMediaType } from '../../http/headers/fields.js';
import type { Representation } from '../../http/reply.js';
import { decodedBody, encodedBody, entryCoding } from './entry-codec.js';
import { createMemo } from '../../platform/bytes.js';

export interface EntryForm extends Representation {
  /** What the form was made for: the coding it is in and the public base (see formKey). */
  readonly base: string;
}

export type RewrittenForms = RewrittenBodies<EntryForm>;

/** What the forms of one upstream's entries depend on, beside the entry and the client. */
export interface FormSettings {
  /** Where the upstream's addresses point for a client, and whether its JSON bodies' are rewritten. */
  readonly addresses: PublicAddresses;
  /** The memory of rewritten bodies when the upstream rewrites body URLs (`rewrite_body_urls`), else undefined. */
  readonly rewrittenBodies: RewrittenForms | undefined;
  /** The memory of decoded forms of gzip entries, for clients that do not take gzip. */
  readonly decodedForms: RewrittenForms;
  /** The most an entry's body is decoded in one synchronous step (`cache.max_decoded_bytes`); a larger one streams. */
  readonly maxDecodedBytes: number;
}

/** Per entry: its stored headers flattened, what of it depends on the public base and the coding, and its last forms. */
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
  /** The form with Link and Location rewritten for the last public base seen (stored coding, no body change). */
  linked: EntryForm | undefined;
  /** Its body is gzip and may be decoded for a client that does not take gzip (entry-codec.ts). */
  readonly gzip: boolean;
  /** Its coding when the proxy may not decode it (no-transform, or not gzip): never for a client that refused it. */
  readonly fixed: string | undefined;
}

/** A form of `entry`: its headers and body as one client gets them (one shape for all). */
function newForm(entry: CacheEntry, base: string, headers: string[], body: Buffer, decode: boolean): EntryForm {
  return {
    status: entry.status,
    headers,
    body,
    decode,
    etag: entry.etag,
    lastModified: entry.lastModified,
    outgoing: undefined,
    block: undefined,
    base,
  };
}

/** The memo key of a form: its coding (`stored` or `identity`) and its public base ('' for none). */
const formKey = (identity: boolean, base: string | undefined): string => `${identity ? 'identity' : 'stored'} ${base ?? ''}`;

/**
 * The forms of one upstream's entries (one instance per upstream, built with its runtime). Per
 * entry, a record of what its forms depend on and its last link and streamed forms; the decoded
 * and rewritten bodies are kept in the bounded memories of `settings`.
 */
export class EntryForms {
  private readonly plains = new WeakMap<CacheEntry, Plain>();

  constructor(private readonly settings: FormSettings) {}

  /**
   * The headers and body a client with these request headers gets for a stored entry; undefined
   * when it explicitly refused the coding of an entry the proxy may not decode (`fixed`): it must
   * not get the entry, and the cached path forwards its request instead (src/paths/rest/cached.ts).
   * A client that takes gzip, or an entry that is not gzip, gets the stored bytes (the hit path: no
   * copy, no work); one that does not take gzip gets the body decoded, kept in a bounded memo beside
   * the cache (`decodedForms`).
   */
  formFor(headers: IncomingHttpHeaders, entry: CacheEntry): EntryForm | undefined {
    const plain = this.plainOf(entry);
    const accept = headers['accept-encoding'];
    // A client without Accept-Encoding takes any coding.
    if (plain.fixed !== undefined && accept !== undefined && refusesCoding(accept, plain.fixed)) return undefined;
    // No Accept-Encoding: the proxy may choose, and gives identity (src/http/representation.ts).
    return this.clientForm(headers, entry, plain, plain.gzip && (accept === undefined || !acceptsGzip(accept)));
  }

  private plainOf(entry: CacheEntry): Plain {
    const known = this.plains.get(entry);
    if (known !== undefined) return known;
    const { settings } = this;
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
    const maxDecoded = settings.maxDecodedBytes;
    let overBound = gzip && entry.decodedSize > maxDecoded;
    let bodyUrls = false;
    if (settings.rewrittenBodies !== undefined && !noTransform && !overBound && isJsonMediaType(contentType)) {
      const decoded = gzip ? decodedBody(entry.body, entry.decodedSize, maxDecoded) : entry.body;
      overBound = decoded === undefined;
      bodyUrls = decoded !== undefined && hasUrlsUnder(decoded, settings.addresses.upstreamBase);
    }
    const form = newForm(entry, '', headers, entry.body, false);
    const plain: Plain = { form, links, bodyUrls, overBound, streamed: undefined, linked: undefined, gzip, fixed };
    this.plains.set(entry, plain);
    return plain;
  }

  /** The form for a client that takes the stored coding or (`identity`) gets the body decoded. */
  private clientForm(headers: IncomingHttpHeaders, entry: CacheEntry, plain: Plain, identity: boolean): EntryForm {
    if (!identity && !plain.links && !plain.bodyUrls) return plain.form;
    if (identity && plain.overBound) return this.streamedForm(headers, entry, plain);
    const { settings } = this;
    const base = plain.links || plain.bodyUrls ? settings.addresses.proxyBase(headers) : undefined;
    if (!identity && base === undefined) return plain.form;
    const bodyUrls = plain.bodyUrls && base !== undefined;
    const forms = bodyUrls ? settings.rewrittenBodies : identity ? settings.decodedForms : undefined;
    if (forms === undefined) {
      const known = plain.linked;
      if (known !== undefined && known.base === base) return known;
      const rewritten = this.rewrittenHeaders(entry, plain.form.headers, { base, body: entry.body, identity });
      const form = newForm(entry, base ?? '', rewritten, entry.body, false);
      plain.linked = form;
      return form;
    }
    const key = formKey(identity, base);
    const known = forms.get(entry, key);
    if (known !== undefined) return known;
    const body = this.formBody(entry, plain.gzip, { base: bodyUrls ? base : undefined, identity });
    if (body === undefined) {
      // Over the decode bound after all (its stored size said less): from now on only streamed, never rewritten.
      plain.overBound = true;
      plain.bodyUrls = false;
      return this.clientForm(headers, entry, plain, identity);
    }
    const form = newForm(entry, key, this.rewrittenHeaders(entry, plain.form.headers, { base, body, identity }), body, false);
    forms.set(entry, form);
    return form;
  }

  /** The form of an entry over the decode bound for a client that does not take gzip: the stored bytes, decoded as they go out. */
  private streamedForm(headers: IncomingHttpHeaders, entry: CacheEntry, plain: Plain): EntryForm {
    const base = plain.links ? this.settings.addresses.proxyBase(headers) : undefined;
    const known = plain.streamed;
    if (known !== undefined && known.base === (base ?? '')) return known;
    const rewritten = this.rewrittenHeaders(entry, plain.form.headers, { base, body: entry.body, identity: true, streamed: true });
    const form = newForm(entry, base ?? '', rewritten, entry.body, true);
    plain.streamed = form;
    return form;
  }

  /**
   * The body of a form: decoded for an identity client, with body URLs rewritten for `base`, back in
   * gzip for a gzip client; undefined when it decodes to more than `cache.max_decoded_bytes`.
   */
  private formBody(entry: CacheEntry, gzip: boolean, to: { base: string | undefined; identity: boolean }): Buffer | undefined {
    const { settings } = this;
    const decoded = gzip ? decodedBody(entry.body, entry.decodedSize, settings.maxDecodedBytes) : entry.body;
    if (decoded === undefined) return undefined;
    const rewritten = to.base === undefined ? decoded : (rewriteBodyUrls(decoded, settings.addresses.upstreamBase, to.base) ?? decoded);
    if (to.identity || !gzip) return rewritten;
    return rewritten === decoded ? entry.body : encodedBody(rewritten);
  }

  /**
   * The flat header list of a form: Link and Location rewritten for `base`; with a body that is not
   * the stored one (rewritten, or decoded), its length and a weak ETag (RFC 9110 section 8.8.1: the
   * bytes are no longer the upstream's, as nginx does when it changes the coding); for identity, no
   * Content-Encoding; `streamed` (decoded on the way out), a weak ETag and no Content-Length (chunked).
   */
  private rewrittenHeaders(
    entry: CacheEntry,
    flat: string[],
    form: { base: string | undefined; body: Buffer; identity: boolean; streamed?: boolean },
  ): string[] {
    const out: string[] = [];
    const rewrite: LinkRewrite | undefined =
      form.base === undefined ? undefined : { upstreamBase: this.settings.addresses.upstreamBase, proxyBase: form.base };
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
}

/*
 * The bounded memory of rewritten bodies: per stored entry, the form served for each public base
 * (clients reach the proxy under a handful of names: a service name, localhost, an ingress host),
 * so that a body is rewritten once per entry and base, not per hit. An LRU keyed by the entry
 * itself (a replaced entry is a new object and a new key; the old one ages out), bounded in bytes
 * (src/platform/bytes.ts),
 * with at most MAX_BASES forms an entry, the least recently used replaced first: no client can fill
 * memory by sending Host names, nor pin an entry's slots so that its regular clients' form is never
 * kept. Its size is exported in `etagere_cache_bytes`.
 */
/** Public bases kept per entry. */
export const MAX_BASES = 4;
/** Per-form cost beyond its body: the header list and the slot (an estimate on the high side). */
const FORM_OVERHEAD = 512;

export interface Form {
  readonly base: string;
  readonly body: Buffer;
}

export interface RewrittenBodies<F extends Form> {
  get(entry: object, base: string): F | undefined;
  set(entry: object, form: F): void;
  /** Drops an entry's forms (the entry left the cache). */
  forget(entry: object): void;
  /** Bytes held, as counted against the bound. */
  readonly bytes: number;
}

/** `grew`: called after a form was kept (the decoded bodies count against L1's bound, which then gives way: services.ts). */
export function createRewrittenBodies<F extends Form>(maxBytes: number, grew?: () => void): RewrittenBodies<F> {
  const lru = createMemo<object, F[]>(maxBytes, (_entry, forms) => forms.reduce((sum, form) => sum + form.body.length + FORM_OVERHEAD, 0));
  return {
    get(entry, base) {
      const forms = lru.get(entry);
      if (forms === undefined) return undefined;
      const last = forms.length - 1;
      for (let index = last; index >= 0; index--) {
        const form = forms[index]!;
        if (form.base !== base) continue;
        // The most recently used form goes last, in place (same forms, same size): no allocation on a hit.
        if (index !== last) {
          forms.copyWithin(index, index + 1);
          forms[last] = form;
        }
        return form;
      }
      return undefined;
    },
    set(entry, form) {
      const forms = lru.peek(entry) ?? [];
      const kept = forms.filter((held) => held.base !== form.base);
      lru.set(entry, [...kept.slice(Math.max(0, kept.length - MAX_BASES + 1)), form]);
      grew?.();
    },
    forget(entry) {
      lru.delete(entry);
    },
    get bytes() {
      return lru.bytes;
    },
  };
}
