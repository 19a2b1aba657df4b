/**
 * Fault injection on the fake upstream: the /__fake/faults contract, the rule semantics, what
 * each kind puts on the wire (seen by a raw TCP client, so a FIN and a RST can be told apart),
 * and the --faults CLI flag.
 */
import { connect } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Faults, FaultSpecError, parseFaultRule, parseFaultSpec } from '../../fake-github/faults.js';
import { startFakeUpstream } from '../../fake-github/index.js';
import { runCli } from '../helpers/cli.js';
import { get, post, until, useFake, type ErrorBody } from './helpers.js';

interface Raw {
  /** Every byte received. */
  data: Buffer;
  /** How the connection ended: 'end' (FIN), or the socket error code (ECONNRESET...). */
  ended: string;
  /** ms from the request until the first byte (undefined: none came). */
  firstByteMs: number | undefined;
  /** ms from the first byte until the connection ended. */
  afterFirstMs: number;
  status: number | undefined;
  headers: Record<string, string>;
  /** Bytes after the header block (all of them when no header block was completed). */
  body: Buffer;
  headComplete: boolean;
}

/** One request over a fresh TCP connection (Connection: close), recorded byte for byte. */
function raw(base: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  const target = new URL(base);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const started = Date.now();
    let first: number | undefined;
    let settled = false;
    const socket = connect(Number(target.port), target.hostname);
    const finish = (ended: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      const data = Buffer.concat(chunks);
      const end = data.indexOf('\r\n\r\n');
      const head = end < 0 ? '' : data.subarray(0, end).toString('latin1');
      const lines = head.split('\r\n');
      const headerFields: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headerFields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const statusLine = /^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '');
      resolve({
        data,
        ended,
        firstByteMs: first === undefined ? undefined : first - started,
        afterFirstMs: Date.now() - (first ?? started),
        status: end < 0 || statusLine === null ? undefined : Number(statusLine[1]),
        headers: headerFields,
        body: end < 0 ? data : data.subarray(end + 4),
        headComplete: end >= 0,
      });
    };
    // Every request here is bounded: a hang fails the test instead of stalling it.
    const deadline = setTimeout(() => finish('client-deadline'), 10_000);
    socket.on('data', (chunk: Buffer) => {
      first ??= Date.now();
      chunks.push(chunk);
    });
    socket.on('end', () => finish('end'));
    socket.on('error', (err: NodeJS.ErrnoException) => finish(err.code ?? 'error'));
    socket.on('close', () => finish('end'));
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: ${target.host}\r\nconnection: close\r\n${extra}\r\n`);
  });
}

/** What GET, POST and DELETE /__fake/faults answer: the rules, each with its injected count. */
interface FaultsBody {
  faults: Array<Record<string, unknown>>;
}

const setFaults = async (url: string, faults: unknown[]) => {
  const response = await post(`${url}/__fake/faults`, { faults });
  expect(response.status, response.text).toBe(200);
  return response.json<FaultsBody>();
};

const REPO = '/repos/octocat/hello-world';
/**
 * How a reset looks to a Node client. On Linux a RST that follows data the client has not read
 * yet reads as end-of-stream (the kernel reports the closed socket before its error), so a reset
 * is ECONNRESET or an end; either way the answer stops short, which is what the tests check.
 */
const RESET = /^(ECONNRESET|EPIPE|end)$/;

describe('fake upstream: fault rules', () => {
  it('parses rules with their defaults', () => {
    expect(parseFaultRule({ kind: 'slow-headers' })).toMatchObject({ kind: 'slow-headers', path: '/', rate: 1, count: null, ms: 30_000 });
    expect(parseFaultRule({ kind: 'slow-body' }).ms).toBe(5_000);
    expect(parseFaultRule({ kind: 'status' }).status).toBe(500);
    expect(parseFaultRule({ kind: 'huge' }).bytes).toBe(8 * 1024 * 1024);
    expect(parseFaultRule({ kind: 'status', status: 503, path: '/repos', rate: 0.5, count: 3 })).toMatchObject({
      status: 503,
      path: '/repos',
      rate: 0.5,
      count: 3,
    });
  });

  it('parses the --faults spec: kind:rate entries, a bare kind means rate 1', () => {
    const rules = parseFaultSpec('reset-body:0.05,status:0.02,slow-headers:0.01,refuse');
    expect(rules.map((r) => [r.kind, r.rate])).toEqual([
      ['reset-body', 0.05],
      ['status', 0.02],
      ['slow-headers', 0.01],
      ['refuse', 1],
    ]);
    for (const bad of ['', 'nope:0.1', 'status:2', 'status:-0.1', 'status:abc', 'status:0.1,,refuse', 'status:0.1:3']) {
      expect(() => parseFaultSpec(bad), bad).toThrow(FaultSpecError);
    }
  });

  it('first matching rule wins; rates share one roll; counts and path prefixes limit a rule', () => {
    let roll = 0;
    const faults = new Faults(() => roll);
    faults.set([
      parseFaultRule({ kind: 'refuse', path: '/repos', rate: 0.25, count: 1 }),
      parseFaultRule({ kind: 'status', rate: 0.5 }),
      parseFaultRule({ kind: 'truncate', rate: 0 }),
    ]);
    roll = 0.1;
    expect(faults.pick('/users/bob')?.kind).toBe('status'); // /repos rule does not match
    expect(faults.pick('/repos/a/b')?.kind).toBe('refuse');
    expect(faults.pick('/repos/a/b')?.kind).toBe('status'); // refuse used its one injection
    roll = 0.6;
    expect(faults.pick('/repos/a/b')).toBeNull(); // past status's 0.5; rate 0 never fires
    roll = 0.99;
    expect(faults.pick('/users/bob')).toBeNull();
    expect(faults.describe().map((r) => r.injected)).toEqual([1, 2, 0]);
  });
});

describe('fake upstream: /__fake/faults', () => {
  const fake = useFake({ anonymousLimit: 100_000 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('POST replaces the rules, GET shows them with injected counts, DELETE and reset clear them', async () => {
    const set = await setFaults(fake.url, [
      { kind: 'status', status: 503, count: 2 },
      { kind: 'huge', path: '/users', bytes: 4096, rate: 0.5 },
    ]);
    expect(set.faults).toEqual([
      { kind: 'status', path: '/', rate: 1, count: 2, status: 503, injected: 0 },
      { kind: 'huge', path: '/users', rate: 0.5, count: null, bytes: 4096, injected: 0 },
    ]);
    expect((await get(`${fake.url}${REPO}`)).status).toBe(503);
    expect((await get(`${fake.url}${REPO}`)).status).toBe(503);
    expect((await get(`${fake.url}${REPO}`)).status).toBe(200); // count used up
    const listed = await get(`${fake.url}/__fake/faults`);
    expect(listed.status).toBe(200);
    expect(listed.headers.get('cache-control')).toBe('no-store');
    expect(listed.json<FaultsBody>().faults[0]!.injected).toBe(2);

    await setFaults(fake.url, [{ kind: 'status' }]);
    const del = await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' });
    expect(await del.json()).toEqual({ faults: [] });
    expect((await get(`${fake.url}${REPO}`)).status).toBe(200);

    await setFaults(fake.url, [{ kind: 'status' }]);
    await post(`${fake.url}/__fake/reset`, {});
    expect((await get(`${fake.url}/__fake/faults`)).json()).toEqual({ faults: [] });
    expect((await get(`${fake.url}${REPO}`)).status).toBe(200);
  });

  it('bad input gets 400 JSON and changes nothing; a wrong method gets 405', async () => {
    await setFaults(fake.url, [{ kind: 'status', status: 502 }]);
    const bad: Array<[unknown, boolean?]> = [
      ['{not json', true],
      [[]],
      [{}],
      [{ faults: {} }],
      [{ faults: [], extra: 1 }],
      [{ faults: ['status'] }],
      [{ faults: [{ kind: 'explode' }] }],
      [{ faults: [{ kind: 'status', status: 418 }] }],
      [{ faults: [{ kind: 'status', rate: 1.5 }] }],
      [{ faults: [{ kind: 'status', rate: '0.5' }] }],
      [{ faults: [{ kind: 'status', count: -1 }] }],
      [{ faults: [{ kind: 'status', count: 1.5 }] }],
      [{ faults: [{ kind: 'slow-headers', ms: -5 }] }],
      [{ faults: [{ kind: 'huge', bytes: 1 }] }],
      [{ faults: [{ kind: 'status', path: 'repos' }] }],
      [{ faults: [{ kind: 'status', path: '/a?b' }] }],
      [{ faults: [{ kind: 'status', colour: 'red' }] }],
      [{ faults: Array.from({ length: 101 }, () => ({ kind: 'status' })) }],
      [{ faults: [], seed: -1 }],
      [{ faults: [], seed: 2 ** 32 }],
      [{ faults: [], seed: '7' }],
      [{ faults: [], seed: 1.5 }],
    ];
    for (const [body, isRaw] of bad) {
      const response = await post(`${fake.url}/__fake/faults`, body, isRaw === true);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(typeof response.json<ErrorBody>().message).toBe('string');
    }
    const put = await fetch(`${fake.url}/__fake/faults`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST, DELETE');
    expect((await get(`${fake.url}/__fake/faults`)).json<FaultsBody>().faults).toHaveLength(1);
    expect((await get(`${fake.url}${REPO}`)).status).toBe(502);
  });

  it('never faults control requests; faults cyclist requests; path prefixes select', async () => {
    await setFaults(fake.url, [
      { kind: 'status', path: '/bicyclists' },
      { kind: 'refuse', path: '/users/' },
    ]);
    expect((await get(`${fake.url}/bicyclists/helsinki`)).status).toBe(500);
    expect((await raw(fake.url, '/users/bob')).data.length).toBe(0);
    expect((await get(`${fake.url}${REPO}`)).status).toBe(200);
    await setFaults(fake.url, [{ kind: 'refuse' }]);
    expect((await get(`${fake.url}/__fake/stats`)).status).toBe(200);
    expect((await get(`${fake.url}/__fake/faults`)).json<FaultsBody>().faults[0]!.injected).toBe(0);
  });

  it('reset: a TCP reset with nothing written', async () => {
    await setFaults(fake.url, [{ kind: 'reset' }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.data.length).toBe(0);
    expect(answer.ended).toMatch(/^(ECONNRESET|end)$/);
    expect((await get(`${fake.url}/__fake/faults`)).json<FaultsBody>().faults[0]!.injected).toBe(1);
  });

  it('a seed makes the dice reproducible: the same requests are faulted each time', async () => {
    const faulted = async (): Promise<number[]> => {
      const body = { faults: [{ kind: 'status', status: 503, rate: 0.3 }], seed: 1234 };
      expect((await post(`${fake.url}/__fake/faults`, body)).status).toBe(200);
      const statuses = [];
      for (let i = 0; i < 40; i++) statuses.push((await get(`${fake.url}${REPO}`)).status);
      return statuses.flatMap((status, i) => (status === 503 ? [i] : []));
    };
    const first = await faulted();
    expect(first.length).toBeGreaterThan(3);
    expect(first.length).toBeLessThan(30);
    expect(await faulted()).toEqual(first);
  });

  it('refuse: the connection closes with nothing written', async () => {
    await setFaults(fake.url, [{ kind: 'refuse' }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.data.length).toBe(0);
    expect(answer.firstByteMs).toBeUndefined();
  });

  it('reset-headers: part of a head, then a TCP reset', async () => {
    await setFaults(fake.url, [{ kind: 'reset-headers' }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.data.toString('latin1')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.headComplete).toBe(false);
    expect(answer.ended).toMatch(RESET);
  });

  it('reset-body: the real head and content-length, half the body, then a reset', async () => {
    const normal = await raw(fake.url, REPO);
    await setFaults(fake.url, [{ kind: 'reset-body' }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-length']).toBe(normal.headers['content-length']);
    expect(answer.headers.etag).toBe(normal.headers.etag);
    expect(answer.body.length).toBe(Math.floor(normal.body.length / 2));
    expect(normal.body.subarray(0, answer.body.length).equals(answer.body)).toBe(true);
    expect(answer.ended).toMatch(RESET);
  });

  it('truncate: the real head, part of the body, then a clean close (FIN) short of content-length', async () => {
    const normal = await raw(fake.url, REPO);
    await setFaults(fake.url, [{ kind: 'truncate' }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.status).toBe(200);
    expect(Number(answer.headers['content-length'])).toBe(normal.body.length);
    expect(answer.body.length).toBeGreaterThan(0);
    expect(answer.body.length).toBeLessThan(normal.body.length);
    expect(answer.ended).toBe('end');
  });

  it('a body fault answers a conditional request in full, so there is a body to cut', async () => {
    const normal = await raw(fake.url, REPO);
    expect((await raw(fake.url, REPO, { 'if-none-match': normal.headers.etag! })).status).toBe(304);
    await setFaults(fake.url, [{ kind: 'truncate' }]);
    const answer = await raw(fake.url, REPO, { 'if-none-match': normal.headers.etag! });
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBeGreaterThan(0);
  });

  it('slow-headers: no byte for `ms`, then the normal answer', async () => {
    await setFaults(fake.url, [{ kind: 'slow-headers', ms: 300 }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.firstByteMs).toBeGreaterThanOrEqual(280);
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBe(Number(answer.headers['content-length']));
  });

  it('slow-body: the head at once, the body dripped over `ms`, complete in the end', async () => {
    const normal = await raw(fake.url, REPO);
    await setFaults(fake.url, [{ kind: 'slow-body', ms: 400 }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.firstByteMs).toBeLessThan(250);
    expect(answer.afterFirstMs).toBeGreaterThanOrEqual(350);
    expect(answer.status).toBe(200);
    expect(answer.body.equals(normal.body)).toBe(true);
  });

  it('status: a GitHub-shaped JSON error with the chosen status (head only for HEAD)', async () => {
    for (const status of [500, 502, 503, 504]) {
      await setFaults(fake.url, [{ kind: 'status', status }]);
      const response = await get(`${fake.url}${REPO}`);
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(Object.keys(response.json<ErrorBody>()).sort()).toEqual(['documentation_url', 'message']);
    }
    const head = await raw(fake.url, REPO, {}, 'HEAD');
    expect(head.status).toBe(504);
    expect(head.body.length).toBe(0);
  });

  it('bad-json: 200 with normal headers (etag, cache-control, right content-length) and a body that is not JSON', async () => {
    await setFaults(fake.url, [{ kind: 'bad-json' }]);
    for (const path of [REPO, '/users/nobody-here']) {
      const answer = await raw(fake.url, path);
      expect(answer.status).toBe(200);
      expect(answer.headers.etag).toMatch(/^W\/"/);
      expect(answer.headers['cache-control']).toMatch(/max-age=60/);
      expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(Number(answer.headers['content-length'])).toBe(answer.body.length);
      expect(() => JSON.parse(answer.body.toString('utf8'))).toThrow();
    }
  });

  it('huge: 200 with a valid, cacheable JSON body of `bytes` bytes', async () => {
    await setFaults(fake.url, [{ kind: 'huge', bytes: 100_000 }]);
    const answer = await raw(fake.url, REPO);
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBe(100_000);
    expect(Number(answer.headers['content-length'])).toBe(100_000);
    expect(answer.headers['cache-control']).toBe('public, max-age=60, s-maxage=60');
    expect(answer.headers.etag).toMatch(/^W\/"/);
    expect(JSON.parse(answer.body.toString('utf8'))).toHaveProperty('huge');
  });

  it('a rate of 0.5 faults about half of the requests', async () => {
    await setFaults(fake.url, [{ kind: 'status', status: 503, rate: 0.5 }]);
    const statuses = await Promise.all(Array.from({ length: 400 }, () => get(`${fake.url}/bicyclists/spb`).then((r) => r.status)));
    const faulted = statuses.filter((s) => s === 503).length;
    expect(faulted).toBeGreaterThan(140); // 200 expected; far outside chance otherwise
    expect(faulted).toBeLessThan(260);
    expect((await get(`${fake.url}/__fake/faults`)).json<FaultsBody>().faults[0]!.injected).toBe(faulted);
  });
});

describe('fake upstream: faults and close()', () => {
  it('close() resolves promptly with slow answers under way', async () => {
    const fake = await startFakeUpstream({ faults: [{ kind: 'slow-body', path: '/bicyclists' }, { kind: 'slow-headers' }] });
    const pending = [raw(fake.url, REPO), raw(fake.url, '/bicyclists/malaga')];
    // Both requests have arrived: the slow-body one started its answer, the other waits.
    await until(async () => (fake.stats().maxInFlight >= 1 ? true : undefined));
    await until(() => new Promise<true | undefined>((r) => fake.server.getConnections((_e, n) => r(n >= 2 ? true : undefined))));
    const started = Date.now();
    await fake.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    const results = await Promise.all(pending);
    for (const result of results) expect(result.ended).not.toBe('client-deadline');
  });

  it('startFakeUpstream rejects invalid rules', async () => {
    await expect(startFakeUpstream({ faults: [{ kind: 'status', rate: 7 }] })).rejects.toThrow(FaultSpecError);
  });
});

describe('etagere fake-upstream --faults', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });

  it('starts with the rules of the flag', async () => {
    const cli = runCli(['fake-upstream', '--port', '0', '--faults', 'status:1,reset-body:0.5']);
    stop = async () => {
      cli.child.kill('SIGTERM');
      await cli.exited;
    };
    await until(async () => (/listening on (http:\/\/\S+)/.test(cli.stdout()) ? true : undefined), 15_000, 25);
    const url = /listening on (http:\/\/\S+)/.exec(cli.stdout())![1]!;
    expect(cli.stdout()).toContain('fault injection on: status:1, reset-body:0.5');
    const rules = (await get(`${url}/__fake/faults`)).json<FaultsBody>().faults;
    expect(rules.map((r) => [r.kind, r.rate])).toEqual([
      ['status', 1],
      ['reset-body', 0.5],
    ]);
    expect((await get(`${url}${REPO}`)).status).toBe(500);
  });

  it('rejects a bad spec with a message and exit code 2', async () => {
    const cli = runCli(['fake-upstream', '--port', '0', '--faults', 'explode:0.5']);
    const { code } = await cli.exited;
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(/--faults: .*kind must be one of/);
  });
});
