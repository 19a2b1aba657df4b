/**
 * Wire fuzzing: seeded, bounded, raw bytes over TCP to three in-process proxies (default Link
 * settings; consumer keys + token pool + public_url; trust_forwarded), each in front of its own
 * recording upstream. A case is a byte string: odd methods and targets, traversal attempts, long
 * and many headers, control bytes, obs-fold, bad Basic/consumer keys, conflicting framing,
 * pipelining, half-closed sockets, clients leaving mid-pipeline, garbage, HTTP/1.0, HTTP/2 and TLS
 * prefaces. Some run on keep-alive connections that already served valid requests. For every case:
 *   - the socket gets every answer it asked for, or is closed by the proxy, within 5 s (no hang);
 *   - every 4xx is GitHub-shaped JSON; nothing the proxy must refuse is a 2xx/3xx; no 5xx (the
 *     upstream never fails here); the bytes parse as HTTP/1.1 answers;
 *   - plainly valid requests are answered, in order, by the proxy's handler (never only closed,
 *     never with another request's parse error), and a successful answer keeps the connection;
 *   - no Link/Location points at a host the fuzzer chose (with trust_forwarded on, at most at a
 *     syntactically valid one; with neither public_url nor trust_forwarded, at most at the request's
 *     own Host over http, when it is a plain host[:port], and never at an X-Forwarded-Host);
 *   - every request an upstream saw stays under its base path (no dot segments, no encoded
 *     separators), carries the upstream's own Host, and never a consumer key.
 * Process-wide: no uncaught exception or unhandled rejection, no error-level log line, nothing
 * left counted in flight, and each proxy still answers a normal request at the end.
 *
 * 10,000 cases in `npm run soak`, 2,000 in `npm test`; FUZZ_SEED and FUZZ_CASES change the seed and
 * the count; FUZZ_ONLY=n replays case #n alone and prints its bytes; FUZZ_VERBOSE=1 prints outcomes by kind.
 */
import fc from 'fast-check';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { soakSize } from '../helpers/soak.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20_260_808);
const CASES = soakSize('FUZZ_CASES', { soak: 10_000, quick: 2_000 });
/** No new case starts after this; the count actually run is reported. */
const TIME_BUDGET_MS = 90_000;
const CASE_DEADLINE_MS = 5_000;
const CONCURRENCY = 24;

const CONSUMER_KEY = 'ck-web-3f9a1c7e5b2d';
const PUBLIC_URL = 'https://etagere.example.test';
/** Hosts a fuzzer might try to get reflected into Link headers. */
const ATTACKER_HOSTS = ['evil.example', 'attacker.test:8443', 'evil.example:80', '10.0.0.66', 'evil.example.'] as const;
/** Upstream base paths: /api -> /base (stripped), /rw -> /pt (pass-through), /raw -> /raw-base, / -> /root. */
const BASES = ['/base', '/pt', '/raw-base', '/root'] as const;
/** A path many cases ask for, so that the cache answers some of them. */
const HOT_PATH = '/api/repos/octocat/hello-world';
const HOST_RE = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

type Variant = 'plain' | 'consumers' | 'forwarded';
const VARIANTS: readonly Variant[] = ['plain', 'consumers', 'forwarded'];

// ---------------------------------------------------------------------------------------------
// Recording upstream: answers 200 with Link headers built on its own base, records every request.

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

interface Upstream {
  url: string;
  seen: Seen[];
  /** Requests the upstream's own parser refused (the proxy sent something malformed). */
  malformed: string[];
  close(): Promise<void>;
}

