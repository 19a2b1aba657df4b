/**
 * A stored form's answer head, written once per form: its status line and fields as one block,
 * checked once with Node's own header checks. A hit appends its own fields (the pool's
 * x-ratelimit-*, Age, Cache-Status, X-Request-Id) and the connection fields, and hands the whole
 * head to Node, which sends it with the body in one write: Node's `writeHead` would check and
 * join some thirty fields again on every request.
 *
 * Handing a head to Node whole relies on ServerResponse internals (`_header`, `_headerSent`, the
 * keep-alive settings its server gave it), the way `writeHead` leaves them. So `HeadBlocks.start`
 * first answers one request both ways on a loopback server and compares the bytes; if they differ
 * (another Node), there are no head blocks and every answer goes through `writeHead`. Only a
 * response that keeps its connection alive, with a body, a Date and a Content-Length of its own,
 * and nothing Node would act on (Connection, Transfer-Encoding, Trailer, ...), gets a block: HEAD
 * (Node sends no body), a 304, a range, a connection that closes, a form without Date and a form
 * decoded as it goes out keep `writeHead`.
 */
import { once } from 'node:events';
import { createServer, STATUS_CODES, validateHeaderName, validateHeaderValue, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Block, Representation } from './reply.js';

/** The fields of one request's answer beside the form's: the pool's (checked once per list), then Age, Cache-Status and X-Request-Id (valid by construction). */
export interface HeadFields {
  readonly extra: readonly string[] | undefined;
  readonly age: number;
  readonly cacheStatus: string;
  readonly id: string;
}

/** ServerResponse's state as `writeHead` leaves it (node:_http_outgoing, node:_http_server). */
interface Internals {
  _header: string | null;
  _headerSent: boolean;
  _contentLength: number | null;
  _keepAliveTimeout: number;
  _defaultKeepAlive: boolean;
  _maxRequestsPerSocket: number | undefined;
  _expect_continue: boolean;
  _sent100: boolean;
  maxRequestsOnConnectionReached: boolean;
}

/** Writes the head of `res` from `block` and `fields`; false when it did not (the caller uses writeHead). */
export type WriteHead = (res: ServerResponse, status: number, block: Block, fields: HeadFields) => boolean;

/** Fields Node acts on when it writes them (or that change its encoding): a form with one has no block. */
const NODE_READS = new Set(['connection', 'transfer-encoding', 'expect', 'trailer', 'keep-alive', 'content-disposition']);

/** No block for a form (memoized on it as such). */
const NO_BLOCK = null;

