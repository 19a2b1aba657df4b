/**
 * Reloading consumers.keys_file while the proxy serves (SIGHUP, or the file changed:
 * src/pool/members/watch-file.ts), as a Kubernetes Secret mounted as a directory is updated. The
 * file's keys replace the old ones at once (consumers.ts `replace`): a key taken out of the file
 * matches nothing from the next request on. A bad file (unreadable, a malformed line, a consumer
 * the config does not list, a key twice, or no key left when it had some: taken for a write in
 * progress) changes nothing: the current keys stay and the log says why, naming the line, never
 * its text. Logs and etagere_consumer_key_reloads_total name consumers, never keys.
 */
import { ConfigError, readConsumerKeysFile } from '../../platform/config/load.js';
import type { ConsumerKeyLine } from '../../platform/config/keys-file.js';
import type { ConsumerKeyConfig } from '../../platform/config/schema.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { ReloadTrigger } from '../members/reload.js';
import { createReread } from '../members/reread.js';
import { consumerKeysOf, type Consumers } from './consumers.js';

export type KeysReloadOutcome =
  /** The file's keys are the keys now; `changed`: the consumers whose keys changed, by name. */
  | { result: 'ok'; changed: string[] }
  /** A file event, but the same bytes as the last reload: nothing to do (not counted). */
  | { result: 'unchanged' }
  /** The current keys stay; `why` names the problem, never a value. */
  | { result: 'failed'; why: string };

export interface KeysReloaderDeps {
  /** consumers.keys_file. */
  readonly file: string;
  /** consumers.keys: the consumers, their rights, and the keys the config gives itself. */
  readonly configured: readonly ConsumerKeyConfig[];
  /** The file's keys at start-up. */
  readonly initial: readonly ConsumerKeyLine[];
  readonly consumers: Consumers;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly readFile?: (path: string) => string;
}

export interface ConsumerKeysReloader {
  /** Never rejects (a signal handler calls it). */
  reload(trigger: ReloadTrigger): KeysReloadOutcome;
}

/** The consumers whose set of keys differs between two readings of the file (names only). */
function changedConsumers(before: readonly ConsumerKeyLine[], after: readonly ConsumerKeyLine[]): string[] {
  const keysOf = (lines: readonly ConsumerKeyLine[]): Map<string, Set<string>> => {
    const out = new Map<string, Set<string>>();
    for (const line of lines) out.set(line.name, (out.get(line.name) ?? new Set()).add(line.value));
    return out;
  };
  const old = keysOf(before);
  const next = keysOf(after);
  const names = new Set([...old.keys(), ...next.keys()]);
  return [...names]
    .filter((name) => {
      const was = old.get(name) ?? new Set<string>();
      const now = next.get(name) ?? new Set<string>();
      return was.size !== now.size || [...was].some((value) => !now.has(value));
    })
    .sort();
}

export function createConsumerKeysReloader(deps: KeysReloaderDeps): ConsumerKeysReloader {
  const reread = createReread(deps.file, deps.readFile);
  let current = deps.initial;

  const failed = (trigger: ReloadTrigger, why: string): KeysReloadOutcome => {
    deps.metrics.consumerKeyReloads.inc({ result: 'failed' });
    deps.log.error({ trigger, file: deps.file, why }, 'consumer keys reload failed: keeping the current keys');
    return { result: 'failed', why };
  };

  const run = (trigger: ReloadTrigger): KeysReloadOutcome => {
    const read = reread(trigger);
    if ('why' in read) return failed(trigger, read.why);
    if ('unchanged' in read) return { result: 'unchanged' };
    let next: ConsumerKeyLine[];
    try {
      next = readConsumerKeysFile(deps.file, deps.configured, () => read.text);
    } catch (err) {
      if (err instanceof ConfigError) return failed(trigger, err.message.replace(/^consumers\.keys_file: /, ''));
      throw err;
    }
    if (next.length === 0 && current.length > 0)
      return failed(trigger, `the file has no keys (it had ${current.length}): taken for a write in progress`);
    const changed = changedConsumers(current, next);
    deps.consumers.replace(consumerKeysOf(deps.configured, next));
    current = next;
    deps.metrics.consumerKeyReloads.inc({ result: 'ok' });
    deps.log.info(
      { trigger, file: deps.file, keys: next.length, changed },
      changed.length > 0 ? 'consumer keys reloaded' : 'consumer keys reloaded: no change',
    );
    return { result: 'ok', changed };
  };

  return {
    reload(trigger) {
      try {
        return run(trigger);
      } catch (err) {
        return failed(trigger, `unexpected ${(err as Error).name}`);
      }
    },
  };
}
