/**
 * GET /repos/:owner/:repo/readme (REST "Get a repository README"), GitHub-shaped. Every repository
 * of the seed has a `README.md` on `main`: a title, its description, and an example that quotes the
 * repository's API address (as READMEs do; a raw file is content, whose text a proxy must leave
 * alone even where it looks like a JSON string holding an API URL). By default the answer is
 * the content object (`type: "file"`, base64 `content` wrapped at 60 columns as GitHub does, the
 * git blob `sha`, `url`, `git_url`, `html_url`, `download_url`, `_links`: API addresses on the
 * request's base, web ones on GitHub's web as render.ts gives them); with the raw media type
 * (`Accept: application/vnd.github.raw`, `.v3.raw`, `.raw+json`) it is the file's own bytes under
 * the Content-Type asked for (media-type.ts). Both are cached per repository version, base URL,
 * API version and representation; a repository's README changes with the repository (rename).
 */
import { createHash } from 'node:crypto';
import type { Repo } from './data.js';
import { bodyHash, type Rendered } from './etag.js';
import { JSON_TYPE } from './headers.js';
import { JSON_MEDIA, type MediaChoice } from './media-type.js';
import { DEFAULT_API_VERSION, webBaseOf, type ApiVersion } from './render.js';

export const README_NAME = 'README.md';

/** A README answer: the rendered body and the headers that name its representation. */
export interface ReadmeAnswer {
  readonly rendered: Rendered;
  readonly contentType: string;
  readonly mediaHeader: string;
}

/** The README's text: on the base URL the request arrived at, like every address of the fake. */
export function readmeText(repo: Repo, base: string): string {
  const full = `${repo.owner.login}/${repo.name}`;
  return `# ${repo.name}\n\n${repo.description}\n\n## API\n\n    curl "${base}/repos/${full}"\n`;
}

/** Git's blob id of `content` (sha1 over `blob <size>\0<content>`). */
export function blobSha(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

/** Base64 as GitHub writes it in `content`: lines of 60 characters, each ending with a newline. */
function wrappedBase64(content: Buffer): string {
  const flat = content.toString('base64');
  let out = '';
  for (let start = 0; start < flat.length; start += 60) out += `${flat.slice(start, start + 60)}\n`;
  return out;
}

/** The content object of the README. */
export function readmeObject(repo: Repo, base: string, version: ApiVersion): Record<string, unknown> {
  const content = Buffer.from(readmeText(repo, base));
  const sha = blobSha(content);
  const full = `${repo.owner.login}/${repo.name}`;
  const self = `${base}/repos/${full}/contents/${README_NAME}?ref=main`;
  const git = `${base}/repos/${full}/git/blobs/${sha}`;
  const web = webBaseOf(base);
  const html = `${web.web}/${full}/blob/main/${README_NAME}`;
  const record: Record<string, unknown> = {
    name: README_NAME,
    path: README_NAME,
    sha,
    size: content.length,
    url: self,
    html_url: html,
    git_url: git,
    download_url: `${web.raw}/${full}/main/${README_NAME}`,
    type: 'file',
    content: wrappedBase64(content),
    encoding: 'base64',
    _links: { self, git, html },
  };
  if (version !== DEFAULT_API_VERSION) record.fake_api_version = version;
  return record;
}

/** The README of `repo` in the representation asked for (null: the content object), cached on the repository. */
export function readmeAnswer(repo: Repo, media: MediaChoice | null, base: string, version: ApiVersion): ReadmeAnswer {
  const contentType = media?.contentType ?? JSON_TYPE;
  const mediaHeader = media?.mediaHeader ?? JSON_MEDIA;
  const key = `readme|${media === null ? 'object' : 'raw'}|${version}|${base}`;
  let rendered = repo.cache.get(key) as Rendered | undefined;
  if (rendered === undefined) {
    const body = Buffer.from(media === null ? JSON.stringify(readmeObject(repo, base, version)) : readmeText(repo, base));
    rendered = { body, hash: bodyHash(body), lastModified: repo.updatedAt, link: null };
    repo.cache.set(key, rendered);
  }
  return { rendered, contentType, mediaHeader };
}
