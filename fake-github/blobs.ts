/**
 * GET /repos/:owner/:repo/git/blobs/:file_sha (REST "Get a blob"), GitHub-shaped: `sha`, `node_id`,
 * `size`, `url`, `content` (base64 in lines of 60 characters, each ending with `\n`) and
 * `encoding: "base64"`. The blobs are each repository's README (the `git_url` of its content
 * object) and the blobs of zero bytes added with `POST /__fake/blobs`: a large binary file, whose
 * answer is about a thousand times smaller gzipped than decoded (GitHub serves blobs up to 100 MB).
 * Rendered once per blob, base URL and API version, and kept until reset.
 */
import { createHash } from 'node:crypto';
import type { Repo } from './data.js';
import { bodyHash, type Rendered } from './etag.js';
import { blobSha, readmeText } from './readme.js';
import { DEFAULT_API_VERSION, type ApiVersion } from './render.js';

/** GitHub's limit for the blob API. */
export const MAX_BLOB_BYTES = 100 * 1024 * 1024;
const ZEROS = Buffer.alloc(1024 * 1024);

/** Git's blob id of `size` zero bytes (sha1 over `blob <size>\0<content>`). */
function zeroBlobSha(size: number): string {
  const hash = createHash('sha1').update(`blob ${size}\0`);
  for (let left = size; left > 0; left -= ZEROS.length) hash.update(left >= ZEROS.length ? ZEROS : ZEROS.subarray(0, left));
  return hash.digest('hex');
}

/** `content` as base64 in lines of 60 characters, each ending with a newline, as it stands inside a JSON string (`\n` escaped). */
function wrappedBase64Json(content: Buffer): Buffer {
  const flat = Buffer.from(content.toString('base64'));
  const lines = Math.ceil(flat.length / 60);
  const out = Buffer.allocUnsafe(flat.length + 2 * lines);
  let at = 0;
  for (let start = 0; start < flat.length; start += 60) {
    at += flat.copy(out, at, start, Math.min(flat.length, start + 60));
    at += out.write('\\n', at);
  }
  return out;
}

/** The blobs added at run time (by repository id and sha, their size) and the rendered answers. */
export class Blobs {
  private readonly sizes = new Map<string, number>();
  private readonly rendered = new Map<string, Rendered>();

  /** Adds a blob of `size` zero bytes to `repo`; its sha. */
  addZeros(repo: Repo, size: number): string {
    const sha = zeroBlobSha(size);
    this.sizes.set(`${repo.id}|${sha}`, size);
    return sha;
  }

  /** The answer for `sha` in `repo` (its README or an added blob), or undefined (404). */
  answer(repo: Repo, sha: string, base: string, version: ApiVersion): Rendered | undefined {
    const key = `${repo.id}|${sha}|${version}|${base}`;
    const known = this.rendered.get(key);
    if (known !== undefined) return known;
    const readme = Buffer.from(readmeText(repo, base));
    const size = this.sizes.get(`${repo.id}|${sha}`);
    const content = blobSha(readme) === sha ? readme : size === undefined ? undefined : Buffer.alloc(size);
    if (content === undefined) return undefined;
    const url = `${base}/repos/${repo.owner.login}/${repo.name}/git/blobs/${sha}`;
    const nodeId = Buffer.from(`04:Blob${repo.id}:${sha}`).toString('base64');
    const marker = version === DEFAULT_API_VERSION ? '' : `,"fake_api_version":${JSON.stringify(version)}`;
    const head = `{"sha":"${sha}","node_id":"${nodeId}","size":${content.length},"url":${JSON.stringify(url)},"content":"`;
    const body = Buffer.concat([Buffer.from(head), wrappedBase64Json(content), Buffer.from(`","encoding":"base64"${marker}}`)]);
    const rendered: Rendered = { body, hash: bodyHash(body), lastModified: repo.updatedAt, link: null };
    this.rendered.set(key, rendered);
    return rendered;
  }

  clear(): void {
    this.sizes.clear();
    this.rendered.clear();
  }
}

/** The blob's path parts (`/repos/:owner/:repo/git/blobs/:sha`) name a sha: 40 hex digits. */
export const isBlobSha = (text: string | undefined): text is string => text !== undefined && /^[0-9a-f]{40}$/.test(text);
