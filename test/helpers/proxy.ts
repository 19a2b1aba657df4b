/** Starts a proxy for tests: ephemeral ports, a log capture, and a config built from overrides. */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startApp, type App } from '../../src/app.js';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';

export interface TestProxy extends App {
  /** Every log line written so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Raw log text (for secret scans). */
  logText(): string;
}

export async function startTestProxy(raw: Record<string, unknown>): Promise<TestProxy> {
  const config: Config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    ...raw,
    log: { level: 'info' },
  });
  let text = '';
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger({ level: 'info', destination: dest as unknown as pino.DestinationStream });
  const app = await startApp(config, { logger });
  return Object.assign(app, {
    logs: () =>
      text
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    logText: () => text,
  });
}

/** Polls `check` until it returns true or the deadline passes (no fixed sleeps). */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((r) => setImmediate(r));
    await new Promise<void>((r) => setTimeout(r, 5));
  }
}
