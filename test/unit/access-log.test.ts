import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { DestinationStream } from 'pino';
import { ACCESS_FLUSH_MS, AccessLog, createLogger } from '../../src/platform/log/logger.js';

function capture(level = 'info') {
  let text = '';
  const dest = new Writable({
    write(chunk: Buffer, _e, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger({ level, destination: dest as unknown as DestinationStream });
  const log = new AccessLog(logger);
  return { access: (fields: Parameters<AccessLog['write']>[0]) => log.write(fields), log, text: () => text };
}

const base = {
  reqId: 'abc-1',
  method: 'GET',
  path: '/repos/a/b',
  upstream: 'github',
  status: 200,
  cache: 'hit',
  upstreamStatus: undefined,
  durationMs: 0.123,
  bytes: 5321,
  aborted: false,
};

describe('access log', () => {
  it('writes one valid JSON line in pino shape', () => {
    const captured = capture();
    captured.access(base);
    const lines = captured.text().trim().split('\n');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 'info',
      service: 'etagere',
      msg: 'request',
      reqId: 'abc-1',
      method: 'GET',
      path: '/repos/a/b',
      upstream: 'github',
      status: 200,
      cache: 'hit',
      durationMs: 0.123,
      bytes: 5321,
    });
    expect(typeof line.time).toBe('number');
    expect(line).not.toHaveProperty('upstreamStatus');
    expect(line).not.toHaveProperty('aborted');
  });
  it('escapes hostile paths and masks credentials in the query', () => {
    const captured = capture();
    const secret = 'ghp_secretsecretsecret';
    captured.access({ ...base, path: `/x"y\\z?access_token=${secret}&a=1`, upstreamStatus: 304, aborted: true, cache: undefined });
    const line = JSON.parse(captured.text()) as Record<string, unknown>;
    expect(line.path).toBe('/x"y\\z?access_token=[REDACTED]&a=1');
    expect(line).toMatchObject({ upstreamStatus: 304, aborted: true });
    expect(line).not.toHaveProperty('cache');
    expect(captured.text()).not.toContain(secret);
  });
  it('escapes method, upstream and route values (quoted once and remembered), also past the memo cap', () => {
    const captured = capture();
    const hostile = { ...base, method: 'GE"T', upstream: 'git\\hub', route: '/repos/"x"\n' };
    captured.access(hostile);
    captured.access(hostile); // the second line reads the remembered literals
    for (let i = 0; i < 5000; i++) captured.access({ ...base, route: `/r/${i}"` });
    const lines = captured
      .text()
      .trim()
      .split('\n')
      .map((text) => JSON.parse(text) as Record<string, unknown>);
    expect(lines).toHaveLength(5002);
    for (const line of lines.slice(0, 2)) expect(line).toMatchObject({ method: 'GE"T', upstream: 'git\\hub', route: '/repos/"x"\n' });
    expect(lines.at(-1)).toMatchObject({ route: '/r/4999"' });
  });
  it('writes nothing when info is disabled', () => {
    const captured = capture('warn');
    captured.access(base);
    expect(captured.text()).toBe('');
  });

  it('escapes every string that needs it, and only those', () => {
    for (const path of ['/a/"quoted"', '/back\\slash', '/new\nline', '/tab\there', '/emoji/😀', '/lone/\ud800', '/plain/path']) {
      const captured = capture();
      captured.access({ ...base, path, reqId: `id-${path.length}` });
      const line = JSON.parse(captured.text().trim()) as Record<string, unknown>;
      expect(line.path).toBe(path);
    }
  });

  it("hands lines to pino's own destination together, after a short wait or once enough wait, not every turn", async () => {
    const writes: string[] = [];
    const dest = { write: (s: string) => void writes.push(s), flushSync: () => undefined };
    const logger = createLogger({ level: 'info', destination: dest as unknown as DestinationStream });
    const access = new AccessLog(logger);
    for (let i = 0; i < 5; i++) access.write({ ...base, reqId: `r${i}` });
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(0); // not at the end of the turn
    await new Promise((r) => setTimeout(r, ACCESS_FLUSH_MS + 50));
    expect(writes).toHaveLength(1);
    expect(
      writes[0]!
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { reqId: string }).reqId),
    ).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    // Enough waiting (64 KiB) goes at once; flush() hands over the rest (shutdown).
    for (let i = 0; i < 400; i++) access.write({ ...base, reqId: `big-${i}`, path: `/repos/a/b/${'x'.repeat(100)}` });
    expect(writes.length).toBeGreaterThan(1);
    const before = writes.length;
    access.write({ ...base, reqId: 'last' });
    access.flush();
    expect(writes).toHaveLength(before + 1);
    expect(writes.at(-1)).toContain('"reqId":"last"');
  });

  it('writes the lines of a template exactly as the lines of their fields', () => {
    const captured = capture();
    const fields = { ...base, path: '/repos/o/r?access_token=ghp_secretsecretsecret&per_page=2', route: '/repos/{owner}/{repo}' };
    captured.access(fields);
    captured.log.writeFrom(captured.log.template(fields), fields);
    const [fromFields, fromTemplate] = captured.text().trim().split('\n');
    const drop = (line: string) => line.replace(/"time":\d+,/, '');
    expect(drop(fromTemplate!)).toBe(drop(fromFields!));
    expect(captured.text()).not.toContain('ghp_secret');
  });
});
