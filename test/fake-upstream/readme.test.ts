/**
 * GET /repos/:owner/:repo/readme in the fake (REST "Get a repository README"): the content object
 * by default, and the file's own bytes with GitHub's raw media type, under the Content-Type that
 * was asked for (as GitHub answers: `application/vnd.github.raw; charset=utf-8`, the `.v3.` and
 * `+json` spellings echoed too) with `X-GitHub-Media-Type: github.v3; param=raw[; format=json]`.
 */
import { createHash } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { ALICE_REPO, auth, get, post, useFake, type JsonObject } from './helpers.js';

const RAW = 'application/vnd.github.raw';
const HELLO_ID = 1296269;
/** hello-world's README, on the base it was asked on. */
const helloText = (base: string, name = 'hello-world'): string =>
  `# ${name}\n\nMy first repository on GitHub!\n\n## API\n\n    curl "${base}/repos/octocat/${name}"\n`;

interface ContentObject extends JsonObject {
  name: string;
  path: string;
  sha: string;
  size: number;
  type: string;
  encoding: string;
  content: string;
  url: string;
  git_url: string;
  html_url: string;
  download_url: string;
  _links: { self: string; git: string; html: string };
}

describe('fake upstream: the README endpoint and the raw media type', () => {
  const fake = useFake({ anonymousLimit: 1000, tokenLimit: 1000 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('answers the content object by default: base64 in lines of 60, the git blob sha, API addresses on the base', async () => {
    const got = await get(`${fake.url}/repos/octocat/hello-world/readme`);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(got.headers.get('x-github-media-type')).toBe('github.v3; format=json');
    expect(got.headers.get('etag')).toMatch(/^W\/"/);
    const readme = got.json<ContentObject>();
    const text = Buffer.from(readme.content, 'base64').toString('utf8');
    expect(text).toBe(helloText(fake.url));
    expect(readme.content.split('\n').every((line) => line.length <= 60)).toBe(true);
    expect(readme.content.endsWith('\n')).toBe(true);
    const sha = createHash('sha1')
      .update(`blob ${Buffer.byteLength(text)}\0${text}`)
      .digest('hex');
    const self = `${fake.url}/repos/octocat/hello-world/contents/README.md?ref=main`;
    expect(readme).toMatchObject({
      name: 'README.md',
      path: 'README.md',
      type: 'file',
      encoding: 'base64',
      sha,
      size: Buffer.byteLength(text),
    });
    expect(readme.url).toBe(self);
    expect(readme.git_url).toBe(`${fake.url}/repos/octocat/hello-world/git/blobs/${sha}`);
    expect(readme._links).toEqual({ self, git: readme.git_url, html: readme.html_url });
    // Web addresses are GitHub's web, beside the API (as for every record of the fake).
    expect(readme.html_url).toBe('https://github.com/octocat/hello-world/blob/main/README.md');
    expect(readme.download_url).toBe('https://raw.githubusercontent.com/octocat/hello-world/main/README.md');
  });

  it('answers the raw file under the media type asked for, in each spelling', async () => {
    const text = helloText(fake.url);
    for (const [accept, mediaHeader] of [
      [RAW, 'github.v3; param=raw'],
      ['application/vnd.github.v3.raw', 'github.v3; param=raw'],
      [`${RAW}+json`, 'github.v3; param=raw; format=json'],
      ['application/vnd.github.v3.raw+json', 'github.v3; param=raw; format=json'],
    ] as const) {
      const got = await get(`${fake.url}/repos/octocat/hello-world/readme`, { accept });
      expect(got.status, accept).toBe(200);
      expect(got.text, accept).toBe(text);
      expect(got.headers.get('content-type'), accept).toBe(`${accept}; charset=utf-8`);
      expect(got.headers.get('x-github-media-type'), accept).toBe(mediaHeader);
      expect(got.headers.get('content-length'), accept).toBe(String(Buffer.byteLength(text)));
    }
    // In a list, the first type the fake serves wins; a parameter does not hide it.
    const listed = await get(`${fake.url}/repos/octocat/hello-world/readme`, { accept: `text/html, ${RAW}; q=0.9, */*` });
    expect(listed.text).toBe(text);
    // The same representation for every path of the record's owner, by id too.
    expect((await get(`${fake.url}/repositories/${HELLO_ID}/readme`, { accept: RAW })).text).toBe(text);
  });

  it('each representation has its own ETag and answers its own conditional requests; HEAD is GET without the body', async () => {
    const url = `${fake.url}/repos/octocat/hello-world/readme`;
    const raw = await get(url, { accept: RAW });
    const object = await get(url);
    const rawTag = raw.headers.get('etag')!;
    expect(rawTag).not.toBe(object.headers.get('etag'));
    expect((await get(url, { accept: RAW, 'if-none-match': rawTag })).status).toBe(304);
    expect((await get(url, { 'if-none-match': rawTag })).status).toBe(200);
    expect((await get(url, { accept: RAW, 'if-modified-since': raw.headers.get('last-modified')! })).status).toBe(304);
    const head = await get(url, { accept: RAW }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers.get('content-length')).toBe(raw.headers.get('content-length'));
    expect(head.headers.get('content-type')).toBe(`${RAW}; charset=utf-8`);
  });

  it('follows the repository: private to whoever may not see it, renamed with it, a version marker under 2026-03-10', async () => {
    expect((await get(`${fake.url}/repos/alice/secret-project/readme`, { accept: RAW })).status).toBe(404);
    const own = await get(`${fake.url}/repos/alice/secret-project/readme`, { accept: RAW, ...auth(ALICE_REPO) });
    expect(own.status).toBe(200);
    expect(own.text.startsWith('# secret-project\n')).toBe(true);

    expect((await post(`${fake.url}/__fake/rename`, { path: '/repos/octocat/hello-world', name: 'hello-universe' })).status).toBe(200);
    const moved = await fetch(`${fake.url}/repos/octocat/hello-world/readme`, { headers: { accept: RAW }, redirect: 'manual' });
    expect(moved.status).toBe(301);
    expect(moved.headers.get('location')).toBe(`${fake.url}/repositories/${HELLO_ID}/readme`);
    const followed = await fetch(`${fake.url}/repos/octocat/hello-world/readme`, { headers: { accept: RAW } });
    expect(await followed.text()).toBe(helloText(fake.url, 'hello-universe'));

    const versioned = await get(`${fake.url}/repos/octocat/spoon-knife/readme`, { 'x-github-api-version': '2026-03-10' });
    expect(versioned.json<JsonObject>().fake_api_version).toBe('2026-03-10');
  });

  it('hostile: unknown repositories, extra segments, ids and media types the fake does not serve', async () => {
    for (const path of [
      '/repos/octocat/no-such-repo/readme',
      '/repos/no-such-owner/hello-world/readme',
      '/repos/octocat/hello-world/readme/extra',
      '/repos/octocat/hello-world/readme/',
      '/repos/octocat/%E0%A4%A/readme',
      '/repositories/999999999/readme',
      '/repositories/0/readme',
      '/repositories/12ab/readme',
    ]) {
      const got = await get(`${fake.url}${path}`, { accept: RAW });
      expect(got.status, path).toBe(404);
      expect(got.headers.get('content-type'), path).toBe('application/json; charset=utf-8');
      expect(got.json<JsonObject>().message, path).toBe('Not Found');
    }
    // Not a served media type (html, a made-up parameter, raw on another vendor): the content object.
    for (const accept of [
      'application/vnd.github.html',
      'application/vnd.github.rawx',
      'application/vnd.other.raw',
      'application/vnd.github.raw.extra',
    ]) {
      const got = await get(`${fake.url}/repos/octocat/hello-world/readme`, { accept });
      expect(got.headers.get('content-type'), accept).toBe('application/json; charset=utf-8');
      expect(got.json<ContentObject>().type, accept).toBe('file');
    }
    // Raw elsewhere changes nothing: the record in JSON.
    const user = await get(`${fake.url}/users/octocat`, { accept: RAW });
    expect(user.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(user.json<JsonObject>().login).toBe('octocat');
  });
});
