/**
 * Connection-level behaviour of the proxy listener where Node's defaults fall short (each one
 * found by test/hardening/fuzz.test.ts):
 *   - a parse error (clientError) is answered with a GitHub-shaped 400/431, but never in place of
 *     a response still owed to an earlier pipelined request on that connection (the client read
 *     the 400 as that answer, and the real answer was lost): it is written, and the connection
 *     closed, once the owed responses are out;
 *   - CONNECT gets a 405 JSON (Node closes the socket without a word), under the same rule;
 *   - an Expect other than 100-continue gets a 417 JSON (Node's has an empty body), and
 *     100-continue is only answered for the response next in line;
 *   - a client that half-closes its side right after its request still gets the answer (Node ends
 *     the connection at once by default, dropping the response);
 *   - a request with Upgrade (which Node declines when nothing listens for it) closes its
 *     connection after the answer: requests pipelined behind it were silently dropped;
 *   - a pipelined response still queued behind another when its connection dies gets a 'close'
 *     event, which Node never emits for it: without it the request stayed counted in flight for
 *     good (graceful shutdown then always waited for the drain timeout), and was never logged.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { writeError } from '../http/answer.js';
import { errorBody, errors } from '../http/errors.js';

/** How long a socket that sent CONNECT may stay open after its answer. */
const CONNECT_LINGER_MS = 5_000;
const OWED = Symbol('etagere.owedResponses');
const AFTER_OWED = Symbol('etagere.afterOwed');
const ANSWERED = Symbol('etagere.answeredInTurn');

/**
 * A connection's responses still owed (in request order), and what to do once the ones before a
 * failed request are out: write `raw` (the failed request's own answer) or just close.
 */
type Tracked = Duplex & {
  [OWED]?: Set<ServerResponse>;
  [AFTER_OWED]?: { raw: string | undefined; failed: ServerResponse | undefined };
  /** The request of the connection's last response written whole in its turn (see `answeredInTurn`). */
  [ANSWERED]?: IncomingMessage;
};

/** A complete error response for the cases without a usable ServerResponse (parse errors, CONNECT). */
function rawError(status: string, message: string, extra = ''): string {
  const body = errorBody(message);
  return `HTTP/1.1 ${status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\n${extra}connection: close\r\n\r\n${body.toString()}`;
}

/**
 * Before the handler. Node ignores Upgrade when nothing listens for it, but its parser has
 * already stopped at the end of that request: what the client pipelined behind it was dropped
 * and the connection then waited for nothing. Such a connection is closed after its answer.
 */
function beforeAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false;
}

/**
 * After the handler, for a response that is not out yet: it is owed on its connection until it
 * closes. A response the handler wrote whole to its socket in the same turn (a cache hit) owes
 * nothing: its bytes are ahead of anything written to the connection later, so it is not tracked
 * (no Set entry, no 'close' listener on the hit path).
 */
function owe(req: IncomingMessage, res: ServerResponse): void {
  const socket = req.socket as Tracked;
  let owed = socket[OWED];
  if (owed === undefined) {
    const set = new Set<ServerResponse>();
    owed = set;
    socket[OWED] = set;
    socket.once('close', () => {
      // Responses never attached to the socket (queued behind another) get no 'close' from Node.
      for (const response of set) if (response.socket === null) response.emit('close');
    });
  }
  const set = owed;
  set.add(res);
  res.once('close', () => {
    set.delete(res);
    settle(socket);
  });
}

/**
 * After the handler, for a response it wrote whole to its socket in the same turn: not owed, but
 * its request is remembered (the connection's last one only: the request, not the response) as
 * answered while its body may still be coming (a GET's body is read and dropped): when that body
 * fails to parse, the connection just closes, as for an owed response already answered, rather
 * than appending a 400.
 */
function answeredInTurn(req: IncomingMessage): void {
  (req.socket as Tracked)[ANSWERED] = req;
}

/**
 * Once every response owed before the failed request is out, ends the connection, with the
 * failed request's error answer when it has not been answered otherwise.
 */
function settle(socket: Tracked): void {
  const after = socket[AFTER_OWED];
  if (after === undefined) return;
  for (const response of socket[OWED] ?? []) if (response !== after.failed) return;
  socket[AFTER_OWED] = undefined;
  if (!socket.writable) return;
  if (after.raw !== undefined) socket.end(after.raw);
  else socket.end();
}

/**
 * The connection is done after its owed responses; `raw` answers the failed request. A request
 * whose body failed to parse already has a ServerResponse: the raw answer replaces it only while
 * that one has not started (its later writes then go nowhere), else the connection just closes.
 */
