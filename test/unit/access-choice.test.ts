/**
 * Which requests get an access line (`log.access`: all, misses, sampled with `log.access_ratio`),
 * and that a hit's line, written from its stored form's template, says what that request was: its
 * own method, path, status and id, whatever request of the form came first. The metrics count
 * every request whatever the access lines say.
 */
import { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startApp, type App } from '../../src/main/app.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';

interface Line {
  reqId: string;
  method: string;
  path: string;
  status: number;
  cache?: string;
  route?: string;
  bytes: number;
}

let fake: FakeUpstream | undefined;
let app: App | undefined;
afterEach(async () => {
  await app?.close();
  await fake?.close();
  app = undefined;
  fake = undefined;
});

/** An app on the fake whose access lines are collected (written as they come: an in-memory destination). */
async function serving(log: Record<string, unknown> = {}): Promise<{ lines: () => Line[] }> {
  fake = await startFakeUpstream({ anonymousLimit: 1e6 });
  let text = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger({ level: 'info', destination: destination as unknown as DestinationStream });
  app = await startApp(
    parseConfig({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'info', ...log },
      upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
    }),
    { logger },
  );
  return {
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.includes('"msg":"request"'))
        .map((line) => JSON.parse(line) as Line),
  };
}

const get = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
  const res = await fetch(`${app!.url}${path}`, { method, headers });
  await res.arrayBuffer();
  return res;
};

const requests = async (): Promise<string> => (await fetch(`${app!.adminUrl}/metrics`).then((res) => res.text())).toString();

describe('log.access', () => {
  it('all (the default): every request, hits too, each line its own method, path, status and id', async () => {
    const { lines } = await serving();
    await get('/repos/octocat/hello-world?b=1&a=2', { 'x-request-id': 'first' });
    await get('/repos/octocat/hello-world?b=1&a=2', { 'x-request-id': 'hit-1' });
    // The same entry (query order does not select), another spelling of its path: its own line.
    await get('/repos/octocat/hello-world?a=2&b=1', { 'x-request-id': 'hit-2' });
    await get('/repos/octocat/hello-world?a=2&b=1', { 'x-request-id': 'hit-head' }, 'HEAD');
    const etag = (await get('/repos/octocat/hello-world?b=1&a=2', { 'x-request-id': 'hit-3' })).headers.get('etag')!;
    await get('/repos/octocat/hello-world?b=1&a=2', { 'x-request-id': 'hit-304', 'if-none-match': etag });
    const byId = new Map(lines().map((line) => [line.reqId, line]));
    expect(byId.get('first')).toMatchObject({ method: 'GET', cache: 'miss', status: 200, route: '/repos/{owner}/{repo}' });
    expect(byId.get('hit-1')).toMatchObject({ method: 'GET', path: '/repos/octocat/hello-world?b=1&a=2', status: 200, cache: 'hit' });
    expect(byId.get('hit-2')).toMatchObject({ method: 'GET', path: '/repos/octocat/hello-world?a=2&b=1', status: 200, cache: 'hit' });
    expect(byId.get('hit-head')).toMatchObject({ method: 'HEAD', path: '/repos/octocat/hello-world?a=2&b=1', status: 200, cache: 'hit' });
    expect(byId.get('hit-3')).toMatchObject({ method: 'GET', status: 200, cache: 'hit', route: '/repos/{owner}/{repo}' });
    expect(byId.get('hit-304')).toMatchObject({ method: 'GET', status: 304, cache: 'hit' });
    expect(byId.get('hit-304')!.bytes).toBeLessThan(byId.get('hit-3')!.bytes);
  });

  it('misses: no line for a fresh hit, one for everything else; the metrics count every request', async () => {
    const { lines } = await serving({ access: 'misses' });
    await get('/repos/octocat/hello-world', { 'x-request-id': 'miss' });
    for (let i = 0; i < 5; i++) await get('/repos/octocat/hello-world', { 'x-request-id': `hit-${i}` });
    await get('/nowhere/at/all', { 'x-request-id': 'not-found' });
    expect(lines().map((line) => line.reqId)).toEqual(['miss', 'not-found']);
    expect(await requests()).toMatch(
      /etagere_cache_outcomes_total\{upstream="github",route="\/repos\/\{owner\}\/\{repo\}",outcome="hit"\} 5/,
    );
  });

  it('sampled: misses, and one fresh hit in 1 / access_ratio', async () => {
    const { lines } = await serving({ access: 'sampled', access_ratio: 0.25 });
    await get('/repos/octocat/hello-world', { 'x-request-id': 'miss' });
    for (let i = 0; i < 8; i++) await get('/repos/octocat/hello-world', { 'x-request-id': `hit-${i}` });
    expect(lines().map((line) => line.reqId)).toEqual(['miss', 'hit-3', 'hit-7']);
  });

  it('hostile: an unknown mode or a ratio outside (0, 1] is a config error naming the key', () => {
    const upstreams = [{ name: 'github', prefix: '/', url: 'http://127.0.0.1:9' }];
    expect(() => parseConfig({ log: { access: 'some' }, upstreams })).toThrow(/log\.access/);
    for (const access_ratio of [0, 1.5, -1, 'half'])
      expect(() => parseConfig({ log: { access: 'sampled', access_ratio }, upstreams })).toThrow(/log\.access_ratio/);
  });
});
