/** Two ends of an in-memory IPC channel (what node:cluster gives the primary and a worker). */
import { EventEmitter } from 'node:events';
import type { Channel, PoolMessage } from '../../src/pool/backends/ipc-pool.js';

/** Messages cross as JSON, a turn later, as over a real IPC channel; `messages` lists every one sent. */
export function channelPair(): { primary: Channel; worker: Channel; messages: unknown[] } {
  const toPrimary = new EventEmitter();
  const toWorker = new EventEmitter();
  const messages: unknown[] = [];
  const clone = (message: PoolMessage): unknown => {
    messages.push(message);
    return JSON.parse(JSON.stringify(message));
  };
  return {
    primary: {
      send: (message) => setImmediate(() => toWorker.emit('message', clone(message))),
      on: (event, listener) => toPrimary.on(event, listener),
    },
    worker: {
      send: (message) => setImmediate(() => toPrimary.emit('message', clone(message))),
      on: (event, listener) => toWorker.on(event, listener),
    },
    messages,
  };
}