/** The status line and fields of a form, as `writeHead` would write them, or null when it may not get a block. */
export function blockOf(status: number, headers: readonly string[]): Block | null {
  if (status < 200 || status === 204 || status === 304) return NO_BLOCK;
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`;
  let date = false;
  let length: number | undefined;
  try {
    for (let at = 0; at < headers.length; at += 2) {
      const name = headers[at]!;
      const value = headers[at + 1]!;
      validateHeaderName(name);
      validateHeaderValue(name, value);
      const lower = name.toLowerCase();
      if (NODE_READS.has(lower)) return NO_BLOCK;
      if (lower === 'date') date = true;
      else if (lower === 'content-length') length = Number(value);
      head += `${name}: ${value}\r\n`;
    }
  } catch {
    return NO_BLOCK; // writeHead refuses it as before
  }
  if (!date || length === undefined || !Number.isInteger(length)) return NO_BLOCK;
  return { head, length, extra: undefined, extraText: '' };
}

/** The form's block, made on its first answer (null: none). */
function formBlock(form: Representation): Block | null {
  let block = form.block;
  if (block === undefined) {
    block = form.decode ? NO_BLOCK : blockOf(form.status, form.headers);
    form.block = block;
  }
  return block;
}

/** The pool's fields as text, checked once per list (a list that fails is never given a block: undefined). */
function extraText(block: Block, extra: readonly string[] | undefined): string | undefined {
  if (extra === block.extra) return block.extraText;
  let text = '';
  if (extra !== undefined) {
    try {
      for (let at = 0; at < extra.length; at += 2) {
        validateHeaderName(extra[at]!);
        validateHeaderValue(extra[at]!, extra[at + 1]!);
        text += `${extra[at]}: ${extra[at + 1]}\r\n`;
      }
    } catch {
      return undefined;
    }
  }
  block.extra = extra;
  block.extraText = text;
  return text;
}

/** The head Node's writeHead would store, written into `res` as it would leave it. */
export const writeBlockHead: WriteHead = (res, status, block, fields) => {
  const out = res as unknown as Internals;
  // Node writes `Connection: close` (and ends the connection) otherwise: writeHead does that.
  if (!res.shouldKeepAlive || out.maxRequestsOnConnectionReached || (out._expect_continue && !out._sent100) || out._header !== null)
    return false;
  const extra = extraText(block, fields.extra);
  if (extra === undefined) return false;
  let connection = 'Connection: keep-alive\r\n';
  if (out._keepAliveTimeout && out._defaultKeepAlive) {
    const max = ~~(out._maxRequestsPerSocket ?? 0) > 0 ? `, max=${out._maxRequestsPerSocket}` : '';
    connection += `Keep-Alive: timeout=${Math.floor(out._keepAliveTimeout / 1000)}${max}\r\n`;
  }
  res.statusCode = status;
  if (!res.statusMessage) res.statusMessage = STATUS_CODES[status] ?? 'unknown';
  out._contentLength = block.length;
  out._header = `${block.head}${extra}age: ${fields.age}\r\ncache-status: ${fields.cacheStatus}\r\nx-request-id: ${fields.id}\r\n${connection}\r\n`;
  out._headerSent = false;
  return true;
};

/** The one answer of the self-test: a stored form's fields, the pool's and the per-request ones. */
const PROBE_HEADERS = [
  'content-type',
  'application/json; charset=utf-8',
  'date',
  'Tue, 01 Apr 2025 10:00:00 GMT',
  'etag',
  'W/"probe"',
  'content-length',
  '2',
];
const PROBE_EXTRA = ['x-ratelimit-limit', '5000', 'x-ratelimit-remaining', '4999'];
const PROBE_FIELDS: HeadFields = { extra: PROBE_EXTRA, age: 7, cacheStatus: 'etagere; hit; ttl=53', id: 'probe-1' };
const PROBE_BODY = Buffer.from('{}');
const SELF_TEST_MS = 2_000;

/** Writes heads as blocks, once a loopback answer written that way was the same, byte for byte, as `writeHead`'s. */
export class HeadBlocks {
  readonly #write: WriteHead;

  private constructor(write: WriteHead) {
    this.#write = write;
  }

  /** Head blocks when `write` passes the self-test; undefined (every answer through writeHead) when it does not. */
  static async start(write: WriteHead = writeBlockHead, keepAliveTimeout = 65_000): Promise<HeadBlocks | undefined> {
    try {
      const [byWriteHead, byBlock] = await answeredBothWays(write, keepAliveTimeout);
      return byWriteHead.length > 0 && byWriteHead.equals(byBlock) ? new HeadBlocks(write) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes the head of `res` for `form` with this request's fields; false when the form or the response has no block (writeHead). */
  write(res: ServerResponse, form: Representation, fields: HeadFields): boolean {
    const block = formBlock(form);
    return block !== null && this.#write(res, form.status, block, fields);
  }
}

/** One GET answered by writeHead and one by `write`, on one loopback keep-alive connection: the bytes of each. */
async function answeredBothWays(write: WriteHead, keepAliveTimeout: number): Promise<[Buffer, Buffer]> {
  const block = blockOf(200, PROBE_HEADERS);
  if (block === null) throw new Error('the probe form has no block');
  const server = createServer({ keepAliveTimeout }, (req, res) => {
    if (req.url === '/block') {
      let written = false;
      try {
        written = write(res, 200, block, PROBE_FIELDS);
      } catch {
        // written stays false
      }
      // A writer that did not write the block fails the comparison at once.
      return void (written ? res.end(PROBE_BODY) : res.destroy());
    }
    const list = [...PROBE_HEADERS, ...PROBE_EXTRA, 'age', '7', 'cache-status', PROBE_FIELDS.cacheStatus, 'x-request-id', PROBE_FIELDS.id];
    res.writeHead(200, list);
    res.end(PROBE_BODY);
  });
  server.keepAliveTimeout = keepAliveTimeout;
  // exclusive: in a cluster worker, a port of its own, never announced to the primary as the worker's listener.
  server.listen({ port: 0, host: '127.0.0.1', exclusive: true });
  await once(server, 'listening');
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  const reader = new AnswerReader(socket);
  const timer = setTimeout(() => socket.destroy(new Error('self-test timed out')), SELF_TEST_MS);
  try {
    await once(socket, 'connect');
    const first = await reader.get('/writeHead');
    const second = await reader.get('/block');
    return [first, second];
  } finally {
    clearTimeout(timer);
    socket.destroy();
    server.closeAllConnections();
    server.close();
  }
}

/** Reads whole answers off a connection: a head, then as many body bytes as its Content-Length says. */
class AnswerReader {
  #got = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  #failed: Error | undefined;

  constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#got = Buffer.concat([this.#got, chunk]);
      this.#wake?.();
    });
    const fail = (err?: Error): void => {
      this.#failed = err ?? new Error('the connection closed');
      this.#wake?.();
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
  }

  /** Sends one GET and resolves with its answer's bytes. */
  async get(path: string): Promise<Buffer> {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    for (;;) {
      const got = this.#got;
      const end = got.indexOf('\r\n\r\n');
      if (end !== -1) {
        const length = /\r\ncontent-length: (\d+)\r\n/i.exec(got.subarray(0, end).toString('latin1'));
        const total = end + 4 + Number(length?.[1] ?? Number.NaN);
        if (got.length >= total) {
          this.#got = got.subarray(total);
          return got.subarray(0, total);
        }
      }
      if (this.#failed !== undefined) throw this.#failed;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
