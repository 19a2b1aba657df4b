/**
 * The forms of an entry's body served to a client (entry-form.ts): decoded for a client that does
 * not take gzip, with body URLs rewritten for its public base. A body that decodes to more than
 * cache.max_decoded_bytes is never decoded whole on the event loop; junk Host names cannot pin an
 * entry's kept forms so that a regular client's form is made again on every hit.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { answer } from '../../src/http/answer.js';
import type { AnswerContext } from '../../src/paths/context.js';
import { type EntryForm, MAX_BASES, createRewrittenBodies, type RewrittenBodies } from '../../src/cache/store/entry-form.js';
import { createUpstreamRuntime, type UpstreamRuntime } from '../../src/paths/upstreams.js';
import { testEntry } from '../helpers/entry.js';

const API = 'https://api.github.com';

/** A response that records what answer() wrote. */
class RecordedResponse extends Writable {
  status = 0;
  headers: Record<string, string> = {};
  headersSent = false;
  private readonly chunks: Buffer[] = [];

  writeHead(status: number, headers: readonly string[]): this {
    this.status = status;
    this.headersSent = true;
    for (let i = 0; i < headers.length; i += 2) this.headers[headers[i]!] = headers[i + 1]!;
    return this;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.chunks.push(Buffer.from(chunk));
    done();
  }

  get body(): Buffer {
    return Buffer.concat(this.chunks);
  }

  finished(): Promise<void> {
    return this.writableFinished ? Promise.resolve() : new Promise((resolve) => this.once('finish', () => resolve()));
  }
}

let upstreams: UpstreamRuntime[] = [];
afterEach(async () => {
  await Promise.all(upstreams.map((upstream) => upstream.client.close()));
  upstreams = [];
});

interface Setup {
  upstream: UpstreamRuntime;
  rewritten: RewrittenBodies<EntryForm>;
  decoded: RewrittenBodies<EntryForm>;
}

function setup(options: { rewrite: boolean; maxDecodedBytes?: number }): Setup {
  const config = parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: API, rewrite_body_urls: options.rewrite }] });
  const rewritten = createRewrittenBodies<EntryForm>(64 << 20);
  const decoded = createRewrittenBodies<EntryForm>(64 << 20);
  const upstream = createUpstreamRuntime(
    config.upstreams[0]!,
    { publicUrl: null, trustForwarded: false },
    { rewritten, decoded, maxDecodedBytes: options.maxDecodedBytes },
    config.cache.max_entry_bytes,
  );
  upstreams.push(upstream);
  return { upstream, rewritten, decoded };
}

function context(upstream: UpstreamRuntime, headers: Record<string, string>, method = 'GET') {
  const res = new RecordedResponse();
  const ctx: AnswerContext = {
    req: { headers, method } as unknown as IncomingMessage,
    res: res as unknown as ServerResponse,
    id: 'req-1',
    upstream,
    method,
  };
  return { ctx, res };
}

/** A gzip JSON entry as the cache stores it; `decodedSize` may be set to a wrong (understated) value. */
function gzipEntry(json: Buffer, over: Partial<CacheEntry> = {}): CacheEntry {
  return testEntry({
    headers: [
      ['content-type', 'application/json; charset=utf-8'],
      ['content-encoding', 'gzip'],
      ['etag', '"strong"'],
    ],
    body: gzipSync(json),
    decodedSize: json.length,
    ...over,
  });
}

/** A blob answer of `size` zero bytes, as GitHub's git/blobs endpoint gives it (base64 of zeros compresses about 1000:1). */
/** The entry's form for this client, as the cached path resolves it. */
function entryForm(ctx: AnswerContext, entry: CacheEntry): EntryForm {
  const form = ctx.upstream.forms.formFor(ctx.req.headers, entry);
  if (form === undefined) throw new Error('the client refused the stored coding');
  return form;
}

