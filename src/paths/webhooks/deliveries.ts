/**
 * Which deliveries were applied already, by `X-GitHub-Delivery` (GitHub's GUID; a redelivery keeps
 * it): a replayed or redelivered delivery is acknowledged and not applied twice. A bounded set in
 * this process, and, with Redis, one key per delivery (SET NX with an expiry) that every replica
 * checks. While Redis does not answer, this process's own set decides.
 */
import type { RedisConnection } from '../../platform/redis/connection.js';

/** GitHub's delivery ids are GUIDs; anything else in the header is refused before it names a key. */
export const DELIVERY_ID = /^[A-Za-z0-9-]{1,100}$/;

export interface Deliveries {
  /** True the first time `id` is seen (then it is remembered), false for a duplicate. */
  firstSeen(id: string): Promise<boolean>;
}

export interface DeliverySettings {
  /** How long a delivery id is remembered. */
  ttlMs: number;
  /** At most this many ids in this process (the oldest forgotten first). */
  max: number;
}

export function createDeliveries(redis: RedisConnection | undefined, settings: DeliverySettings, now: () => number = Date.now): Deliveries {
  /** id -> when it was seen, oldest first. */
  const seen = new Map<string, number>();
  const remember = (id: string, at: number): void => {
    seen.set(id, at);
    while (seen.size > settings.max) seen.delete(seen.keys().next().value!);
  };
  const seenHere = (id: string, at: number): boolean => {
    const when = seen.get(id);
    if (when === undefined) return false;
    if (at - when <= settings.ttlMs) return true;
    seen.delete(id);
    return false;
  };
  return {
    async firstSeen(id) {
      const at = now();
      if (seenHere(id, at)) return false;
      remember(id, at);
      if (redis === undefined) return true;
      const set = await redis.run('webhook-delivery', (client) =>
        client.set(`${redis.prefix}webhook-delivery:${id}`, '1', 'PX', settings.ttlMs, 'NX'),
      );
      // null: another replica set it first; undefined: Redis did not answer (this process decides).
      return set !== null;
    },
  };
}
