#!/usr/bin/env node
/**
 * etagere command line: argument parsing only (the help texts: src/cli-help.ts).
 *   etagere serve [--config FILE]
 *   etagere fake-upstream [--port N] [--host H] [--tokens SPEC] [--anon-limit N] [--token-limit N]
 *                         [--window-seconds N] [--latency-ms N] [--faults KIND:RATE,...]
 *   etagere demo [--port N] [--fake-port N] [--admin-port N] [--quiet] [--verbose]
 *   etagere --help | <command> --help | --version
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startApp, type App } from './app.js';
import { COMMANDS, USAGE, commandHelp, version, type Command } from './cli-help.js';
import { ConfigError, loadConfig } from './config/load.js';
import { cluster, runPrimary, runWorker, workerCount } from './cluster/serve.js';
import type { Config } from './config/schema.js';
import { startupSummary } from './config/summary.js';
import { demoBanner } from './demo/banner.js';
import { startDemoLoad, summaryLine } from './demo/consumer.js';
import { startFakeUpstream, parseFaultSpec, parseTokenSpec, type FakeUpstreamOptions } from './fake-upstream/index.js';
import { basePrefixOf } from './upstream/client.js';

function fail(message: string, code = 2): never {
  process.stderr.write(`etagere: ${message}\n`);
  process.exit(code);
}

function intFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

function onSignals(stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`etagere: second ${signal}, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    stop(signal).then(
      () => process.exit(0),
      (err: unknown) => fail(`shutdown failed: ${(err as Error).message}`, 1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } }, strict: true });
  let config: Config;
  try {
    config = loadConfig({ file: values.config });
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  if (cluster.isWorker) {
    const worker = await runWorker(config);
    onSignals(() => worker.close());
    return;
  }
  if (workerCount(config.workers) > 1) {
    const primary = await runPrimary(config);
    process.stdout.write(
      `etagere listening on port ${config.listen.port} with ${workerCount(config.workers)} workers (admin ${primary.adminUrl}) ${JSON.stringify(startupSummary(config))}\n`,
    );
    onSignals(() => primary.close());
    return;
  }
  const app = await startApp(config);
  // One line says what it runs with: addresses, upstreams, tokens (a count), Redis, public URL.
  app.logger.info({ url: app.url, admin: app.adminUrl, ...startupSummary(config) }, 'etagere listening');
  app.logger.flush(); // the async destination would otherwise hold the line until 4 KiB accumulate
  onSignals((signal) => app.close(signal));
}

function fakeOptions(values: Record<string, string | boolean | undefined>): FakeUpstreamOptions {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const opts: FakeUpstreamOptions = {
    port: intFlag('port', str('port')) ?? 9100,
    host: str('host') ?? '127.0.0.1',
  };
  /** A flag's value through its parser; a parse error exits naming the flag. */
  const parsed = <T>(flag: string, parse: (value: string) => T): T | undefined => {
    const value = str(flag);
    if (value === undefined) return undefined;
    try {
      return parse(value);
    } catch (err) {
      fail(`--${flag}: ${(err as Error).message}`);
    }
  };
  const tokens = parsed('tokens', parseTokenSpec);
  if (tokens !== undefined) opts.tokens = tokens;
  const setIntOption = (flag: string, key: 'anonymousLimit' | 'tokenLimit' | 'windowSeconds' | 'latencyMs'): void => {
    const value = intFlag(flag, str(flag));
    if (value !== undefined) opts[key] = value;
  };
  setIntOption('anon-limit', 'anonymousLimit');
  setIntOption('token-limit', 'tokenLimit');
  setIntOption('window-seconds', 'windowSeconds');
  setIntOption('latency-ms', 'latencyMs');
  const faults = parsed('faults', parseFaultSpec);
  if (faults !== undefined) opts.faults = faults;
  return opts;
}

const FAKE_FLAGS = {
  port: { type: 'string' },
  host: { type: 'string' },
  tokens: { type: 'string' },
  'anon-limit': { type: 'string' },
  'token-limit': { type: 'string' },
  'window-seconds': { type: 'string' },
  'latency-ms': { type: 'string' },
  faults: { type: 'string' },
} as const;

async function fakeUpstream(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: FAKE_FLAGS, strict: true });
  const opts = fakeOptions(values);
  const fake = await startFakeUpstream(opts);
  let banner = `fake upstream listening on ${fake.url} (stats: ${fake.url}/__fake/stats)\n`;
  if (opts.faults !== undefined && opts.faults.length > 0) {
    const rules = opts.faults.map((fault) => `${fault.kind}:${fault.rate ?? 1}`).join(', ');
    banner += `fault injection on: ${rules} (rules: ${fake.url}/__fake/faults)\n`;
  }
  // One write: whoever waits for "listening" reads the fault line with it.
  process.stdout.write(banner);
  onSignals(() => fake.close());
}

async function demo(args: string[]): Promise<void> {
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
  const fake = await startFakeUpstream({ port: intFlag('fake-port', values['fake-port']) ?? 9100, host: '127.0.0.1' });
  const file = fileURLToPath(new URL('../config/examples/demo.yaml', import.meta.url));
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
    const adminPort = intFlag('admin-port', values['admin-port']);
    if (adminPort !== undefined) config.admin.port = adminPort;
    const port = intFlag('port', values.port);
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
  process.stdout.write(demoBanner(app, fake.url));
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
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (COMMANDS.includes(command as Command) && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(commandHelp(command as Command));
    return;
  }
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'fake-upstream':
      return fakeUpstream(rest);
    case 'demo':
      return demo(rest);
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return;
    case '-V':
    case '--version':
    case 'version':
      process.stdout.write(`etagere ${version()}\n`);
      return;
    default:
      fail(`${command === undefined ? 'missing command' : `unknown command "${command}"`}\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const error = err as NodeJS.ErrnoException;
  if (
    error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ||
    error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ||
    error.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'
  ) {
    fail(`${error.message}\n${USAGE}`);
  }
  if (error.code === 'EADDRINUSE') fail(`address already in use: ${error.message}`, 1);
  fail(`fatal: ${error.stack ?? String(err)}`, 1);
});
