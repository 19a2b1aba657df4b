/**
 * `etagere demo`: the fake upstream, a proxy in front of it (config/examples/demo.yaml), a small
 * consumer load and a summary line per second.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startApp, type App } from './app.js';
import { ConfigError, loadConfig } from '../platform/config/load.js';
import { demoBanner, summaryLine } from './demo-banner.js';
import { startDemoLoad } from '../../fake-github/demo-load.js';
import { startFakeUpstream } from '../../fake-github/index.js';
import { basePrefixOf } from '../http/route.js';
import { packageRoot } from './package-root.js';
import { fail, onSignals, portFlag } from './cli-common.js';

export async function demo(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: 'string' },
      'fake-port': { type: 'string' },
      'admin-port': { type: 'string' },
      quiet: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const port = portFlag('port', values.port);
  const adminPort = portFlag('admin-port', values['admin-port']);
  const fake = await startFakeUpstream({ port: portFlag('fake-port', values['fake-port']) ?? 9100, host: '127.0.0.1' });
  const file = join(packageRoot(), 'config', 'examples', 'demo.yaml');
  let app: App;
  try {
    // The pool: two of the fake's demo tokens (public scopes, so equivalent), unless you give others.
    const tokens = process.env.ETAGERE_TOKENS || 'alice-public=demo_token_alice_public,bob-public=demo_token_bob_public';
    const config = loadConfig({
      file,
      env: { ...process.env, ETAGERE_CONFIG: undefined, UPSTREAM_URL: undefined, ETAGERE_TOKENS: tokens },
    });
    // The access log (a line per request) would drown the summary lines: only with --verbose.
    if (!values.verbose && (config.log.level === 'info' || config.log.level === 'debug' || config.log.level === 'trace'))
      config.log.level = 'warn';
    if (adminPort !== undefined) config.admin.port = adminPort;
    if (port !== undefined) {
      config.listen.port = port;
      if (config.public_url !== null) config.public_url = `http://127.0.0.1:${port}`;
    }
    // Every upstream of the demo config points at the fake, wherever it actually listens.
    for (const upstream of config.upstreams) upstream.url = fake.url + basePrefixOf(new URL(upstream.url).pathname);
    app = await startApp(config);
  } catch (err) {
    await fake.close();
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  // A small built-in consumer load and a one-line-per-second summary (unless --quiet).
  const load = values.quiet ? undefined : startDemoLoad(app.url);
  const ticker = values.quiet
    ? undefined
    : setInterval(() => {
        process.stdout.write(`${summaryLine(app.metrics.recent.summary(), app.tokens())}\n`);
      }, 1000);
  onSignals(async () => {
    if (ticker !== undefined) clearInterval(ticker);
    await load?.stop();
    await app.close();
    await fake.close();
  });
  process.stdout.write(demoBanner(app, fake.url));
}
