/**
 * A hit written whole in its turn is logged and counted at once, without a
 * 'close' listener, and is neither in flight nor owed on its connection. What a user of the access
 * log and the metrics sees must not change: the bytes that went on the wire (GET, gzip, identity,
 * HEAD, 304), one line and one count per request, a hit its client is slow to take logged only
 * once it is over, and hits queued behind a pipelined response counting only their own bytes.
 */
import { connect, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const JSON_BODY = JSON.stringify({ name: 'hello-world', description: 'x'.repeat(2000) });
const BIG_BYTES = 24 * 1024 * 1024; // more than a loopback write takes at once: a paused client leaves it in Node's buffers
const FRESH = { 'cache-control': 'public, max-age=600', etag: 'W/"v1"', 'last-modified': 'Thu, 20 Jun 2024 10:00:00 GMT' };

interface Received {
  status: number;
  head: string;
  /** Bytes of the whole response (head and body) as they came off the socket. */
  bytes: number;
}

/**
 * Sends `text` on one connection and reads `count` responses framed by Content-Length (`bodiless`
 * tells which carry none: HEAD, 304). Resolves with them, leaving the connection open.
 */
function exchange(url: string, text: string, bodiless: boolean[]): Promise<{ responses: Received[]; socket: Socket }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let buffer: Buffer = Buffer.alloc(0); // bytes not yet accounted for
    let current: { head: string; remaining: number; bytes: number } | undefined; // a response whose body is being read
    const responses: Received[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`only ${responses.length} of ${bodiless.length} responses within 10 s`));
    }, 10_000);
    socket.on('data', (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        if (current === undefined) {
          const end = buffer.indexOf('\r\n\r\n');
          if (end === -1) return;
          const head = buffer.subarray(0, end).toString('latin1');
          const length = bodiless[responses.length] === true ? 0 : Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
          current = { head, remaining: length, bytes: end + 4 + length };
          buffer = buffer.subarray(end + 4);
        }
        const taken = Math.min(current.remaining, buffer.length);
        current.remaining -= taken;
        buffer = buffer.subarray(taken); // bodies are counted, not kept
        if (current.remaining > 0) return;
        responses.push({ status: Number(current.head.slice(9, 12)), head: current.head, bytes: current.bytes });
        current = undefined;
        if (responses.length === bodiless.length) {
          clearTimeout(timer);
          resolve({ responses, socket });
          return;
        }
      }
    });
    socket.on('error', reject);
  });
}

const get = (path: string, id: string, extra = ''): string =>
  `GET ${path} HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: ${id}\r\n${extra}\r\n`;

