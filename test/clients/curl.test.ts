/**
 * curl through a zero-config proxy: HEAD answers with GET's headers,
 * Content-Length included, and no body; GitHub's raw media type on the README endpoint gets the
 * file's own bytes under the Content-Type asked for (each representation cached apart, Vary:
 * Accept); conditional requests with the ETag or Last-Modified curl was given get a 304 from the
 * cache, without reaching the fake. The fake's counters show that every request it saw carried a
 * pool token. `-q` keeps a ~/.curlrc out of it. Skipped, saying why, where curl is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientEnv, expectAllThroughProxy, probe, runClient, startZeroConfig, type ZeroConfig } from '../helpers/clients.js';

const CURL = ['/usr/bin/curl', 'curl'].find((candidate) => probe(candidate, ['--version']));
if (CURL === undefined) process.stderr.write('curl client test skipped: curl is not installed (apt-get install curl)\n');

/** One answer as curl printed it (-i or -I): status, headers by lower-case name, body. */
interface Printed {
  status: number;
  headers: Map<string, string>;
  body: string;
}

const RAW = 'application/vnd.github.raw';
const README = '/repos/octocat/hello-world/readme';
/** Headers that describe the representation: a HEAD and a GET of it carry the same. */
const REPRESENTATION = ['content-type', 'content-length', 'etag', 'last-modified', 'cache-control', 'vary', 'x-github-media-type'];

function parseHead(block: string): Omit<Printed, 'body'> {
  const [statusLine = '', ...lines] = block.split('\r\n');
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(statusLine.split(' ')[1]), headers };
}

/** `curl -i` of one URL: the answer, its body as printed. */
async function curlGet(url: string, headers: readonly string[] = []): Promise<Printed> {
  const ran = await runClient(CURL!, ['-q', '-sS', '--max-time', '10', '-i', ...headers.flatMap((h) => ['-H', h]), url], clientEnv());
  expect(ran.code, `curl failed: ${ran.stderr}`).toBe(0);
  const end = ran.stdout.indexOf('\r\n\r\n');
  expect(end, 'curl printed no header block').toBeGreaterThan(0);
  return { ...parseHead(ran.stdout.slice(0, end)), body: ran.stdout.slice(end + 4) };
}

/**
 * `curl -I` of the URLs, on one connection: a body the server sent after a HEAD's headers would
 * be read as the next answer's status line, and curl would fail.
 */
async function curlHead(urls: readonly string[], headers: readonly string[] = []): Promise<Array<Omit<Printed, 'body'>>> {
  const ran = await runClient(CURL!, ['-q', '-sS', '--max-time', '10', '-I', ...headers.flatMap((h) => ['-H', h]), ...urls], clientEnv());
  expect(ran.code, `curl failed: ${ran.stderr}`).toBe(0);
  return ran.stdout
    .split('\r\n\r\n')
    .filter((block) => block.trim() !== '')
    .map(parseHead);
}

