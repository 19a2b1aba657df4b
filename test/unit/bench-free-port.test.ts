/**
 * The bench harness hands each server a port it binds later. A port it handed out lately is never
 * handed out again, even when the kernel offers it once more (an etagere's listen port once came
 * back as its own redis-server's, and the etagere failed to start with EADDRINUSE).
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../../bench/processes.js';

describe('bench freePort', () => {
  it('hands out no port twice among its recent ones, though each is released at once', async () => {
    const ports: number[] = [];
    for (let count = 0; count < 200; count++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });
});
