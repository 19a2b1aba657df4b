/**
 * `etagere serve [--config FILE] [--port N] [--host H] [--admin-port N]`: the proxy, in one process
 * or as a cluster's primary and workers. A flag beats its environment variable, which beats the file.
 */
import { parseArgs } from 'node:util';
import { startApp } from './app.js';
import { cluster, runPrimary, runWorker, workerCount } from './cluster.js';
import { startupSummary } from '../platform/config/summary.js';
import { configOrExit } from './cli-config.js';
import { onSignals, portFlag } from './cli-common.js';

export const SERVE_FLAGS = {
  config: { type: 'string', short: 'c' },
  port: { type: 'string' },
  host: { type: 'string' },
  'admin-port': { type: 'string' },
} as const;

export async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: SERVE_FLAGS, strict: true });
  const config = configOrExit(values.config, {
    port: portFlag('port', values.port),
    host: values.host,
    adminPort: portFlag('admin-port', values['admin-port']),
  });
  if (cluster.isWorker) {
    const worker = await runWorker(config);
    // SIGHUP (to the whole process group, say) changes nothing here: the primary reloads.
    onSignals(
      () => worker.close(),
      async () => undefined,
    );
    return;
  }
  // Signal handlers go in before the "listening" line: a supervisor that signals as soon as it reads
  // that line must get a graceful stop, not Node's default exit by signal.
  if (workerCount(config.workers) > 1) {
    const primary = await runPrimary(config);
    onSignals(
      () => primary.close(),
      () => primary.reload('signal'),
    );
    process.stdout.write(
      `etagere listening on port ${config.listen.port} with ${workerCount(config.workers)} workers (admin ${primary.adminUrl}) ${JSON.stringify(startupSummary(config))}\n`,
    );
    return;
  }
  const app = await startApp(config);
  onSignals(
    (signal) => app.close(signal),
    () => app.reloadTokens('signal'),
  );
  // One line says what it runs with: addresses, upstreams, tokens (a count), Redis, public URL.
  app.logger.info({ url: app.url, admin: app.adminUrl, ...startupSummary(config) }, 'etagere listening');
  app.logger.flush(); // the async destination would otherwise hold the line until 4 KiB accumulate
}
