/**
 * Runs before every test file (vitest `setupFiles`): watches undici's diagnostics channels, which
 * both the `undici` package and Node's built-in fetch (Octokit) publish to, so that
 *   - every credential a test sends (Authorization, X-Etagere-Key) is recorded as a secret;
 *   - every answer of a proxy listener with status >= 400, and every answer of an admin listener,
 *     is captured (distinct header lines and bodies) for the secrets scan after the suite.
 * Listeners are known through registerOrigin (startTestProxy, runCli).
 */
import { subscribe } from 'node:diagnostics_channel';
import { relative } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { capture, capturing, flushPending, inTestFile, originKind, setTestFile } from './capture.js';
import { credentialsIn, recordSecret } from './secrets.js';

interface UndiciRequest {
  origin?: unknown;
  method?: string;
  path?: string;
  headers?: unknown;
}

/** Request headers as [name, value] pairs: undici 7 keeps a flat array, older versions a string. */
function pairs(headers: unknown): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) out.push([String(headers[i]).toLowerCase(), String(headers[i + 1])]);
  } else if (typeof headers === 'string') {
    for (const line of headers.split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) out.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
    }
  }
  return out;
}

function originOf(request: UndiciRequest): string | undefined {
  try {
    return new URL(String(request.origin)).origin;
  } catch {
    return undefined;
  }
}

/**
 * Header lines not captured, because they change on every answer: numbers, HTTP dates, UUIDs, and
 * request ids (X-Request-Id is the client's own when it sent one).
 */
const VOLATILE =
  /^(?:[\d.,\s]*|[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
const VOLATILE_NAMES = new Set(['x-request-id', 'x-github-request-id', 'date', 'age']);

interface Watched {
  label: string;
  chunks: Buffer[];
  bytes: number;
}

const MAX_BODY = 4 * 1024 * 1024;
const watched = new WeakMap<object, Watched>();

/** An error in a diagnostics subscriber would surface as an uncaught exception in the test: never let one out. */
const safe =
  (fn: (message: unknown) => void) =>
  (message: unknown): void => {
    try {
      fn(message);
    } catch {
      // the scan covers less; the test is unaffected
    }
  };

/** Set once this process subscribes: with `isolate: false` this file runs again before each test file of a worker. */
const SUBSCRIBED = Symbol.for('etagere.test.capture-subscribed');
const processState = globalThis as { [SUBSCRIBED]?: boolean };

if (capturing() && processState[SUBSCRIBED] !== true) {
  processState[SUBSCRIBED] = true;
  subscribe(
    'undici:request:create',
    safe((message) => {
      const { request } = message as { request: UndiciRequest };
      let credentialCount = 0;
      for (const [name, value] of pairs(request.headers)) {
        if (name === 'authorization') {
          const scheme = /^([A-Za-z]{1,12}) /.exec(value.trim())?.[1] ?? 'no scheme';
          for (const credential of credentialsIn(value))
            recordSecret(`credential #${++credentialCount} of an Authorization (${scheme}) sent${inTestFile()}`, credential);
        } else if (name === 'x-etagere-key') {
          recordSecret(`a consumer key (X-Etagere-Key) sent${inTestFile()}`, value);
        }
      }
    }),
  );

  subscribe(
    'undici:request:headers',
    safe((message) => {
      const { request, response } = message as { request: UndiciRequest; response: { statusCode: number; headers: unknown } };
      const origin = originOf(request);
      const kind = origin === undefined ? undefined : originKind(origin);
      if (kind === undefined || (kind === 'proxy' && response.statusCode < 400)) return;
      // The label names the path without its query (a test may put a secret in a query string).
      const path = (request.path ?? '').split('?')[0];
      const label = `${kind} answer ${response.statusCode} to ${request.method ?? 'GET'} ${path}${inTestFile()}`;
      for (const [name, value] of pairs(response.headers)) {
        if (!VOLATILE_NAMES.has(name) && !VOLATILE.test(value)) capture(`${label}: header`, `${name}: ${value}`);
      }
      watched.set(request as object, { label, chunks: [], bytes: 0 });
    }),
  );

  subscribe(
    'undici:request:bodyChunkReceived',
    safe((message) => {
      const { request, chunk } = message as { request: object; chunk: Buffer };
      const answer = watched.get(request);
      if (answer === undefined || answer.bytes >= MAX_BODY) return;
      answer.chunks.push(Buffer.from(chunk));
      answer.bytes += chunk.length;
    }),
  );

  const finish = safe((message) => {
    const { request } = message as { request: object };
    const answer = watched.get(request);
    if (answer === undefined) return;
    watched.delete(request);
    capture(`${answer.label}: body`, Buffer.concat(answer.chunks).toString('utf8'));
  });
  subscribe('undici:request:trailers', finish);
  subscribe('undici:request:error', finish);
}

if (capturing()) {
  beforeAll(() => {
    const path = expect.getState().testPath;
    if (path !== undefined) setTestFile(relative(process.cwd(), path));
  });
  afterAll(() => flushPending());
}
