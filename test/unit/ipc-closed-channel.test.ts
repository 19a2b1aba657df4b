/**
 * A message to a process that has gone must not end the one that sends it: with workers, the
 * primary pushes pool state and members to each worker, and during shutdown a worker may exit
 * between a push being decided and sent. Node then emits ERR_IPC_CHANNEL_CLOSED on the child
 * process object, where no listener means an uncaught error: `etagere serve` with workers exited
 * 1 on SIGTERM now and then. Every send takes a callback instead (ignoreSendError).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { servePool, type Channel } from '../../src/pool/backends/ipc-pool.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';

describe('IPC to a process that has gone', () => {
  it('a push to an exited worker is dropped, not thrown or emitted', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    await once(child, 'exit');
    const errors: unknown[] = [];
    child.on('error', (err) => errors.push(err)); // would have been the uncaught error
    const pool = createTokenPool({
      tokens: [{ name: 'a', value: 'va' }],
      equivalent: true,
      perTokenConcurrency: 4,
      maxConcurrency: 10,
      queueTimeoutMs: 0,
      maxQueue: 0,
    } as Parameters<typeof createTokenPool>[0]);
    const served = servePool(pool, child as unknown as Channel);
    served.push();
    served.members();
    await new Promise((resolve) => setImmediate(resolve)); // Node emits the error in a nextTick, before this
    expect(errors).toEqual([]);
    served.close();
  });
});