describe('hits recorded in their own turn', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  let releaseSlow: (() => void) | undefined;

  beforeAll(async () => {
    const big = Buffer.alloc(BIG_BYTES, 'a');
    upstream = await startScriptedUpstream((req, res) => {
      if (req.url === '/big') {
        res.writeHead(200, { ...FRESH, 'content-type': 'application/octet-stream', 'content-length': big.length });
        res.end(big);
      } else if (req.url === '/gz') {
        const body = gzipSync(JSON_BODY);
        res.writeHead(200, { ...FRESH, 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
        res.end(body);
      } else if (req.url?.startsWith('/slow') === true) {
        releaseSlow = () => {
          res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
          res.end('{"slow":true}');
        };
      } else {
        res.writeHead(200, { ...FRESH, 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON_BODY);
      }
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'scripted', prefix: '/', url: upstream.url }],
      cache: { max_entry_bytes: 2 * BIG_BYTES },
    });
    // Warm the entries: every later request of these paths is a hit.
    await exchange(proxy.url, get('/small', 'warm-1') + get('/gz', 'warm-2', 'Accept-Encoding: gzip\r\n'), [false, false]).then(
      ({ socket }) => socket.destroy(),
    );
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  const line = (id: string): Record<string, unknown> | undefined => proxy.logs().find((l) => l.msg === 'request' && l.reqId === id);

  it('logs the bytes that went on the wire for GET, gzip, identity, HEAD and 304 hits, each with its own request id', async () => {
    const requests = [
      { text: get('/small', 'wire-get'), bodiless: false },
      { text: get('/gz', 'wire-gzip', 'Accept-Encoding: gzip\r\n'), bodiless: false },
      { text: get('/gz', 'wire-identity'), bodiless: false }, // decoded for a client that does not take gzip
      { text: `HEAD /small HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: wire-head\r\n\r\n`, bodiless: true },
      { text: get('/small', 'wire-304', 'If-None-Match: W/"v1"\r\n'), bodiless: true },
    ];
    const { responses, socket } = await exchange(
      proxy.url,
      requests.map((r) => r.text).join(''),
      requests.map((r) => r.bodiless),
    );
    socket.destroy();
    const ids = ['wire-get', 'wire-gzip', 'wire-identity', 'wire-head', 'wire-304'];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 304]);
    for (const [index, id] of ids.entries()) {
      const response = responses[index]!;
      expect(response.head).toContain(`\r\nx-request-id: ${id}\r\n`);
      expect(response.head).toMatch(/\r\ncache-status: etagere; hit; ttl=\d+\r\n/);
      expect(line(id)).toMatchObject({ status: response.status, cache: 'hit', bytes: response.bytes });
      expect(line(id)).not.toHaveProperty('aborted');
    }
    expect(responses[1]!.head).toContain('content-encoding: gzip');
    expect(responses[2]!.head).not.toContain('content-encoding');
    expect(responses[2]!.bytes).toBeGreaterThan(responses[1]!.bytes);
    expect(proxy.inFlight()).toBe(0);
  });

  it('counts every hit once in the metrics and logs it once', async () => {
    const scrape = async (): Promise<number> => {
      const text = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
      const found = /^etagere_cache_outcomes_total\{upstream="scripted",route="[^"]*",outcome="hit"\} (\d+)$/m.exec(text);
      return Number(found?.[1] ?? 0);
    };
    const before = await scrape();
    const ids = Array.from({ length: 20 }, (_, index) => `count-${index}`);
    const { socket } = await exchange(
      proxy.url,
      ids.map((id) => get('/small', id)).join(''),
      ids.map(() => false),
    );
    socket.destroy();
    expect((await scrape()) - before).toBe(20);
    for (const id of ids) expect(proxy.logs().filter((l) => l.reqId === id)).toHaveLength(1);
  });

  it('keeps a large hit that its client is slow to read in flight, and logs it once, when it is over', async () => {
    // Warm /big first (a miss streams it whole to this reader).
    await exchange(proxy.url, get('/big', 'big-warm'), [false]).then(({ socket }) => socket.destroy());
    await until(() => line('big-warm') !== undefined && proxy.inFlight() === 0, 5_000, 'the warming request to be over');
    const { hostname, port } = new URL(proxy.url);
    const socket = connect(Number(port), hostname, () => socket.write(get('/big', 'big-slow')));
    socket.pause(); // reads nothing: the answer cannot be handed over whole in its turn
    socket.on('error', () => undefined);
    await until(() => proxy.inFlight() === 1, 5_000, 'the big hit to be in flight');
    expect(line('big-slow')).toBeUndefined(); // not logged before it is over
    socket.destroy();
    await until(() => line('big-slow') !== undefined, 5_000, 'the access line of the slow client');
    expect(line('big-slow')).toMatchObject({ cache: 'hit', status: 200 });
    expect(proxy.logs().filter((l) => l.reqId === 'big-slow')).toHaveLength(1);
    await until(() => proxy.inFlight() === 0, 5_000, 'nothing in flight');
  });

  it('logs a hit queued behind a pipelined miss once its turn comes, with its own bytes', async () => {
    const done = exchange(proxy.url, get('/slow', 'pipe-miss') + get('/small', 'pipe-hit'), [false, false]);
    await until(() => releaseSlow !== undefined, 5_000, 'the miss to reach the upstream');
    // The hit was answered while the miss waits, but its response is queued behind the miss's.
    expect(line('pipe-hit')).toBeUndefined();
    expect(proxy.inFlight()).toBe(2);
    releaseSlow!();
    const { responses, socket } = await done;
    socket.destroy();
    expect(responses.map((r) => r.head.includes('x-request-id: pipe-miss'))).toEqual([true, false]);
    await until(() => line('pipe-hit') !== undefined && line('pipe-miss') !== undefined, 5_000, 'both access lines');
    expect(line('pipe-hit')).toMatchObject({ cache: 'hit', bytes: responses[1]!.bytes });
    expect(line('pipe-hit')).not.toHaveProperty('aborted');
    expect(line('pipe-miss')).toMatchObject({ bytes: responses[0]!.bytes });
    await until(() => proxy.inFlight() === 0, 5_000, 'nothing in flight');
  });

  it('closes the connection after a hit whose GET body then fails to parse, without a 400 after the answer', async () => {
    const { hostname, port } = new URL(proxy.url);
    const text = await new Promise<string>((resolve) => {
      const socket = connect(Number(port), hostname, () =>
        socket.write(`GET /small HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`),
      );
      let got = '';
      socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
      socket.on('close', () => resolve(got));
      socket.on('error', () => undefined);
    });
    expect(text.startsWith('HTTP/1.1 200 OK')).toBe(true);
    expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(1);
  });
});