async function startRecordingUpstream(): Promise<Upstream> {
  const seen: Seen[] = [];
  const malformed: string[] = [];
  let self = '';
  // A larger header limit than the proxy's, so that the proxy (not the upstream) decides what is too big.
  const server: Server = createServer({ maxHeaderSize: 256 * 1024 }, (req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const base = BASES.find((b) => req.url === b || req.url?.startsWith(`${b}/`) || req.url?.startsWith(`${b}?`)) ?? '';
    req.resume();
    req.on('error', () => undefined);
    const body = JSON.stringify({ ok: true });
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'public, max-age=60',
      link: `<${self}${base}/items?page=2>; rel="next", <${self}${base}/items?page=5>; rel="last"`,
      'x-ratelimit-limit': '1000000',
      'x-ratelimit-remaining': '999999',
      'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
      'x-ratelimit-resource': 'core',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket) => {
    if (err.code?.startsWith('HPE_') === true)
      malformed.push(`${err.code}: ${JSON.stringify((err.rawPacket?.toString('latin1') ?? '').slice(0, 200))}`);
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  self = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: self,
    seen,
    malformed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What is wrong with a request an upstream received (path outside its base, foreign Host, consumer key), or undefined. */
function upstreamRequestProblem(seen: Seen, upstreamHost: string, consumers: boolean): string | undefined {
  const url = seen.url;
  if (!url.startsWith('/')) return 'not an origin-form target';
  const queryStart = url.indexOf('?');
  const pathname = queryStart === -1 ? url : url.slice(0, queryStart);
  if (/[\\\x00-\x20\x7f]/.test(pathname)) return 'backslash, space or control byte in path';
  if (/%(2f|5c|00)/i.test(pathname)) return 'encoded "/", "\\" or NUL in path';
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return 'malformed percent-encoding in path';
  }
  // "..;x" is ".." to servers that honour path parameters (Tomcat and friends).
  if (decoded.split('/').some((seg) => ['.', '..'].includes(seg.split(';', 1)[0]!))) return 'dot segment in path';
  const base = BASES.find((b) => pathname === b || pathname.startsWith(`${b}/`));
  if (base === undefined) return 'outside every upstream base path';
  const normalised = new URL(pathname, 'http://upstream.invalid').pathname;
  if (normalised !== base && !normalised.startsWith(`${base}/`)) return `normalises outside ${base}`;
  if (base !== '/pt' && seen.method !== 'GET' && seen.method !== 'HEAD') return `${seen.method} reached a read-only upstream`;
  if (seen.headers.host !== upstreamHost) return `Host ${JSON.stringify(seen.headers.host)} instead of the upstream's own`;
  if (!consumers) return undefined; // the consumer key is only a key where consumers are enabled
  if (seen.headers['x-etagere-key'] !== undefined) return 'X-Etagere-Key travelled upstream';
  // A key presented as the user of well-formed Basic credentials is the consumer's, never an
  // upstream credential. (Other Authorization values are the client's own and travel as sent.)
  const auth = seen.headers.authorization;
  const basic = typeof auth === 'string' ? /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(auth) : null;
  if (basic !== null && Buffer.from(basic[1]!, 'base64').toString('utf8').split(':', 1)[0] === CONSUMER_KEY) {
    return 'the consumer key travelled upstream as Basic credentials';
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Cases.

interface Req {
  method: string;
  target: string;
  /** '' sends an HTTP/0.9-style request line (no version). */
  version: string;
  /** Raw header lines, without line terminators. */
  headers: string[];
  body: string;
  eol: string;
  /** The proxy must refuse it: a 4xx or a close; never a 2xx/3xx. */
  reject: boolean;
  /** Plainly valid: it must be answered (not just closed), and never with a 5xx. */
  valid: boolean;
}

interface Case {
  kind: string;
  variant: Variant;
  /** Requests in the bytes, in order (empty for raw garbage). */
  reqs: Req[];
  /** Bytes sent; `splits` cut them into separate writes. */
  bytes: Buffer;
  splits: number[];
  /** The client half-closes (end()) right after writing. */
  halfClose: boolean;
  /** The client drops the connection: as soon as it has written, or once the first answer is in. */
  leave?: 'after-write' | 'after-first-answer';
  /** Host names the client chose (Host, X-Forwarded-Host), for the Link check. */
  chosenHosts: string[];
  /** The Host values alone (a zero-config proxy may point Link and Location at them). */
  ownHosts?: string[];
}

const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

function serialize(req: Req): string {
  const line = req.version === '' ? `${req.method} ${req.target}` : `${req.method} ${req.target} ${req.version}`;
  return [line, ...req.headers].join(req.eol) + req.eol + req.eol + req.body;
}

const b64 = (s: string): string => Buffer.from(s, 'latin1').toString('base64');

/** Path segments that are harmless. */
const plainSeg = fc.constantFrom(
  'repos',
  'octocat',
  'hello-world',
  'issues',
  '42',
  'a',
  'x.y',
  '~user',
  'caf%C3%A9',
  'a%20b',
  'v1.2.3',
  '%252e%252e',
  'a..b',
  '...',
  '%e2%80%ae',
  'items',
);
/** Path segments that must be refused (dot segments, encoded separators, NUL, bad escapes). */
const evilSeg = fc.constantFrom(
  '..',
  '.',
  '%2e%2e',
  '%2E%2e',
  '.%2e',
  '%2e.',
  '%2e',
  '..%2f',
  '%2F',
  '%2f',
  '%00',
  '%5c',
  '%5C',
  '\\',
  '..\\',
  '%',
  '%zz',
  '%c0%ae%c0%ae',
  '%C0%AF',
  '%u002e%u002e',
  '..;',
  '.;',
  '..;x=1',
  '%2e%2e;',
  '..%00',
  '%2e%2e%5c',
);
const querySafe = fc.constantFrom(
  '',
  '',
  '?page=2&per_page=5',
  '?q=../../etc/passwd',
  '?x=%2f..%2f',
  '?a=%00',
  '??',
  '?a=b?c',
  '?redirect=http://evil.example/',
);

function prefixesFor(variant: Variant): readonly string[] {
  return variant === 'consumers' ? ['/api', '/rw', '/'] : ['/api', '/rw', '/raw'];
}

function join(prefix: string, segs: readonly string[]): string {
  const pathPrefix = prefix === '/' ? '' : prefix;
  const path = pathPrefix + segs.map((s) => `/${s}`).join('');
  return path === '' ? '/' : path;
}

const hostLine = (port: number) =>
  fc.constantFrom('Host: localhost', `Host: 127.0.0.1:${port}`, 'host: localhost:8080', 'Host: api.internal');

/** A plainly valid request for a variant. */
function validReq(variant: Variant, port: number): fc.Arbitrary<Req> {
  return fc
    .record({
      method: fc.oneof(
        { weight: 8, arbitrary: fc.constant('GET') },
        { weight: 2, arbitrary: fc.constant('HEAD') },
        { weight: 2, arbitrary: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') },
      ),
      prefix: fc.constantFrom(...prefixesFor(variant)),
      segs: fc.array(plainSeg, { maxLength: 4 }),
      query: querySafe,
      host: hostLine(port),
      extra: fc.subarray([
        'Accept: application/vnd.github+json',
        'User-Agent: fuzz/1.0',
        'X-GitHub-Api-Version: 2022-11-28',
        'X-Request-Id: fuzz-1',
        'Accept-Encoding: gzip',
        'Cache-Control: no-cache',
        'If-None-Match: "abc"',
        'Expect: 100-continue',
      ]),
      cred: fc.constantFrom('none', 'token', 'key', 'basic-key', 'basic-user'),
      connection: fc.constantFrom('', '', 'Connection: keep-alive', 'Connection: close'),
      body: fc.constantFrom('', '{"a":1}'),
    })
    .map((fields): Req => {
      const headers = [fields.host, ...fields.extra];
      if (fields.cred === 'token') headers.push('Authorization: token ghp_fuzz000000000000000000000000000000');
      if (fields.cred === 'basic-user') headers.push(`Authorization: Basic ${b64('someone:ghp_fuzz0000')}`);
      if (variant === 'consumers' && fields.cred === 'key') headers.push(`X-Etagere-Key: ${CONSUMER_KEY}`);
      if (variant === 'consumers' && fields.cred === 'basic-key') headers.push(`Authorization: Basic ${b64(`${CONSUMER_KEY}:`)}`);
      if (fields.connection !== '') headers.push(fields.connection);
      const unsafe = fields.method !== 'GET' && fields.method !== 'HEAD';
      const body = unsafe ? fields.body : '';
      if (unsafe) headers.push(`Content-Length: ${body.length}`);
      return {
        method: fields.method,
        target: join(fields.prefix, fields.segs) + fields.query,
        version: 'HTTP/1.1',
        headers,
        body,
        eol: '\r\n',
        reject: false,
        valid: true,
      };
    });
}

const mutate = (base: fc.Arbitrary<Req>, f: (req: Req) => fc.Arbitrary<Req>): fc.Arbitrary<Req> => base.chain(f);
const patch = (r: Req, p: Partial<Req>): Req => ({ ...r, ...p, valid: false });
const withoutHost = (r: Req): string[] => r.headers.filter((h) => !/^host:/i.test(h));
const headersWithout = (r: Req, name: string): string[] => r.headers.filter((h) => !h.toLowerCase().startsWith(`${name}:`));

/** One mutated request per kind; `reject` marks what the proxy must refuse. */
function kinds(variant: Variant, port: number): Record<string, fc.Arbitrary<Req>> {
  const base = validReq(variant, port);
  // GETs, a third of them on one hot path (so that some are answered from the cache, synchronously).
  const getBase = fc.tuple(base, fc.nat(2)).map(([req, hot]) => ({
    ...req,
    method: 'GET',
    target: hot === 0 ? HOT_PATH : req.target,
    body: '',
    headers: req.headers.filter((h) => !/^content-length:/i.test(h)),
  }));
  return {
    'odd method': mutate(base, (req) =>
      fc
        .oneof(
          fc.constantFrom(
            'get',
            'head',
            'Get',
            'post',
            'FOO',
            'G ET',
            'GET\t',
            'PRI',
            'M-SEARCH',
            'PROPFIND',
            'MKCOL',
            'PURGE',
            'SEARCH',
            'LINK',
            'SOURCE',
            'TRACE',
            'TRACK',
            'DEBUG',
          ),
          fc.integer({ min: 50, max: 20_000 }).map((n) => 'G'.repeat(n)),
          fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 12 }),
        )
        .map((method) => {
          // Tokens Node's parser does not know (lowercase, unknown, long, junk) are refused by it.
          const known = ['PRI', 'M-SEARCH', 'PROPFIND', 'MKCOL', 'PURGE', 'SEARCH', 'LINK', 'SOURCE', 'TRACE'].includes(method);
          return patch(req, { method, reject: !known });
        }),
    ),
    CONNECT: mutate(base, (req) =>
      fc
        .constantFrom('evil.example:443', `127.0.0.1:${port}`, '/api/x', 'http://evil.example/')
        .map((target) => patch(req, { method: 'CONNECT', target, reject: true })),
    ),
    'absolute-form / asterisk / authority target': mutate(base, (req) =>
      fc
        .constantFrom(
          'http://evil.example/repos/a/b',
          'http://evil.example/api/repos/a/b',
          'https://attacker.test:8443/rw/x',
          `http://127.0.0.1:${port}/api/x`,
          'HTTP://EVIL.EXAMPLE/api',
          'http://evil.example',
          'http://evil.example/api/../../x',
          '*',
          'evil.example:443',
          '//evil.example/api/x',
          '//api/x',
          'api/x',
          '?x=1',
          '#frag',
          '/api/x#frag',
          'http:/api/x',
          '\\\\evil.example\\api',
        )
        .map((target) => patch(req, { target, reject: true })),
    ),
    'traversal in path': mutate(base, (req) =>
      fc
        .record({
          prefix: fc.constantFrom(...prefixesFor(variant), '/api/', '/API', '/apix'),
          before: fc.array(plainSeg, { maxLength: 2 }),
          evil: fc.array(evilSeg, { minLength: 1, maxLength: 4 }),
          after: fc.array(plainSeg, { maxLength: 2 }),
          query: querySafe,
        })
        .map((p) => patch(req, { target: join(p.prefix, [...p.before, ...p.evil, ...p.after]) + p.query, reject: true })),
    ),
    'double slashes': mutate(base, (req) =>
      fc
        .record({
          prefix: fc.constantFrom(...prefixesFor(variant)),
          segs: fc.array(fc.oneof(plainSeg, fc.constant('')), { minLength: 1, maxLength: 5 }),
        })
        .map((path) => {
          const target = join(path.prefix, path.segs).replace(/^\/\/+/, '/') + '//';
          return patch(req, { target, reject: false });
        }),
    ),
    'very long URL': mutate(base, (req) =>
      fc.integer({ min: 7_000, max: 70_000 }).map((length) => {
        const target = `/api/${'a'.repeat(length)}`;
        return patch(req, { target, reject: target.length > 8192 });
      }),
    ),
    'very long header': mutate(base, (req) =>
      fc
        .record({
          n: fc.integer({ min: 1_000, max: 60_000 }),
          name: fc.constantFrom('X-Long', 'Accept', 'Authorization', 'Cookie', 'X-Forwarded-Host', 'X-Etagere-Key'),
        })
        .map((longHeader) => {
          const value = longHeader.name === 'Authorization' ? `token ${'t'.repeat(longHeader.n)}` : 'v'.repeat(longHeader.n);
          return patch(req, {
            headers: [...headersWithout(req, longHeader.name.toLowerCase()), `${longHeader.name}: ${value}`],
            reject: longHeader.n > 17_000,
          });
        }),
    ),
    'many headers': mutate(base, (req) =>
      fc.integer({ min: 50, max: 4_000 }).map((count) => {
        const many = Array.from({ length: count }, (_, i) => `X-Fuzz-${i}: ${i % 7 === 0 ? 'a, b' : 'v'}`);
        // Node stops keeping headers after 2000 (maxHeadersCount) rather than refusing them.
        return patch(req, { headers: [...req.headers, ...many], reject: false });
      }),
    ),
    'duplicate Host': mutate(base, (req) =>
      fc
        .constantFrom('evil.example', 'localhost', 'attacker.test:8443', '')
        .map((second) => patch(req, { headers: [...req.headers, `Host: ${second}`], reject: true })),
    ),
    'missing Host': mutate(base, (req) =>
      fc
        .constantFrom('HTTP/1.1', 'HTTP/1.0')
        .map((version) => patch(req, { headers: withoutHost(req), version, reject: version === 'HTTP/1.1', valid: false })),
    ),
    'duplicate Authorization': mutate(base, (req) =>
      fc
        .constantFrom(
          ['Authorization: token aaa', 'Authorization: token bbb'],
          [`Authorization: Basic ${b64(`${CONSUMER_KEY}:`)}`, 'Authorization: token stolen'],
          ['Authorization: token first', `Authorization: Basic ${b64(`${CONSUMER_KEY}:`)}`],
          [`X-Etagere-Key: ${CONSUMER_KEY}`, 'X-Etagere-Key: junk'],
          ['X-Etagere-Key: junk', `X-Etagere-Key: ${CONSUMER_KEY}`],
          ['Authorization: ', 'Authorization: token x'],
        )
        .map((extra) =>
          patch(req, { headers: [...headersWithout(headersWithoutReq(req, 'authorization'), 'x-etagere-key'), ...extra], reject: false }),
        ),
    ),
    'CR, LF or NUL in a header': mutate(base, (req) =>
      fc
        .record({
          name: fc.constantFrom('X-A', 'Accept', 'Authorization', 'X-Etagere-Key', 'Host', 'X-Forwarded-Host'),
          value: fc.constantFrom('a\x00b', 'a\rb', 'a\nb', '\x00', 'a\r', 'a\x7fb', 'a\x01b', 'a\x1bb'),
        })
        .map((badHeader) =>
          patch(req, {
            headers: [...headersWithout(req, badHeader.name.toLowerCase()), `${badHeader.name}: ${badHeader.value}`],
            reject: badHeader.value !== 'a\x7fb',
          }),
        ),
    ),
    'header injection (CRLF)': mutate(base, (req) =>
      fc
        .constantFrom(
          'X-A: a\r\nX-Injected: 1',
          'X-A: a\r\nHost: evil.example',
          'X-A: a\r\nTransfer-Encoding: chunked',
          'X-A: a\r\nContent-Length: 5',
          'X-A: a\r\nX-Forwarded-Host: evil.example',
        )
        .map((line) => patch(req, { headers: [...req.headers, line], reject: /Host: evil/.test(line) && !/Forwarded/.test(line) })),
    ),
    'malformed header line': mutate(base, (req) =>
      fc
        .constantFrom(
          'X-A: a\r\n folded',
          'X-A: a\r\n\tfolded',
          'NoColonHere',
          'Bad Name: v',
          'X-A : v',
          ': empty-name',
          'X-\x80: v',
          'X-A:\x80\xff',
          ' Leading: v',
          'X-"q": v',
        )
        .map((line) => patch(req, { headers: [...req.headers, line], reject: !['X-A:\x80\xff'].includes(line) })),
    ),
    'invalid Basic': mutate(base, (req) =>
      fc
        .constantFrom(
          'Basic',
          'Basic ',
          'Basic !!!!',
          'Basic ====',
          `Basic ${b64('nocolon')}`,
          `Basic ${b64(':')}`,
          `Basic ${b64(':no-such-pass-0')}`,
          `Basic ${b64('\xff\xfe:\x00')}`,
          `basic    ${b64(`${CONSUMER_KEY}:x`)}   `,
          `BASIC ${b64(`${CONSUMER_KEY}`)}`,
          `Basic ${b64(`${CONSUMER_KEY}:`).replace(/=+$/, '')}`,
          `Basic ${b64(`${CONSUMER_KEY}:`)}=`,
          `Basic ${b64(`${CONSUMER_KEY}x:`)}`,
          `Basic ${'A'.repeat(6000)}`,
          `Basic ${b64(`${CONSUMER_KEY}:`)} extra`,
          'Basic Zm9v\tYmFy',
          `Bearer ${CONSUMER_KEY}`,
          `token ${CONSUMER_KEY}`,
        )
        .map((value) =>
          patch(req, {
            headers: [...headersWithout(headersWithoutReq(req, 'authorization'), 'x-etagere-key'), `Authorization: ${value}`],
            reject: false,
          }),
        ),
    ),
    'X-Etagere-Key junk': mutate(base, (req) =>
      fc
        .constantFrom(
          '',
          ' ',
          'junk',
          `${CONSUMER_KEY} `,
          ` ${CONSUMER_KEY}`,
          `${CONSUMER_KEY}, ${CONSUMER_KEY}`,
          `${CONSUMER_KEY}\xff`,
          CONSUMER_KEY.toUpperCase(),
          CONSUMER_KEY.slice(0, -1),
          'k'.repeat(5000),
          '\x80\x81',
        )
        .map((value) => patch(req, { headers: [...headersWithout(req, 'x-etagere-key'), `X-Etagere-Key: ${value}`], reject: false })),
    ),
    'body framing': mutate(getBase, (req) =>
      fc
        .constantFrom(
          { h: ['Transfer-Encoding: chunked'], body: '5\r\nhello\r\n0\r\n\r\n', reject: false },
          { h: ['Transfer-Encoding: chunked'], body: '0\r\n\r\n', reject: false },
          { h: ['Content-Length: 5'], body: 'hello', reject: false },
          { h: ['Content-Length: 3', 'Transfer-Encoding: chunked'], body: '0\r\n\r\n', reject: true },
          { h: ['Transfer-Encoding: chunked', 'Content-Length: 3'], body: '0\r\n\r\n', reject: true },
          { h: ['Content-Length: 5', 'Content-Length: 6'], body: 'hello!', reject: true },
          { h: ['Content-Length: 5, 6'], body: 'hello!', reject: true },
          { h: ['Content-Length: -1'], body: '', reject: true },
          { h: ['Content-Length: abc'], body: '', reject: true },
          { h: ['Content-Length: 99999999999999999999999'], body: '', reject: true },
          { h: ['Content-Length: +5'], body: 'hello', reject: true },
          { h: ['Transfer-Encoding: gzip, chunked'], body: '0\r\n\r\n', reject: false },
          { h: ['Transfer-Encoding: chunked, gzip'], body: '', reject: true },
          { h: ['Transfer-Encoding: xchunked'], body: '', reject: true },
          { h: ['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'], body: '0\r\n\r\n', reject: false },
          { h: ['Transfer-Encoding:  chunked'], body: '0\r\n\r\n', reject: false },
          { h: ['Transfer-Encoding: chunked'], body: 'zz\r\nhello\r\n0\r\n\r\n', reject: false },
          { h: ['Transfer-Encoding: chunked'], body: `5;${'e'.repeat(20_000)}\r\nhello\r\n0\r\n\r\n`, reject: false },
          { h: ['Transfer-Encoding: chunked'], body: '5\r\nhello\r\n0\r\nTrailer: x\r\n\r\n', reject: false },
        )
        .chain((framing) =>
          fc.constantFrom('GET', 'HEAD', 'POST').map((method) => {
            const target = method === 'POST' ? req.target.replace(/^\/(api|raw|rw)?/, '/rw') : req.target;
            return patch(req, { method, target, headers: [...req.headers, ...framing.h], body: framing.body, reject: framing.reject });
          }),
        ),
    ),
    'body larger than declared': mutate(getBase, (req) =>
      fc
        .record({
          method: fc.constantFrom('GET', 'POST'),
          extra: fc.constantFrom('GARBAGE', 'x', '\r\n', 'GET /api/x HTTP/1.1\r\nHo', '\x00\x01\x02'),
        })
        .map((choice) => {
          const target = choice.method === 'POST' ? req.target.replace(/^\/(api|raw|rw)?/, '/rw') : req.target;
          return patch(req, {
            method: choice.method,
            target,
            headers: [...req.headers, 'Content-Length: 5'],
            body: `hello${choice.extra}`,
          });
        }),
    ),
    'forwarded host': mutate(getBase, (req) =>
      fc
        .record({
          host: fc.constantFrom(
            ...ATTACKER_HOSTS,
            'evil.example, etagere.example.test',
            'a b',
            'evil.example/path',
            'evil.example>; rel="x"',
            '[::1]:80',
            'user@evil.example',
          ),
          proto: fc.constantFrom('', 'https', 'javascript', 'http, https'),
          asHost: fc.boolean(),
        })
        .map((forwarded) => {
          const headers = forwarded.asHost
            ? [...withoutHost(req), `Host: ${forwarded.host}`]
            : [...req.headers, `X-Forwarded-Host: ${forwarded.host}`];
          if (forwarded.proto !== '') headers.push(`X-Forwarded-Proto: ${forwarded.proto}`);
          return patch(req, { headers, reject: false });
        }),
    ),
    'HTTP version': mutate(getBase, (req) =>
      fc
        .record({
          version: fc.constantFrom(
            'HTTP/1.0',
            'HTTP/1.0',
            '',
            'HTTP/2.0',
            'HTTP/1.2',
            'HTTP/0.9',
            'http/1.1',
            'HTTP/1.1 extra',
            'HTTP/11',
            'HTTP/1.',
            'HTTP/9.9',
          ),
          keepAlive: fc.boolean(),
        })
        .map((choice) => {
          const headers = choice.keepAlive && choice.version === 'HTTP/1.0' ? [...req.headers, 'Connection: keep-alive'] : req.headers;
          return patch(req, {
            version: choice.version,
            headers,
            reject: ['http/1.1', 'HTTP/1.1 extra', 'HTTP/11', 'HTTP/1.'].includes(choice.version),
          });
        }),
    ),
    'bare LF line endings': mutate(getBase, (r) => fc.constantFrom('\n', '\r').map((eol) => patch(r, { eol, reject: true }))),
    'Expect / Upgrade': mutate(getBase, (req) =>
      fc
        .constantFrom(
          { h: ['Expect: 100-continue'], reject: false },
          { h: ['Expect: 100-continue'], reject: false, post: true },
          { h: ['Expect: nonsense'], reject: true },
          { h: ['Expect: 200-ok'], reject: true },
          { h: ['Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA'], reject: false },
          {
            h: ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13'],
            reject: false,
          },
          { h: ['Upgrade: h2c'], reject: false },
        )
        .map((choice) => {
          const post = 'post' in choice;
          const target = post ? req.target.replace(/^\/(api|raw|rw)?/, '/rw') : req.target;
          const headers = [...headersWithout(req, 'expect'), ...choice.h, ...(post ? ['Content-Length: 2'] : [])];
          return patch(req, { method: post ? 'POST' : req.method, target, headers, body: post ? '{}' : '', reject: choice.reject });
        }),
    ),
  };
}

function headersWithoutReq(req: Req, name: string): Req {
  return { ...req, headers: headersWithout(req, name) };
}

const GARBAGE = [
  'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64',
  'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
  '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03' + '\x00'.repeat(40),
  'SSH-2.0-OpenSSH_9.6\r\n',
  'PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\nGET /api/x HTTP/1.1\r\nHost: x\r\n\r\n',
  '\r\n\r\n\r\n',
  '\r\n\r\nGET /api/x HTTP/1.1\r\nHost: x\r\n\r\n',
  'GET',
  'GET /api/x HTTP/1.1\r\nHost: x\r\n',
  'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
  '\x00\x00\x00\x00',
  '{"query": "{ viewer { login } }"}',
];

function caseArb(variant: Variant, port: number): fc.Arbitrary<Case> {
  const mutations = kinds(variant, port);
  const one = (kind: string, weight: number): fc.WeightedArbitrary<Case> => ({
    weight,
    arbitrary: fc
      .record({ req: mutations[kind]!, split: fc.array(fc.nat(), { maxLength: 3 }), halfClose: fc.integer({ min: 0, max: 9 }) })
      .map((p) => makeCase(kind, variant, [p.req], p.split, p.halfClose === 0)),
  });
  const reqAny = fc.oneof(...Object.keys(mutations).map((name) => mutations[name]!));
  return fc.oneof(
    {
      weight: 20,
      arbitrary: fc
        .record({ req: validReq(variant, port), split: fc.array(fc.nat(), { maxLength: 2 }) })
        .map((p) => makeCase('valid', variant, [p.req], p.split, false)),
    },
    one('odd method', 5),
    one('CONNECT', 1),
    one('absolute-form / asterisk / authority target', 4),
    one('traversal in path', 12),
    one('double slashes', 2),
    one('very long URL', 2),
    one('very long header', 2),
    one('many headers', 2),
    one('duplicate Host', 2),
    one('missing Host', 2),
    one('duplicate Authorization', 3),
    one('CR, LF or NUL in a header', 4),
    one('header injection (CRLF)', 2),
    one('malformed header line', 3),
    one('invalid Basic', 4),
    one('X-Etagere-Key junk', variant === 'consumers' ? 4 : 1),
    one('body framing', 6),
    one('body larger than declared', 2),
    one('forwarded host', variant === 'plain' ? 2 : 4),
    one('HTTP version', 3),
    one('bare LF line endings', 1),
    one('Expect / Upgrade', 2),
    {
      weight: 6,
      arbitrary: fc
        .record({
          reqs: fc.array(fc.oneof({ weight: 3, arbitrary: validReq(variant, port) }, { weight: 1, arbitrary: reqAny }), {
            minLength: 2,
            maxLength: 4,
          }),
          split: fc.array(fc.nat(), { maxLength: 3 }),
          halfClose: fc.boolean(),
        })
        .map((p) => makeCase('pipelined', variant, p.reqs, p.split, p.halfClose)),
    },
    {
      weight: 2,
      arbitrary: fc
        .record({
          reqs: fc.array(validReq(variant, port), { minLength: 2, maxLength: 5 }),
          leave: fc.constantFrom('after-write' as const, 'after-first-answer' as const),
        })
        .map((p): Case => ({ ...makeCase('client leaves mid-pipeline', variant, p.reqs, [], false), leave: p.leave })),
    },
    {
      weight: 4,
      arbitrary: fc
        .record({ req: fc.oneof({ weight: 3, arbitrary: validReq(variant, port) }, { weight: 1, arbitrary: reqAny }) })
        .map((p) => makeCase('half-closed', variant, [p.req], [], true)),
    },
    {
      weight: 3,
      arbitrary: fc
        .record({
          bytes: fc.oneof(
            fc.constantFrom(...GARBAGE).map(latin1),
            fc.uint8Array({ minLength: 1, maxLength: 3000 }).map((a) => Buffer.from(a)),
          ),
          terminate: fc.boolean(),
          split: fc.array(fc.nat(), { maxLength: 3 }),
        })
        .map((garbage): Case => {
          // Garbage always ends the client's side (or a blank line), so a server waiting for more is not a hang.
          const bytes = garbage.terminate ? Buffer.concat([garbage.bytes, latin1('\r\n\r\n')]) : garbage.bytes;
          const ownHosts = [...bytes.toString('latin1').matchAll(/^host:[ \t]*(.*?)[ \t]*\r?$/gim)]
            .map((match) => match[1]!)
            .filter((own) => HOST_RE.test(own))
            .map((own) => own.toLowerCase());
          return {
            kind: 'garbage / preface bytes',
            variant,
            reqs: [],
            bytes,
            splits: garbage.split,
            halfClose: true,
            chosenHosts: [],
            ownHosts,
          };
        }),
    },
  );
}

function makeCase(kind: string, variant: Variant, reqs: Req[], split: number[], halfClose: boolean): Case {
  const text = reqs.map(serialize).join('');
  const chosenHosts: string[] = [];
  const ownHosts: string[] = [];
  for (const req of reqs) {
    for (const line of req.headers) {
      const own = /^host:\s*(.*?)\s*$/i.exec(line)?.[1];
      if (own !== undefined && HOST_RE.test(own)) ownHosts.push(own.toLowerCase());
      const match = /^(?:host|x-forwarded-host):\s*(.*)$/i.exec(line);
      if (match !== null && match[1] !== undefined)
        chosenHosts.push(
          ...match[1]
            .split(',')
            .map((s) => s.trim().toLowerCase())
            .filter((s) => s.length > 0),
        );
    }
    for (const match of req.target.matchAll(/^[a-z]+:\/\/([^/]+)/gi)) chosenHosts.push(match[1]!.toLowerCase());
  }
  const bytes = latin1(text);
  // A request whose declared body is not all there needs the client's EOF to end.
  const short = reqs.some((req) => {
    const cl = req.headers.map((h) => /^content-length:\s*(\d+)\s*$/i.exec(h)).find((m) => m !== null);
    return cl !== undefined && cl !== null && Number(cl[1]) > Buffer.byteLength(req.body, 'latin1');
  });
  return {
    kind,
    variant,
    reqs,
    bytes,
    splits: split.map((n) => n % Math.max(1, bytes.length)),
    halfClose: halfClose || short,
    chosenHosts,
    ownHosts,
  };
}

// ---------------------------------------------------------------------------------------------
// Client side: raw sockets and an HTTP/1.x response parser.

interface Response {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
}

interface Parsed {
  responses: Response[];
  /** Bytes after the last complete response. */
  rest: number;
  error: string | undefined;
}

function header(res: Response, name: string): string[] {
  return res.headers.filter(([n]) => n === name).map(([, v]) => v);
}

/** Parses as many complete responses as `buf` holds; `heads[i]` marks the i-th as a HEAD answer. */
function parseResponses(buf: Buffer, heads: readonly boolean[], closed: boolean): Parsed {
  const responses: Response[] = [];
  let pos = 0;
  for (;;) {
    if (pos >= buf.length) return { responses, rest: 0, error: undefined };
    const end = buf.indexOf('\r\n\r\n', pos, 'latin1');
    if (end === -1) return { responses, rest: buf.length - pos, error: closed ? 'truncated response head' : undefined };
    const lines = buf.toString('latin1', pos, end).split('\r\n');
    const statusLine = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
    if (statusLine === null)
      return { responses, rest: buf.length - pos, error: `bad status line ${JSON.stringify((lines[0] ?? '').slice(0, 80))}` };
    const status = Number(statusLine[1]);
    const headers: Array<[string, string]> = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) return { responses, rest: buf.length - pos, error: `bad header line ${JSON.stringify(line.slice(0, 80))}` };
      headers.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
    }
    let bodyStart = end + 4;
    const res: Response = { status, headers, body: Buffer.alloc(0) };
    if (status >= 100 && status < 200) {
      pos = bodyStart; // interim (100 Continue): not a final response
      continue;
    }
    const head = heads[responses.length] === true;
    const noBody = head || status === 204 || status === 304;
    const te = header(res, 'transfer-encoding').join(',').toLowerCase();
    const cl = header(res, 'content-length');
    if (noBody) {
      pos = bodyStart;
    } else if (te.includes('chunked')) {
      const chunks: Buffer[] = [];
      for (;;) {
        const le = buf.indexOf('\r\n', bodyStart, 'latin1');
        if (le === -1) return { responses, rest: buf.length - pos, error: closed ? 'truncated chunked body' : undefined };
        const size = parseInt(buf.toString('latin1', bodyStart, le), 16);
        if (Number.isNaN(size)) return { responses, rest: buf.length - pos, error: 'bad chunk size' };
        if (size === 0) {
          const te2 = buf.indexOf('\r\n\r\n', le, 'latin1');
          if (te2 === -1) return { responses, rest: buf.length - pos, error: closed ? 'truncated chunked trailer' : undefined };
          pos = te2 + 4;
          break;
        }
        if (le + 2 + size + 2 > buf.length) return { responses, rest: buf.length - pos, error: closed ? 'truncated chunk' : undefined };
        chunks.push(buf.subarray(le + 2, le + 2 + size));
        bodyStart = le + 2 + size + 2;
      }
      res.body = Buffer.concat(chunks);
    } else if (cl.length > 0) {
      const length = Number(cl[0]);
      if (bodyStart + length > buf.length) return { responses, rest: buf.length - pos, error: closed ? 'truncated body' : undefined };
      res.body = buf.subarray(bodyStart, bodyStart + length);
      pos = bodyStart + length;
    } else {
      if (!closed) return { responses, rest: buf.length - pos, error: undefined }; // delimited by close
      res.body = buf.subarray(bodyStart);
      pos = buf.length;
    }
    responses.push(res);
    // The proxy's raw answer to a request it could not parse carries a JSON body even when that
    // request was a HEAD (the method is not known then); the connection closes, so a client
    // reads the head and drops the rest (RFC 9112 section 6.3), as here.
    if (head && header(res, 'connection').includes('close')) return { responses, rest: 0, error: undefined };
  }
}

interface Conn {
  socket: Socket;
  variant: Variant;
  buf: Buffer;
  /** The server closed (or reset) the connection. */
  closed: boolean;
  reset: boolean;
  wake: (() => void) | undefined;
}

function openConn(port: number, variant: Variant): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const conn: Conn = { socket, variant, buf: Buffer.alloc(0), closed: false, reset: false, wake: undefined };
    socket.on('data', (data: Buffer) => {
      conn.buf = conn.buf.length === 0 ? data : Buffer.concat([conn.buf, data]);
      conn.wake?.();
    });
    socket.on('end', () => {
      conn.closed = true;
      conn.wake?.();
    });
    socket.on('close', () => {
      conn.closed = true;
      conn.wake?.();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') conn.reset = true;
      conn.closed = true;
      conn.wake?.();
    });
    socket.once('connect', () => resolve(conn));
    socket.once('error', reject);
  });
}

