/**
 * GET /repos/:owner/:repo/git/blobs/:file_sha in the fake (REST "Get a blob"): a repository's README
 * blob (the `git_url` of its content object), and blobs of zero bytes added with POST /__fake/blobs.
 */
import { createHash } from 'node:crypto';
import { get as httpGet } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { beforeEach, describe, expect, it } from 'vitest';
import { ALICE_REPO, auth, get, post, useFake, type JsonObject } from './helpers.js';

interface BlobBody extends JsonObject {
  sha: string;
  node_id: string;
  size: number;
  url: string;
  content: string;
  encoding: string;
}

/** A GET that takes gzip, its body as it came on the wire (fetch would decode it). */
function gzipGet(url: string): Promise<{ encoding: string | undefined; body: Buffer }> {
  return new Promise((resolve, reject) => {
    httpGet(url, { headers: { 'accept-encoding': 'gzip' }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

const gitSha = (content: Buffer): string => createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');

describe('fake upstream: git blobs', () => {
  const fake = useFake({ anonymousLimit: 1000, tokenLimit: 1000 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it("answers a README's git_url with the blob: base64 in lines of 60, its git sha and size", async () => {
    const readme = (await get(`${fake.url}/repos/octocat/hello-world/readme`)).json<{ git_url: string; sha: string; size: number }>();
    expect(readme.git_url).toBe(`${fake.url}/repos/octocat/hello-world/git/blobs/${readme.sha}`);
    const got = await get(readme.git_url);
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toMatch(/^W\//);
    const blob = got.json<BlobBody>();
    expect(Object.keys(blob)).toEqual(['sha', 'node_id', 'size', 'url', 'content', 'encoding']);
    expect(blob).toMatchObject({ sha: readme.sha, size: readme.size, url: readme.git_url, encoding: 'base64' });
    for (const line of blob.content.split('\n').slice(0, -1)) expect(line.length).toBeLessThanOrEqual(60);
    expect(blob.content.endsWith('\n')).toBe(true);
    const content = Buffer.from(blob.content.replace(/\n/g, ''), 'base64');
    expect(gitSha(content)).toBe(blob.sha);
  });

  it('serves an added blob of zeros, about a thousand times smaller gzipped', async () => {
    const added = await post(`${fake.url}/__fake/blobs`, { path: '/repos/octocat/hello-world', size: 3_000_000 });
    expect(added.status).toBe(200);
    const { sha, url, size } = added.json<{ sha: string; url: string; size: number }>();
    expect(sha).toBe(gitSha(Buffer.alloc(3_000_000)));
    expect(size).toBe(3_000_000);
    const identity = await get(`${fake.url}${url}`, { 'accept-encoding': 'identity' });
    const blob = identity.json<BlobBody>();
    expect(blob.size).toBe(3_000_000);
    expect(Buffer.from(blob.content.replace(/\n/g, ''), 'base64').equals(Buffer.alloc(3_000_000))).toBe(true);
    const gzip = await gzipGet(`${fake.url}${url}`);
    const wire = gzip.body;
    expect(gzip.encoding).toBe('gzip');
    expect(gunzipSync(wire).toString()).toBe(identity.text);
    expect(wire.length * 100).toBeLessThan(identity.text.length);
  });

  it('answers 404 for an unknown sha, a malformed one, or a private repository the caller may not see; reset forgets added blobs', async () => {
    const { url } = (await post(`${fake.url}/__fake/blobs`, { path: '/repos/alice/secret-project', size: 10 })).json<{ url: string }>();
    expect((await get(`${fake.url}${url}`)).status).toBe(404);
    expect((await get(`${fake.url}${url}`, auth(ALICE_REPO))).status).toBe(200);
    expect((await get(`${fake.url}/repos/octocat/hello-world/git/blobs/${'0'.repeat(40)}`)).status).toBe(404);
    expect((await get(`${fake.url}/repos/octocat/hello-world/git/blobs/not-a-sha`)).status).toBe(404);
    await post(`${fake.url}/__fake/reset`, {});
    expect((await get(`${fake.url}${url}`, auth(ALICE_REPO))).status).toBe(404);
  });

  it('refuses a bad blob request with 400, and an unknown repository with 404', async () => {
    expect((await post(`${fake.url}/__fake/blobs`, { path: '/repos/octocat/hello-world', size: -1 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/blobs`, { path: '/repos/octocat/hello-world', size: 101 * 1024 * 1024 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/blobs`, { path: '/repos/octocat/hello-world', size: 1.5 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/blobs`, { path: '/repos/octocat/hello-world', size: 1, extra: 1 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/blobs`, { path: '/repos/nobody/nothing', size: 1 })).status).toBe(404);
  });
});
