/**
 * Stale marks kept in Redis, for the replicas that were not listening when a mark was published
 * (one that starts, or reconnects, later) and would otherwise serve an L2 entry from before the
 * mark as fresh. One sorted set, `<prefix>marks`: member the scope id (stale-marks.ts), score the
 * time of the mark. Each write drops the marks past the horizon and keeps at most `maxScopes`.
 * A replica reads the set once, at start (`load`). Like every Redis call, a failure is a skipped
 * write or an empty read, never an error.
 */
import type { RedisConnection } from '../../platform/redis/connection.js';

export interface SharedMarks {
  persist(ids: readonly string[], at: number): void;
  /** The marks made within the horizon before `now`: [scope id, time]. */
  load(now: number): Promise<Array<[string, number]>>;
}

export function createSharedMarks(conn: RedisConnection, horizonMs: number, maxScopes: number): SharedMarks {
  const key = `${conn.prefix}marks`;
  return {
    persist(ids, at) {
      if (ids.length === 0) return;
      const members: Array<string | number> = [];
      for (const id of ids) members.push(at, id);
      void conn.run('marks', async (client) => {
        await client.zadd(key, ...members);
        await client.zremrangebyscore(key, '-inf', `(${at - horizonMs}`);
        await client.zremrangebyrank(key, 0, -(maxScopes + 1));
      });
    },
    async load(now) {
      const flat = await conn.run('marks', (client) => client.zrangebyscore(key, now - horizonMs, '+inf', 'WITHSCORES'));
      const out: Array<[string, number]> = [];
      if (flat === undefined) return out;
      for (let position = 0; position + 1 < flat.length; position += 2) out.push([flat[position]!, Number(flat[position + 1])]);
      return out;
    },
  };
}