/** Answers the request with the entry as a plain L1 hit. */
function answerHit(ctx: AnswerContext, entry: CacheEntry): void {
  answer(ctx, {
    kind: 'form',
    form: entryForm(ctx, entry),
    cacheStatus: 'etagere; hit',
    age: 0,
    extra: undefined,
    ranges: false,
    outcome: 'hit',
    upstreamStatus: undefined,
    token: undefined,
  });
}

function zeroBlob(size: number): Buffer {
  const content = Buffer.alloc(size).toString('base64');
  return Buffer.from(JSON.stringify({ sha: 'f'.repeat(40), size, url: `${API}/repos/o/r/git/blobs/${'f'.repeat(40)}`, content }));
}

describe('a gzip entry that decodes past cache.max_decoded_bytes', () => {
  it('reaches a client that does not take gzip whole, decoded as it goes out (chunked, weak ETag)', async () => {
    const { upstream } = setup({ rewrite: false, maxDecodedBytes: 64 * 1024 });
    const json = zeroBlob(600 * 1024);
    const entry = gzipEntry(json);
    const { ctx, res } = context(upstream, { 'accept-encoding': 'identity' });
    answerHit(ctx, entry);
    await res.finished();
    expect(res.status).toBe(200);
    expect(res.body.equals(json)).toBe(true);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.headers.etag).toBe('W/"strong"');

    const gzipClient = context(upstream, { 'accept-encoding': 'gzip' });
    answerHit(gzipClient.ctx, entry);
    await gzipClient.res.finished();
    expect(gzipClient.res.body.equals(entry.body)).toBe(true);
    expect(gzipClient.res.headers['content-length']).toBe(String(entry.body.length));

    const head = context(upstream, {}, 'HEAD');
    answerHit(head.ctx, entry);
    await head.res.finished();
    expect(head.res.body.length).toBe(0);
    expect(head.res.headers['content-encoding']).toBeUndefined();
  });

  it('cuts the connection, never a short body, when the stored gzip fails to decode on the way', async () => {
    const { upstream } = setup({ rewrite: false, maxDecodedBytes: 64 * 1024 });
    const whole = gzipEntry(zeroBlob(600 * 1024));
    const entry = { ...whole, body: whole.body.subarray(0, whole.body.length - 64) };
    const { ctx, res } = context(upstream, { 'accept-encoding': 'identity' });
    answerHit(ctx, entry);
    await new Promise((resolve) => res.once('close', resolve));
    expect(res.destroyed).toBe(true);
    expect(res.writableFinished).toBe(false);
  });

  it('is never decoded whole, even when its stored size understates it, and the finding is kept for the entry', () => {
    const { upstream, decoded, rewritten } = setup({ rewrite: true, maxDecodedBytes: 1024 * 1024 });
    // 40 MB decoded from about 40 KB of gzip; the stored size claims 100 bytes.
    const json = zeroBlob(30 * 1024 * 1024);
    const entry = gzipEntry(json, { decodedSize: 100 });
    const first = entryForm(context(upstream, { 'accept-encoding': 'identity', host: 'proxy.internal' }).ctx, entry);
    expect(first.decode).toBe(true);
    expect(first.body).toBe(entry.body);
    expect(entryForm(context(upstream, { host: 'proxy.internal' }).ctx, entry)).toBe(first);
    // A gzip client gets the stored bytes: over the bound, body URLs are left as they are.
    const gzip = entryForm(context(upstream, { 'accept-encoding': 'gzip', host: 'proxy.internal' }).ctx, entry);
    expect(gzip.body).toBe(entry.body);
    expect(gzip.decode).toBe(false);
    expect(decoded.bytes + rewritten.bytes).toBe(0);
  });

  it('keeps serving bodies under the bound decoded and rewritten, as before', () => {
    const { upstream } = setup({ rewrite: true, maxDecodedBytes: 1024 * 1024 });
    const json = Buffer.from(JSON.stringify({ url: `${API}/repos/o/r` }));
    const entry = gzipEntry(json);
    const identity = entryForm(context(upstream, { 'accept-encoding': 'identity', host: 'proxy.internal' }).ctx, entry);
    expect(identity.decode).toBe(false);
    expect(JSON.parse(identity.body.toString())).toEqual({ url: 'http://proxy.internal/repos/o/r' });
    const gzip = entryForm(context(upstream, { 'accept-encoding': 'gzip', host: 'proxy.internal' }).ctx, entry);
    expect(JSON.parse(gunzipSync(gzip.body).toString())).toEqual({ url: 'http://proxy.internal/repos/o/r' });
  });

  it('defaults cache.max_decoded_bytes to cache.max_entry_bytes, and names the key of a bad value', () => {
    const config = parseConfig({ cache: { max_entry_bytes: 12345 }, upstreams: [{ name: 'github', prefix: '/', url: API }] });
    const upstream = createUpstreamRuntime(
      config.upstreams[0]!,
      { publicUrl: null, trustForwarded: false },
      { rewritten: createRewrittenBodies(1024), decoded: createRewrittenBodies(1024), maxDecodedBytes: config.cache.max_decoded_bytes },
      config.cache.max_entry_bytes,
    );
    upstreams.push(upstream);
    expect(upstream.maxDecodedBytes).toBe(12345);
    expect(() => parseConfig({ cache: { max_decoded_bytes: 0 } })).toThrow(/cache\.max_decoded_bytes/);
    expect(() => parseConfig({ cache: { max_decoded_bytes: 'lots' } })).toThrow(/cache\.max_decoded_bytes/);
  });
});

