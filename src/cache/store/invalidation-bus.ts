/**
 * Keeps the L1 copies of other replicas honest: whenever a replica writes or drops an entry in
 * L2, it publishes a notice; every other replica drops its older L1 copy, so its next lookup reads
 * the new one from L2. Path invalidations after unsafe methods travel the same way.
 * Messages:  "e <replica> <storedAt> <key>"  (entry written)
 *            "d <replica> 0 <key>"           (entry dropped)
 *            "p <replica> <at> <scope>"      (path invalidated)
 *            "m <replica> <at> <source> <scope id>\t<scope id>..."   (scopes marked stale: src/cache/store/memory-store.ts)
 * Keys hold no credential: the partition in a key is a keyed hash.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../platform/log/logger.js';
import type { RedisConnection } from '../../platform/redis/connection.js';

export interface InvalidationHandlers {
  entry(key: string, storedAt: number): void;
  dropped(key: string): void;
  path(scope: string, at: number): void;
  /** Path scopes marked stale by a webhook delivery or a purge (ids of src/cache/rules/stale-marks.ts). */
  marked?(ids: string[], at: number, source: string): void;
}

export interface InvalidationBus {
  readonly replica: string;
  written(key: string, storedAt: number): void;
  dropped(key: string): void;
  path(scope: string, at: number): void;
  marked(ids: readonly string[], at: number, source: string): void;
  close(): void;
}

export function createInvalidationBus(conn: RedisConnection, handlers: InvalidationHandlers, logger: Logger): InvalidationBus {
  const replica = randomBytes(6).toString('base64url');
  const channel = `${conn.prefix}invalidate`;
  const sub = conn.subscriber();
  sub
    .subscribe(channel)
    .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'redis subscribe failed (will retry on reconnect)'));
  const onMessage = (ch: string, message: string): void => {
    if (ch !== channel) return;
    const match = /^([edpm]) (\S+) (\d+) ([\s\S]+)$/.exec(message);
    if (match === null || match[2] === replica) return;
    const at = Number(match[3]);
    if (match[1] === 'e') handlers.entry(match[4]!, at);
    else if (match[1] === 'd') handlers.dropped(match[4]!);
    else if (match[1] === 'm') onMarked(match[4]!, at);
    else handlers.path(match[4]!, at);
  };
  const onMarked = (rest: string, at: number): void => {
    const space = rest.indexOf(' ');
    if (space > 0) handlers.marked?.(rest.slice(space + 1).split('\t'), at, rest.slice(0, space));
  };
  sub.on('message', onMessage);
  const publish = (message: string): void => {
    void conn.run('publish', (c) => c.publish(channel, message));
  };
  return {
    replica,
    written: (key, storedAt) => publish(`e ${replica} ${Math.floor(storedAt)} ${key}`),
    dropped: (key) => publish(`d ${replica} 0 ${key}`),
    path: (scope, at) => publish(`p ${replica} ${Math.floor(at)} ${scope}`),
    marked: (ids, at, source) => publish(`m ${replica} ${Math.floor(at)} ${source} ${ids.join('\t')}`),
    close: () => {
      sub.off('message', onMessage);
    },
  };
}
