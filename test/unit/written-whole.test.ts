/**
 * When the handler logs and counts a response in its own turn (`writtenWhole`, src/main/handler.ts):
 * only a response ended and handed whole to a live socket; never one still in Node's buffers,
 * one queued behind a pipelined response, one whose write failed, or one still waiting upstream.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { writtenWhole } from '../../src/main/handler.js';
import { NOT_SERVED } from '../../src/http/reply.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

/** Serves `requests` (raw text, one connection) with `answer`, and collects `writtenWhole` right after each answer. */
async function verdicts(
  requests: string,
  count: number,
  answer: (req: IncomingMessage, res: ServerResponse) => boolean,
): Promise<boolean[]> {
  const seen: boolean[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  server = createServer((req, res) => {
    seen.push(answer(req, res));
    if (seen.length === count) done();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1', () => socket.write(requests));
  socket.on('error', () => undefined);
  socket.resume();
  await all;
  socket.destroy();
  return seen;
}

const GET = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n';

describe('writtenWhole', () => {
  it('is true for a small answer ended in its turn, GET and HEAD alike', async () => {
    const body = Buffer.alloc(5000, 'a');
    const seen = await verdicts(GET, 1, (req, res) => {
      res.writeHead(200, ['content-length', String(body.length)]);
      res.end(body);
      return writtenWhole(res, NOT_SERVED);
    });
    expect(seen).toEqual([true]);
    const head = await verdicts('HEAD / HTTP/1.1\r\nHost: x\r\n\r\n', 1, (req, res) => {
      res.writeHead(200, ['content-length', '5000']);
      res.end();
      return writtenWhole(res, NOT_SERVED);
    });
    expect(head).toEqual([true]);
  });

  it('is false while the path still waits (a promise), and for an answer not ended', async () => {
    const seen = await verdicts(GET, 1, (_req, res) => {
      res.writeHead(200, ['content-length', '1']);
      const notEnded = writtenWhole(res, NOT_SERVED);
      res.end('x');
      const waiting = writtenWhole(res, Promise.resolve(NOT_SERVED));
      return !notEnded && !waiting && writtenWhole(res, NOT_SERVED);
    });
    expect(seen).toEqual([true]);
  });

  it('is false for an answer larger than the socket takes at once', async () => {
    const body = Buffer.alloc(24 * 1024 * 1024, 'a');
    const seen = await verdicts(GET, 1, (_req, res) => {
      res.end(body);
      return writtenWhole(res, NOT_SERVED);
    });
    expect(seen).toEqual([false]);
  });

  it('is false for an answer queued behind a pipelined one', async () => {
    let first: ServerResponse | undefined;
    const seen = await verdicts(GET + GET, 2, (_req, res) => {
      if (first === undefined) {
        first = res; // left unanswered for now: the second answer queues behind it
        return false;
      }
      res.end('second');
      const whole = writtenWhole(res, NOT_SERVED);
      first.end('first');
      return whole;
    });
    expect(seen).toEqual([false, false]);
  });

  it('is false when the connection is already gone', async () => {
    const seen = await verdicts(GET, 1, (req, res) => {
      req.socket.destroy();
      res.end('too late');
      return writtenWhole(res, NOT_SERVED);
    });
    expect(seen).toEqual([false]);
  });
});