function failAfterOwed(socket: Duplex, raw: string): void {
  const tracked = socket as Tracked;
  // The request whose body failed is the connection's last one: owed, or answered in its turn.
  const last = tracked[ANSWERED];
  let failed: ServerResponse | undefined;
  for (const response of tracked[OWED] ?? []) if (!response.req.complete) failed = response;
  const answered = failed === undefined ? last !== undefined && !last.complete : failed.headersSent;
  tracked[AFTER_OWED] = { raw: answered ? undefined : raw, failed: answered ? undefined : failed };
  settle(tracked);
}

function onClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  if ((socket as Tracked)[AFTER_OWED] !== undefined) return; // already failed; the parser repeats itself
  failAfterOwed(socket, clientErrorAnswer(err.code));
}

/** The raw answer to a request Node's parser gave up on: 408 (too slow), 431 (headers) or 400. */
function clientErrorAnswer(code: string | undefined): string {
  // headersTimeout / requestTimeout ran out before the request was complete (RFC 9110 15.5.9).
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return rawError('408 Request Timeout', 'Request timeout: the request was not received in time');
  if (code === 'HPE_HEADER_OVERFLOW') return rawError('431 Request Header Fields Too Large', 'Request header fields too large');
  return rawError('400 Bad Request', 'Bad request: malformed HTTP request');
}

function onConnect(_req: IncomingMessage, socket: Duplex): void {
  // Node has handed the socket over: read and drop what follows so the client's FIN is seen (and
  // the socket freed), and bound how long a client that never closes can hold it.
  socket.on('error', () => undefined);
  socket.resume();
  socket.once('finish', () => setTimeout(() => socket.destroy(), CONNECT_LINGER_MS).unref());
  if (!socket.writable) return;
  failAfterOwed(
    socket,
    rawError('405 Method Not Allowed', 'Method CONNECT is not allowed: this is a reverse proxy, not a tunnel', 'allow: GET, HEAD\r\n'),
  );
}

/** What the listener hands a request to: true when it answered it whole in this turn (src/main/handler.ts). */
interface RequestHandler {
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

/**
 * The proxy listener's 'request' listener (`serve`): the connection rules above around the handler,
 * the requests in flight, and, once `draining`, a 503 for every new request on a connection that
 * then closes. A response the handler wrote whole in its turn (a hit) is out already: neither in
 * flight nor owed.
 */
export class RequestListener {
  /** Shutting down: new requests are refused and their connections closed. */
  draining = false;
  #inFlight = 0;
  #onIdle: (() => void) | undefined = undefined;

  constructor(
    private readonly handler: RequestHandler,
    private readonly requestId: (fromClient: string | string[] | undefined) => string,
  ) {}

  /** The listener (bound: given to the server as it is). */
  readonly serve = (req: IncomingMessage, res: ServerResponse): void => {
    beforeAnswer(req, res);
    if (this.draining) {
      // While draining, answered keep-alive connections are closed instead of reused.
      res.shouldKeepAlive = false;
      writeError(res, errors.shuttingDown(), this.requestId(req.headers['x-request-id']));
      if (res.writableFinished) answeredInTurn(req);
      else owe(req, res);
      return;
    }
    if (this.handler.handle(req, res)) return answeredInTurn(req);
    this.#inFlight++;
    owe(req, res);
    res.once('close', () => {
      if (--this.#inFlight === 0) this.#onIdle?.();
    });
  };

  /** Requests being answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Resolves once no request is in flight, or after `ms` at most. */
  async idle(ms: number): Promise<void> {
    if (this.#inFlight === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.#onIdle = resolve;
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
  }
}

/**
 * Installs the behaviour above on the proxy listener (created with requireHostHeader: false: see
 * checkHost in src/http/target.ts). Its 'request' listener is a `RequestListener`'s `serve`
 * (src/main/app.ts), which calls `beforeAnswer` before the handler and `owe` after it for a
 * response not out yet.
 */
export function hardenListener(server: Server): void {
  // Undocumented but long-standing: answer requests whose client has already sent its FIN.
  Object.assign(server, { httpAllowHalfOpen: true });
  server.on('checkContinue', (req, res) => {
    // Node's own 100 Continue for a response still queued behind another (pipelining) is
    // buffered ahead of it, and a Buffer body's head is then put in front of it: the client read
    // "100 Continue" in the middle of that response. Only the response next in line gets one.
    if (res.socket !== null) res.writeContinue();
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (req, res) => {
    beforeAnswer(req, res);
    owe(req, res);
    req.resume();
    writeError(res, errors.expectationFailed());
  });
  server.on('clientError', onClientError);
  server.on('connect', onConnect);
}