describe("an entry's kept forms (coding, public base)", () => {
  const json = Buffer.from(JSON.stringify([{ url: `${API}/repos/o/r`, owner: { url: `${API}/users/o` } }]));

  it('keep a regular client form after junk Host names filled the slots: its later hits reuse it', () => {
    const { upstream } = setup({ rewrite: true });
    const entry = gzipEntry(json);
    for (let index = 0; index < 2 * MAX_BASES; index++)
      entryForm(context(upstream, { 'accept-encoding': 'gzip', host: `junk-${index}.example` }).ctx, entry);
    const normal = { 'accept-encoding': 'gzip', host: 'proxy.internal:8080' };
    const made = entryForm(context(upstream, normal).ctx, entry);
    expect(JSON.parse(gunzipSync(made.body).toString())[0].url).toBe('http://proxy.internal:8080/repos/o/r');
    for (let hit = 0; hit < 3; hit++) expect(entryForm(context(upstream, normal).ctx, entry)).toBe(made);
  });

  it('keep the decoded form of a regular identity client after junk Host names (Link rewritten per base)', () => {
    const { upstream } = setup({ rewrite: false });
    const entry = gzipEntry(json, {
      headers: [
        ['content-type', 'application/json; charset=utf-8'],
        ['content-encoding', 'gzip'],
        ['link', `<${API}/repos/o/r?page=2>; rel="next"`],
      ],
    });
    for (let index = 0; index < 2 * MAX_BASES; index++) entryForm(context(upstream, { host: `junk-${index}.example` }).ctx, entry);
    const made = entryForm(context(upstream, { host: 'proxy.internal:8080' }).ctx, entry);
    expect(made.headers).toContain('<http://proxy.internal:8080/repos/o/r?page=2>; rel="next"');
    expect(entryForm(context(upstream, { host: 'proxy.internal:8080' }).ctx, entry)).toBe(made);
  });

  it('cannot be grown past the per-entry bound by many distinct Host names, each still answered for its own base', () => {
    const { upstream, rewritten } = setup({ rewrite: true });
    const entry = gzipEntry(json);
    let largest = 0;
    for (let index = 0; index < 200; index++) {
      const form = entryForm(context(upstream, { 'accept-encoding': 'gzip', host: `h${index}.example` }).ctx, entry);
      expect(JSON.parse(gunzipSync(form.body).toString())[0].url).toBe(`http://h${index}.example/repos/o/r`);
      largest = Math.max(largest, form.body.length);
    }
    expect(rewritten.bytes).toBeLessThanOrEqual(MAX_BASES * (largest + 512));
  });
});
