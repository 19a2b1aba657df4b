/**
 * A stored 404 or 410 (src/cache/rules/entry.ts) is filed under its path's repository and
 * owner (src/cache/store/tags.ts), so that a webhook delivery that could create the path purges it.
 * An answer that went upstream before a purge of one of those tags may predate the change: its
 * entry is dropped again, here and on the other replicas.
 */
import type { CacheResult } from '../../cache/rules/classify.js';
import { isNegativeStatus, pathTags } from '../../cache/rules/entry.js';
import { retentionSeconds } from '../../cache/rules/policy.js';
import type { TaggedAbout, TagStore } from '../../cache/store/tags.js';
import type { Cache } from '../../cache/store/cache.js';
import type { Logger } from '../../platform/log/logger.js';

/** Files `result`'s entry when it is a stored negative one; `where.apiPath`: its path below the API root. */
export function fileNegative(
  tags: TagStore,
  cache: Pick<Cache, 'l1' | 'shared' | 'written'>,
  logger: Logger,
  result: CacheResult,
  where: { readonly upstream: string; readonly apiPath: string; readonly partition: TaggedAbout['partition'] },
  sentAt: number | undefined,
): void {
  if (result.kind !== 'entry' || result.storeKey === undefined || !isNegativeStatus(result.entry.status)) return;
  const names = pathTags(where.apiPath);
  if (names.length === 0) return;
  const key = result.storeKey;
  const about: TaggedAbout = { upstream: where.upstream, what: where.apiPath.slice(0, 200), partition: where.partition };
  const since = sentAt ?? result.entry.storedAt;
  const filing = tags.file(key, names, retentionSeconds(result.entry) * 1000, since, about, cache.written(key));
  filing.then(
    (kept) => {
      if (kept) return;
      cache.l1?.delete(key);
      cache.shared?.drop(key);
    },
    (err: unknown) => logger.warn({ err: (err as Error).message }, 'filing a negative entry failed'),
  );
}