describe.skipIf(CURL === undefined)('curl through a zero-config proxy', () => {
  let bench: ZeroConfig;
  let readmeText: string;
  const count = (path: string): number => bench.fake.stats().byPath[path] ?? 0;

  beforeAll(async () => {
    bench = await startZeroConfig('curl');
    readmeText = await (await fetch(`${bench.fake.url}${README}`, { headers: { accept: RAW } })).text();
    bench.fake.reset(); // the counters start from here
  });
  afterAll(async () => {
    await bench?.close();
  });

  it('HEAD: the headers of GET, Content-Length included, and no body; the GET after it is a hit', async () => {
    const url = `${bench.proxy.url}/repos/octocat/hello-world`;
    const heads = await curlHead([url, url]);
    expect(heads.map((head) => head.status)).toEqual([200, 200]);
    const got = await curlGet(url);
    expect(got.status).toBe(200);
    expect(Number(got.headers.get('content-length'))).toBe(Buffer.byteLength(got.body));
    expect((JSON.parse(got.body) as { full_name: string }).full_name).toBe('octocat/hello-world');
    for (const head of heads) for (const name of REPRESENTATION) expect(head.headers.get(name), `HEAD ${name}`).toBe(got.headers.get(name));
    expect(got.headers.get('cache-status')).toMatch(/; hit/);
    expect(count('/repos/octocat/hello-world'), 'the first HEAD filled the cache').toBe(1);
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('the raw media type: the README’s own bytes under the type asked for, each representation cached apart', async () => {
    bench.fake.reset();
    const url = `${bench.proxy.url}${README}`;
    const raw = await curlGet(url, [`Accept: ${RAW}`]);
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toBe(`${RAW}; charset=utf-8`);
    expect(raw.headers.get('x-github-media-type')).toBe('github.v3; param=raw');
    expect(raw.body).toBe(readmeText);
    expect(readmeText).toMatch(/^# hello-world\n/);
    expect((await curlGet(url, [`Accept: ${RAW}`])).headers.get('cache-status')).toMatch(/; hit/);

    // The +json spelling: GitHub labels the raw bytes application/vnd.github.raw+json; not JSON, not a failure.
    const rawJson = await curlGet(url, [`Accept: ${RAW}+json`]);
    expect(rawJson.status).toBe(200);
    expect(rawJson.headers.get('content-type')).toBe(`${RAW}+json; charset=utf-8`);
    expect(rawJson.body).toBe(readmeText);

    // curl's own Accept (*/*): the content object, whose base64 content is the same file.
    const object = await curlGet(url);
    expect(object.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const content = JSON.parse(object.body) as { type: string; encoding: string; content: string };
    expect(content).toMatchObject({ type: 'file', encoding: 'base64' });
    expect(Buffer.from(content.content, 'base64').toString('utf8')).toBe(readmeText);
    expect(object.headers.get('etag')).not.toBe(raw.headers.get('etag'));

    // HEAD of the raw representation: its length, no body.
    const [head] = await curlHead([url], [`Accept: ${RAW}`]);
    expect(head!.headers.get('content-type')).toBe(`${RAW}; charset=utf-8`);
    expect(Number(head!.headers.get('content-length'))).toBe(Buffer.byteLength(readmeText));
    expect(count(README), 'one upstream request per representation').toBe(3);
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('If-None-Match and If-Modified-Since with what curl was given: 304 from the cache, the fake not asked', async () => {
    bench.fake.reset();
    const url = `${bench.proxy.url}/users/octocat`;
    const got = await curlGet(url);
    expect(got.status).toBe(200);
    const etag = got.headers.get('etag')!;
    const lastModified = got.headers.get('last-modified')!;
    expect(etag).toMatch(/^(W\/)?"/);
    expect(count('/users/octocat')).toBe(1);

    const byEtag = await curlGet(url, [`If-None-Match: ${etag}`]);
    expect(byEtag.status).toBe(304);
    expect(byEtag.body).toBe('');
    expect(byEtag.headers.get('etag')).toBe(etag);
    expect(byEtag.headers.get('cache-status')).toMatch(/; hit/);
    const byDate = await curlGet(url, [`If-Modified-Since: ${lastModified}`]);
    expect(byDate.status).toBe(304);
    expect(byDate.body).toBe('');

    // The raw README's own ETag revalidates the raw representation only.
    const raw = await curlGet(`${bench.proxy.url}${README}`, [`Accept: ${RAW}`]);
    const rawTag = raw.headers.get('etag')!;
    expect((await curlGet(`${bench.proxy.url}${README}`, [`Accept: ${RAW}`, `If-None-Match: ${rawTag}`])).status).toBe(304);
    const other = await curlGet(`${bench.proxy.url}${README}`, [`If-None-Match: ${rawTag}`]);
    expect(other.status, 'the raw ETag does not match the JSON representation').toBe(200);
    expect(other.headers.get('content-type')).toBe('application/json; charset=utf-8');

    expect(count('/users/octocat'), 'the 304s came from the cache').toBe(1);
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('hostile: validators that do not match, a garbled date, and READMEs that are not there', async () => {
    bench.fake.reset();
    const url = `${bench.proxy.url}/orgs/etagere-org`;
    const got = await curlGet(url);
    for (const header of [
      'If-None-Match: "not-the-etag"',
      'If-None-Match: W/"',
      'If-Modified-Since: yesterday',
      'If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT',
    ]) {
      const answer = await curlGet(url, [header]);
      expect(answer.status, header).toBe(200);
      expect(answer.body, header).toBe(got.body);
    }
    expect(count('/orgs/etagere-org'), 'full answers from the cache too').toBe(1);

    // A private repository the pool may not see, and an unknown one: GitHub's 404, also as HEAD.
    for (const path of [
      '/repos/octocat/private-notes/readme',
      '/repos/octocat/no-such-repo/readme',
      '/repos/octocat/hello-world/readme/extra',
    ]) {
      const missing = await curlGet(`${bench.proxy.url}${path}`, [`Accept: ${RAW}`]);
      expect(missing.status, path).toBe(404);
      expect(missing.headers.get('content-type'), path).toMatch(/^application\/json/);
      expect(JSON.parse(missing.body), path).toMatchObject({ message: 'Not Found', documentation_url: expect.any(String) });
      const [head] = await curlHead([`${bench.proxy.url}${path}`]);
      expect(head!.status, path).toBe(404);
    }
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });
});
