/**
 * Answer heads written as one block per stored form (src/http/header-block.ts): the block is what
 * writeHead would have written, byte for byte, or there is none and writeHead writes it; the
 * start-up self-test turns blocks off when they are not, and a closing connection, HEAD, a form
 * without Date or with a field Node acts on keep writeHead's rules.
 */
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { DestinationStream } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { blockOf, HeadBlocks, writeBlockHead, type WriteHead } from '../../src/http/header-block.js';
import type { Representation } from '../../src/http/reply.js';
import { startApp, type App } from '../../src/main/app.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';

const FIELDS = ['content-type', 'application/json', 'date', 'Tue, 01 Apr 2025 10:00:00 GMT', 'etag', '"a"', 'content-length', '2'];

function form(headers: string[] = FIELDS, status = 200): Representation {
  return { status, headers, body: Buffer.from('{}'), decode: false, etag: '"a"', lastModified: undefined, outgoing: undefined };
}

/** Sends raw request bytes and collects what comes back until the server has been quiet for a moment or closed. */
async function exchange(server: Server, request: string): Promise<{ text: string; closed: boolean }> {
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('end', () => (closed = true));
  socket.write(request);
  for (let waited = 0; waited < 40 && !closed && !/\r\n\r\n[\s\S]*\{\}$|\r\n\r\n$/.test(text); waited++)
    await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 20));
  socket.destroy();
  return { text, closed };
}

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

/** A server answering every request with `form` through HeadBlocks (`heads`) or writeHead. */
async function serving(heads: HeadBlocks | undefined, method: 'GET' | 'HEAD' = 'GET'): Promise<Server> {
  const answered = createServer({ keepAliveTimeout: 5_000 }, (_req, res: ServerResponse) => {
    const fields = { extra: ['x-ratelimit-limit', '5000'], age: 3, cacheStatus: 'etagere; hit; ttl=57', id: 'r-1' };
    if (method === 'GET' && heads?.write(res, form(), fields) === true) return void res.end(form().body);
    res.writeHead(200, [...FIELDS, ...fields.extra, 'age', '3', 'cache-status', fields.cacheStatus, 'x-request-id', fields.id]);
    res.end(method === 'HEAD' ? undefined : form().body);
  });
  answered.keepAliveTimeout = 5_000;
  answered.listen(0, '127.0.0.1');
  await once(answered, 'listening');
  return answered;
}

describe('answer heads as blocks', () => {
  it("pass the self-test on this Node: a block is writeHead's head, byte for byte", async () => {
    expect(await HeadBlocks.start()).toBeDefined();
  });

  it('are the same bytes as writeHead for a hit on a kept-alive connection, and for one that closes', async () => {
    const heads = (await HeadBlocks.start())!;
    for (const request of ['GET / HTTP/1.1\r\nHost: x\r\n\r\n', 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']) {
      server = await serving(heads);
      const byBlock = await exchange(server, request);
      server.close();
      server = await serving(undefined);
      const byWriteHead = await exchange(server, request);
      server.close();
      expect(byBlock.text).toBe(byWriteHead.text);
      expect(byBlock.closed).toBe(byWriteHead.closed);
    }
  });

  it('a connection that closes keeps writeHead: Connection: close, and the connection ends', async () => {
    server = await serving((await HeadBlocks.start())!);
    const { text, closed } = await exchange(server, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(text).toContain('\r\nConnection: close\r\n');
    expect(closed).toBe(true);
  });

  it('hostile: a writer that gets the head wrong fails the self-test, and blocks are off', async () => {
    const wrong: WriteHead = (res, status, block, fields) =>
      writeBlockHead(res, status, block, { ...fields, cacheStatus: 'something else' });
    expect(await HeadBlocks.start(wrong)).toBeUndefined();
    const hanging: WriteHead = () => {
      throw new Error('internals changed');
    };
    expect(await HeadBlocks.start(hanging)).toBeUndefined();
  });

  it('no block for a form without Date, with a field Node acts on, a 304 or 204, or a value writeHead refuses', () => {
    expect(blockOf(200, FIELDS)).not.toBeNull();
    expect(blockOf(200, FIELDS.slice(0, 2).concat(FIELDS.slice(4)))).toBeNull(); // no date
    for (const name of ['connection', 'transfer-encoding', 'trailer', 'keep-alive', 'content-disposition', 'expect'])
      expect(blockOf(200, [name, 'x', ...FIELDS]), name).toBeNull();
    expect(blockOf(304, FIELDS)).toBeNull();
    expect(blockOf(204, FIELDS)).toBeNull();
    expect(blockOf(200, ['x-bad', 'a\r\nset-cookie: b', ...FIELDS])).toBeNull();
    expect(blockOf(200, ['bad name', 'a', ...FIELDS])).toBeNull();
  });
});

describe('an app whose head blocks fail the self-test', () => {
  let fake: FakeUpstream | undefined;
  let app: App | undefined;
  afterEach(async () => {
    await app?.close();
    await fake?.close();
  });

  it('answers hits through writeHead, whole and with their fields, and says so at start-up', async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1e6 });
    const lines: string[] = [];
    const destination = { write: (line: string) => void lines.push(line) } as unknown as DestinationStream;
    const logger = createLogger({ level: 'warn', destination });
    const noCacheStatus: WriteHead = (res, status, block, fields) => writeBlockHead(res, status, block, { ...fields, cacheStatus: '' });
    app = await startApp(
      parseConfig({
        listen: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
      }),
      { logger, headBlocks: noCacheStatus },
    );
    expect(lines.join('')).toContain('self-test of head blocks failed');
    await fetch(`${app.url}/repos/octocat/hello-world`).then((res) => res.arrayBuffer());
    const hit = await fetch(`${app.url}/repos/octocat/hello-world`);
    expect(hit.headers.get('cache-status')).toMatch(/^etagere; hit; ttl=\d+$/);
    expect(JSON.parse(await hit.text())).toMatchObject({ id: 1296269 });
  });
});