type Outcome = 'answered' | 'closed' | 'hang' | 'left';

interface Result {
  outcome: Outcome;
  /** The start of what came back (for failure messages). */
  received: string;
  statuses: number[];
  problems: string[];
  /** The connection can carry another case. */
  reusable: boolean;
}

async function runCase(cs: Case, conn: Conn): Promise<Result> {
  const heads = cs.reqs.map((r) => r.method === 'HEAD');
  const expected = Math.max(1, cs.reqs.length);
  conn.buf = Buffer.alloc(0);
  const cuts = [...new Set(cs.splits)].filter((n) => n > 0).sort((a, b) => a - b);
  let from = 0;
  for (const cut of [...cuts, cs.bytes.length]) {
    if (conn.closed) break;
    const chunk = cs.bytes.subarray(from, cut);
    from = cut;
    if (chunk.length === 0) continue;
    await new Promise<void>((r) => conn.socket.write(chunk, () => r()));
  }
  if (cs.halfClose && !conn.closed) conn.socket.end();
  const expectedBeforeLeaving = cs.leave === 'after-write' ? 0 : cs.leave === 'after-first-answer' ? 1 : expected;

  const deadline = Date.now() + CASE_DEADLINE_MS;
  let parsed = parseResponses(conn.buf, heads, conn.closed);
  let timer: NodeJS.Timeout | undefined;
  let hung = false;
  while (!conn.closed && parsed.error === undefined && parsed.responses.length < expectedBeforeLeaving) {
    const left = deadline - Date.now();
    if (left <= 0) {
      hung = true;
      break;
    }
    await new Promise<void>((resolve) => {
      conn.wake = resolve;
      timer = setTimeout(resolve, left);
    });
    conn.wake = undefined;
    clearTimeout(timer);
    parsed = parseResponses(conn.buf, heads, conn.closed);
  }
  parsed = parseResponses(conn.buf, heads, conn.closed);
  if (cs.leave !== undefined && !hung) {
    // The proxy must let go of every request of the connection, answered or still queued (checked
    // at the end through its in-flight count).
    conn.socket.destroy();
    const problems = parsed.responses.flatMap((res, i) => checkResponse(cs, res, cs.reqs[i], heads[i] === true));
    return {
      outcome: 'left',
      received: conn.buf.toString('latin1', 0, 400),
      statuses: parsed.responses.map((r) => r.status),
      problems,
      reusable: false,
    };
  }

  const problems: string[] = [];
  const { responses } = parsed;
  if (parsed.error !== undefined && !conn.reset) problems.push(`unparseable answer: ${parsed.error}`);
  for (const [index, res] of responses.entries()) {
    const req = cs.reqs[index];
    problems.push(...checkResponse(cs, res, req, heads[index] === true));
  }
  // Plainly valid requests are answered, in order, by the proxy's handler: never only closed, and
  // never by the connection-level error meant for a later request of the pipeline.
  for (const [index, req] of cs.reqs.entries()) {
    if (!req.valid) break;
    const res = responses[index];
    if (res === undefined) {
      if (!hung) problems.push(`valid request ${index + 1} of ${cs.reqs.length} was closed without an answer`);
      break;
    }
    if (/malformed HTTP request|header fields too large/.test(res.body.toString('latin1')))
      problems.push(`valid request ${index + 1} got the parse error of another request`);
    const clientCloses = req.headers.some((h) => /^connection:\s*close/i.test(h));
    const serverCloses = header(res, 'connection').some((v) => /close/i.test(v));
    // (Node closes after a request that asked for 100 Continue without getting one: it cannot know
    // whether the body is still coming. A pipelined one never gets it: see src/main/connections.ts.)
    const expects = req.headers.some((h) => /^expect:/i.test(h));
    if (serverCloses && !clientCloses && !expects && res.status < 400)
      problems.push(`valid request ${index + 1} got a ${res.status} that closes the connection`);
    if (clientCloses || serverCloses) break; // nothing more is read (or answered) on this connection
  }
  const outcome: Outcome = hung ? 'hang' : responses.length > 0 ? 'answered' : 'closed';
  if (hung) problems.push(`no answer and no close within ${CASE_DEADLINE_MS} ms`);
  const last = responses.at(-1);
  const reusable =
    !hung &&
    !conn.closed &&
    !cs.halfClose &&
    parsed.rest === 0 &&
    responses.length === expected &&
    last !== undefined &&
    !header(last, 'connection').some((v) => /close/i.test(v)) &&
    cs.reqs.every((r) => r.valid && r.version === 'HTTP/1.1' && !r.headers.some((h) => /^connection:\s*close/i.test(h)));
  const received = conn.buf.toString('latin1', 0, process.env.FUZZ_ONLY === undefined ? 400 : 100_000);
  if (reusable) conn.buf = Buffer.alloc(0); // every byte was part of an answer; anything later is unsolicited
  return { outcome, received, statuses: responses.map((r) => r.status), problems, reusable };
}

