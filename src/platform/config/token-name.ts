/**
 * A pool token's name: what logs, metrics, /admin/tokens and x-etagere-token show instead of its
 * value. Pure, so the config schema can name tokens without importing the pool.
 */
import { createHmac } from 'node:crypto';

/** HMAC key for derived token names: fixed, so a token keeps its name across restarts and replicas. */
const NAME_KEY = 'etagere/token-name/v1';

/** A token's name: the configured one, or "tok-" plus 8 hex digits of a keyed hash of its value. */
export function tokenName(value: string, configured?: string): string {
  return configured ?? `tok-${createHmac('sha256', NAME_KEY).update(value).digest('hex').slice(0, 8)}`;
}
