/**
 * The one capped reader (src/platform/bytes.ts) that every bounded read of the proxy uses: a
 * body within the cap is read whole; past it the stream is left paused with the rest unread (a
 * caller may still hand it on); a failure event ends the read; a stopped read lets the stream be.
 */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { CappedReader, readCapped } from '../../src/platform/bytes.js';

const text = (chunks: Buffer[]): string => Buffer.concat(chunks).toString('utf8');

describe('capped read', () => {
  it('reads a body up to the cap whole, the cap itself included', async () => {
    const read = await readCapped(Readable.from([Buffer.from('abc'), Buffer.from('def')]), 6);
    expect(read.kind).toBe('read');
    if (read.kind === 'read') expect([text(read.chunks), read.size]).toEqual(['abcdef', 6]);
  });

  it('past the cap: stops there, and the rest is still in the stream, unread', async () => {
    const stream = new PassThrough();
    stream.write('abcd');
    stream.write('efgh');
    const read = await readCapped(stream, 5);
    expect(read.kind).toBe('over');
    if (read.kind === 'over') expect([text(read.chunks), read.size]).toEqual(['abcdefgh', 8]);
    expect(stream.isPaused()).toBe(true);
    expect(stream.listenerCount('data')).toBe(0);
    stream.end('rest');
    const rest: Buffer[] = [];
    for await (const chunk of stream) rest.push(chunk as Buffer);
    expect(text(rest)).toBe('rest');
  });

  it('hostile: a stream that errors, or a request that goes away, ends as failed', async () => {
    const erring = new PassThrough();
    const failed = readCapped(erring, 100);
    erring.write('part');
    erring.destroy(new Error('reset'));
    expect(await failed).toEqual({ kind: 'failed', error: new Error('reset') });

    const aborted = new PassThrough();
    const gone = readCapped(aborted, 100, ['error', 'aborted']);
    aborted.emit('aborted');
    expect(await gone).toEqual({ kind: 'failed', error: undefined });
    expect(aborted.listenerCount('aborted')).toBe(0);
  });

  it('stopped: counts what it read, takes its listeners away, and never settles', async () => {
    const stream = new PassThrough();
    const reader = new CappedReader(stream, 100);
    stream.write('12345');
    await new Promise((resolve) => setImmediate(resolve));
    expect(reader.size).toBe(5);
    reader.stop();
    expect([stream.listenerCount('data'), stream.listenerCount('end'), stream.listenerCount('error')]).toEqual([0, 0, 0]);
    stream.end();
    const settled = await Promise.race([
      reader.done.then(() => 'settled'),
      new Promise((resolve) => setImmediate(() => resolve('pending'))),
    ]);
    expect(settled).toBe('pending');
  });
});