/** Origins a Link or Location may point at, per variant. */
let allowedOrigins: Record<Variant, Set<string>>;

function checkResponse(cs: Case, res: Response, req: Req | undefined, head: boolean): string[] {
  const out: string[] = [];
  if (res.status >= 500) out.push(`${res.status} for client input (the upstream never fails here)`);
  if (req?.reject === true && res.status < 400) out.push(`${res.status} for a request that must be refused`);
  if (res.status >= 400 && res.status < 500 && !head) {
    const type = header(res, 'content-type')[0] ?? '';
    let shapeOk = false;
    try {
      const body = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
      shapeOk = typeof body.message === 'string' && typeof body.documentation_url === 'string' && Object.keys(body).length === 2;
    } catch {
      shapeOk = false;
    }
    if (!/^application\/json/.test(type) || !shapeOk)
      out.push(`${res.status} without a GitHub-shaped JSON body (${JSON.stringify(res.body.toString('latin1').slice(0, 80))})`);
  }
  for (const name of ['link', 'location']) {
    for (const value of header(res, name)) {
      const urls = name === 'link' ? [...value.matchAll(/<([^>]*)>/g)].map((m) => m[1]!) : [value];
      if (name === 'link' && urls.length !== 2) out.push(`Link header mangled: ${JSON.stringify(value.slice(0, 200))}`);
      for (const href of urls) {
        let url: URL;
        try {
          url = new URL(href);
        } catch {
          out.push(`${name} URL does not parse: ${JSON.stringify(href.slice(0, 120))}`);
          continue;
        }
        if (cs.variant === 'forwarded') {
          // trust_forwarded: a client-chosen host is expected, but only a syntactically valid one.
          if (!HOST_RE.test(url.host) || !/^https?:$/.test(url.protocol) || url.username !== '')
            out.push(`${name} points at an invalid host: ${href.slice(0, 120)}`);
          continue;
        }
        // Zero configuration: the request's own Host (a plain host[:port]) over http, never a forwarded one.
        if (cs.variant === 'plain' && url.protocol === 'http:' && url.username === '' && ownHostOf(cs, url)) continue;
        if (cs.chosenHosts.includes(url.host.toLowerCase()) && !allowedOrigins[cs.variant].has(url.origin))
          out.push(`${name} points at a client-chosen host: ${href.slice(0, 120)}`);
        else if (!allowedOrigins[cs.variant].has(url.origin))
          out.push(`${name} points outside the proxy and upstream: ${href.slice(0, 120)}`);
      }
    }
  }
  return out;
}

