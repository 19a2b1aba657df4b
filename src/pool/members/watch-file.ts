/**
 * Calls back when a file may have changed: fs.watch on the file's directory, not on the file, so
 * that an editor or a tool that writes a new file and renames it over the old one (vim, `sed -i`,
 * Kubernetes' atomic writer swapping its `..data` link) is still seen. Events are debounced: a
 * burst of them (truncate, write, rename) gives one call, `debounceMs` after the last. The caller
 * compares the bytes (reload.ts), so an event that changed nothing costs a read.
 *
 * A watch that cannot start or fails later is logged once and stops: SIGHUP always reloads, so a
 * missed event never matters.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { Logger } from '../../platform/log/logger.js';

/** Quiet time after the last event before the callback runs. */
export const WATCH_DEBOUNCE_MS = 200;

export interface FileWatch {
  close(): void;
}

/** Whether an event in the directory may concern the file: its own name, a nameless event, or Kubernetes' `..data` swap. */
export function concernsFile(eventName: string | null, fileName: string): boolean {
  return eventName === null || eventName === fileName || eventName.startsWith('..');
}

/** `what` names the file in the warnings (the tokens file; the listener's certificate uses it too). */
export function watchFile(
  path: string,
  onChange: () => void,
  log: Logger,
  debounceMs = WATCH_DEBOUNCE_MS,
  what = 'tokens file',
): FileWatch {
  const absolute = resolve(path);
  const fileName = basename(absolute);
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const stop = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    watcher?.close();
    watcher = undefined;
  };
  const fired = (): void => {
    timer = undefined;
    onChange();
  };
  try {
    watcher = watch(dirname(absolute), { persistent: false }, (_event, eventName) => {
      if (!concernsFile(eventName === null ? null : String(eventName), fileName)) return;
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(fired, debounceMs);
      timer.unref();
    });
    watcher.on('error', (err: NodeJS.ErrnoException) => {
      log.warn({ file: path, err: err.code ?? err.message }, `${what} watch stopped: reload with SIGHUP`);
      stop();
    });
  } catch (err) {
    log.warn({ file: path, err: (err as NodeJS.ErrnoException).code ?? 'error' }, `${what} not watched: reload with SIGHUP`);
  }
  return { close: stop };
}