/** Whether `url`'s host is one of the case's own Host values (as URL parsing normalises it: no default port). */
function ownHostOf(cs: Case, url: URL): boolean {
  return (cs.ownHosts ?? []).some((own) => {
    try {
      return new URL(`http://${own}`).host === url.host;
    } catch {
      return false;
    }
  });
}

describe('wire fuzzing (seeded, raw TCP)', () => {
  /** One recording upstream per proxy, so that what reached it is known per variant. */
  const upstreams = {} as Record<Variant, Upstream>;
  const proxies = {} as Record<Variant, TestProxy>;
  const ports = {} as Record<Variant, number>;
  const crashes: string[] = [];
  const onCrash = (err: unknown): void => {
    crashes.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  };

  beforeAll(async () => {
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    for (const variant of VARIANTS) upstreams[variant] = await startRecordingUpstream();
    const ups = (upstream: Upstream, pool: boolean, root: boolean) => [
      { name: 'api', prefix: '/api', url: `${upstream.url}/base`, strip_prefix: true, token_pool: pool, timeouts: { headers_ms: 3_000 } },
      {
        name: 'rw',
        prefix: '/rw',
        url: `${upstream.url}/pt`,
        strip_prefix: true,
        pass_through: true,
        cache: { policy: 'none' },
        timeouts: { headers_ms: 3_000 },
      },
      root
        ? {
            name: 'root',
            prefix: '/',
            url: `${upstream.url}/root`,
            token_pool: pool,
            cache: { policy: 'none' },
            timeouts: { headers_ms: 3_000 },
          }
        : { name: 'raw', prefix: '/raw', url: `${upstream.url}/raw-base`, cache: { policy: 'none' }, timeouts: { headers_ms: 3_000 } },
    ];
    proxies.plain = await startTestProxy({ upstreams: ups(upstreams.plain, false, false) });
    proxies.consumers = await startTestProxy({
      public_url: PUBLIC_URL,
      upstreams: ups(upstreams.consumers, true, true),
      pool: {
        tokens: [
          { name: 'fuzz-a', value: 'ghp_fuzzpoolA000000000000000000000000' },
          { name: 'fuzz-b', value: 'ghp_fuzzpoolB000000000000000000000000' },
        ],
        probe_at_start: false,
        per_token_concurrency: 100,
        max_concurrency: 200,
        // The wire is fuzzed here, not pacing: paced at GitHub's points, the flood would wait for points (hangs) and end spent (429).
        points_per_minute: 1_000_000,
      },
      consumers: { enabled: true, keys: [{ name: 'web', value: CONSUMER_KEY }] },
    });
    proxies.forwarded = await startTestProxy({ trust_forwarded: true, upstreams: ups(upstreams.forwarded, false, false) });
    for (const variant of VARIANTS) ports[variant] = Number(new URL(proxies[variant].url).port);
    const origin = (v: Variant): string => new URL(upstreams[v].url).origin;
    allowedOrigins = {
      plain: new Set([origin('plain'), new URL(proxies.plain.url).origin]),
      consumers: new Set([origin('consumers'), new URL(PUBLIC_URL).origin]),
      forwarded: new Set([origin('forwarded')]),
    };
  });

  afterAll(async () => {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    for (const variant of VARIANTS) await proxies[variant]?.close();
    for (const variant of VARIANTS) await upstreams[variant]?.close();
  });

  it(
    `survives ${CASES} seeded cases: no hang, no crash, no 5xx, JSON 4xx, no escape from the upstream base path`,
    { timeout: 180_000 },
    async () => {
      const started = Date.now();
      const variantArb = fc.constantFrom(...VARIANTS).chain((v) => caseArb(v, ports[v]));
      const all = fc.sample(variantArb, { seed: SEED, numRuns: CASES });
      // FUZZ_ONLY=n replays case #n alone (numbers as in failure messages), printing what crossed the wire.
      const only = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY);
      const cases = only === undefined ? all : [all[only]!];
      if (only !== undefined)
        console.log(`case #${only}:`, JSON.stringify(cases[0]!.bytes.toString('latin1')), cases[0]!.halfClose ? '+ EOF' : '');

      /** The first failing cases in full; `failed` counts them all. */
      const failures: string[] = [];
      let failed = 0;
      const counts = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, closed: 0, hang: 0, left: 0 };
      const closedByKind = new Map<string, number>();
      const closedSamples: string[] = [];
      const statusByKind = new Map<string, Map<string, number>>();
      let run = 0;
      let reused = 0;
      let next = 0;

      const worker = async (): Promise<void> => {
        const idle = new Map<Variant, Conn>();
        for (;;) {
          if (Date.now() - started > TIME_BUDGET_MS) break;
          const caseIndex = next++;
          if (caseIndex >= cases.length) break;
          const cs = cases[caseIndex]!;
          let conn = idle.get(cs.variant);
          idle.delete(cs.variant);
          // Any case may run on a connection that already served plainly valid requests.
          const canReuse = conn !== undefined && !conn.closed;
          if (canReuse && conn!.buf.length > 0) {
            failed++;
            failures.push(
              `[${cs.variant}] unsolicited bytes on an idle keep-alive connection: ${JSON.stringify(conn!.buf.toString('latin1', 0, 200))}`,
            );
          }
          if (canReuse) reused++;
          else {
            conn?.socket.destroy();
            conn = await openConn(ports[cs.variant], cs.variant);
          }
          const result = await runCase(cs, conn!);
          run++;
          if (result.outcome === 'hang') counts.hang++;
          else if (result.outcome === 'left') counts.left++;
          else if (result.outcome === 'closed') {
            counts.closed++;
            closedByKind.set(cs.kind, (closedByKind.get(cs.kind) ?? 0) + 1);
            closedSamples.push(`${cs.kind}: ${JSON.stringify(cs.bytes.toString('latin1', 0, 80))}`);
          } else {
            const cls = `${Math.floor(result.statuses[0]! / 100)}xx` as '2xx' | '3xx' | '4xx' | '5xx';
            counts[cls]++;
          }
          const byKind = statusByKind.get(cs.kind) ?? new Map<string, number>();
          const label = result.outcome === 'answered' ? String(result.statuses[0]) : result.outcome;
          if (result.outcome === 'left') conn = undefined;
          byKind.set(label, (byKind.get(label) ?? 0) + 1);
          statusByKind.set(cs.kind, byKind);
          if (only !== undefined) console.log(`got (${result.outcome}):`, JSON.stringify(result.received));
          if (result.problems.length > 0) failed++;
          if (result.problems.length > 0 && failures.length < 40) {
            failures.push(
              `#${caseIndex} [${cs.variant}] ${cs.kind}: ${result.problems.join('; ')}\n    sent ${JSON.stringify(cs.bytes.toString('latin1').slice(0, 300))}${cs.halfClose ? ' + EOF' : ''}\n    got ${JSON.stringify(result.received)}${conn?.closed === true ? ' + close' : ''}`,
            );
          }
          if (result.reusable) idle.set(cs.variant, conn!);
          else conn?.socket.destroy();
        }
        for (const idleConn of idle.values()) idleConn.socket.destroy();
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      const elapsed = (Date.now() - started) / 1000;

      // Every request an upstream saw stays under its base path (and carries nothing it should not).
      const escapes = VARIANTS.flatMap((variant) =>
        upstreams[variant].seen
          .map((s) => ({ s, why: upstreamRequestProblem(s, new URL(upstreams[variant].url).host, variant === 'consumers') }))
          .filter((e) => e.why !== undefined),
      );
      const seen = VARIANTS.reduce((n, v) => n + upstreams[v].seen.length, 0);
      const malformed = VARIANTS.flatMap((v) => upstreams[v].malformed);

      const closedList = [...closedByKind.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `${k} ${n}`)
        .join(', ');
      console.log(
        `fuzz: ${run} cases (seed ${SEED}, ${reused} on reused keep-alive connections) in ${elapsed.toFixed(1)} s | answered 2xx ${counts['2xx']}, 3xx ${counts['3xx']}, 4xx ${counts['4xx']}, 5xx ${counts['5xx']} | closed by server without an answer ${counts.closed}${closedList === '' ? '' : ` (${closedList})`} | client left mid-pipeline ${counts.left} | crashes ${crashes.length}, hangs ${counts.hang} | upstream requests ${seen}, outside their base path ${escapes.length}, malformed ${malformed.length}`,
      );
      if (process.env.FUZZ_VERBOSE !== undefined) {
        for (const [index, bytes] of closedSamples.entries()) if (index < 20) console.log(`  closed without an answer: ${bytes}`);
        for (const [kind, byStatus] of statusByKind)
          console.log(`  ${kind}: ${[...byStatus.entries()].map(([s, n]) => `${s}=${n}`).join(' ')}`);
        const why = new Map<string, string[]>();
        for (const escape of escapes)
          why.set(escape.why!, [...(why.get(escape.why!) ?? []), `${escape.s.method} ${escape.s.url.slice(0, 100)}`]);
        for (const [reason, examples] of why)
          console.log(`  escape ${reason}: ${examples.length} e.g. ${examples.slice(0, 5).join(' | ')}`);
        console.log('  malformed upstream:', malformed.slice(0, 5));
      }

      // The proxies are still healthy: nothing left in flight, a normal request is answered.
      const health: string[] = [];
      for (const variant of VARIANTS) {
        await until(() => proxies[variant].inFlight() === 0, 10_000, `${variant}: requests to finish`).catch(() =>
          health.push(`${variant}: ${proxies[variant].inFlight()} requests still counted in flight`),
        );
        const headers = variant === 'consumers' ? { 'x-etagere-key': CONSUMER_KEY } : {};
        const res = await request(`${proxies[variant].url}/api/repos/octocat/hello-world?after=fuzz`, { headers });
        await res.body.text();
        if (res.statusCode !== 200) health.push(`${variant}: a normal request after the fuzzing got ${res.statusCode}`);
      }
      const errorLogs = VARIANTS.flatMap((variant) =>
        proxies[variant]
          .logs()
          .filter((l) => typeof l.level === 'number' && l.level >= 50)
          .map((l) => `${variant}: ${String(l.msg)}`),
      );

      expect(crashes, 'uncaught exceptions / unhandled rejections').toEqual([]);
      expect(failures, `${failed} failing cases`).toEqual([]);
      expect(
        escapes.slice(0, 20).map((e) => `${e.s.method} ${e.s.url.slice(0, 200)}: ${e.why}`),
        'upstream requests outside their base path, with a foreign Host or carrying a consumer key',
      ).toEqual([]);
      expect(malformed.slice(0, 20), 'requests the upstream could not parse').toEqual([]);
      expect(errorLogs.slice(0, 20), 'error-level log lines').toEqual([]);
      expect(health, 'proxy health after the fuzzing').toEqual([]);
      expect(run, 'cases run within the time budget').toBeGreaterThanOrEqual(Math.min(cases.length, 2_000));
    },
  );
});
