#!/usr/bin/env node
/**
 * etagere command line: which command runs (the help texts: src/main/cli-help.ts).
 *   etagere serve [--config FILE] [--port N] [--host H] [--admin-port N]
 *   etagere check-config [--config FILE]
 *   etagere fake-upstream [--port N] [--host H] [--tokens SPEC] ... (etagere fake-upstream --help)
 *   etagere demo [--port N] [--fake-port N] [--admin-port N] [--quiet] [--verbose]
 *   etagere purge (--path P | --prefix P | --tag T) [--upstream NAME] [--json] [--admin URL | --config FILE]
 *   etagere cache inspect PATH | cache stats [--top N] [--json] [--admin URL | --config FILE]
 *   etagere quota [--window 5m|1h|24h] [--json] [--admin URL | --config FILE]
 *   etagere --help | <command> --help | --version | -v
 * Each command's module is imported when it runs, so `--version`, `--help` and `check-config` load
 * nothing of the proxy. Every error is one line on stderr saying what to do: exit 2 for a bad flag
 * or config, 1 for a failure at run time (no proxy answers, a port in use).
 */
import { COMMANDS, USAGE, commandHelp, usageOf, version, type Command } from './cli-help.js';
import { ConfigError } from '../platform/config/env-vars.js';
import { fail, firstLine } from './cli-common.js';

/** Each command: its module, imported only when it runs. */
const RUNS: Record<Command, (args: string[]) => Promise<void>> = {
  serve: async (args) => (await import('./cli-serve.js')).serve(args),
  'check-config': async (args) => (await import('./cli-config.js')).checkConfig(args),
  'fake-upstream': async (args) => (await import('./cli-fake.js')).fakeUpstream(args),
  demo: async (args) => (await import('./cli-demo.js')).demo(args),
  purge: async (args) => (await import('./cli-admin-commands.js')).purge(args),
  cache: async (args) => (await import('./cli-admin-commands.js')).cacheCommand(args),
  quota: async (args) => (await import('./cli-admin-commands.js')).quota(args),
};

function run(command: string | undefined, rest: string[]): Promise<void> {
  if (COMMANDS.includes(command as Command)) return RUNS[command as Command](rest);
  switch (command) {
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return Promise.resolve();
    case '-v':
    case '-V':
    case '--version':
    case 'version':
      process.stdout.write(`etagere ${version()}\n`);
      return Promise.resolve();
    default:
      fail(
        command === undefined ? 'give a command (etagere --help lists them)' : `unknown command "${command}" (etagere --help lists them)`,
        2,
        USAGE,
      );
  }
}

/** parseArgs's complaint about a flag, on one line. */
function flagProblem(error: NodeJS.ErrnoException): string | undefined {
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown flag ${/'([^']+)'/.exec(error.message)?.[1] ?? ''}`.trimEnd();
  const missing = /'(?:-\w, )?(--[\w-]+) <value>' argument missing/.exec(error.message);
  if (missing !== null) return `${missing[1]} needs a value`;
  const ambiguous = /'(--[\w-]+)' argument is ambiguous/.exec(error.message);
  if (ambiguous !== null) return `${ambiguous[1]} needs a value (one that starts with "-": ${ambiguous[1]}=VALUE)`;
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || error.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL')
    return error.message.split(/\.(?: |$)/)[0]!;
  return undefined;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const known = COMMANDS.includes(command as Command) ? (command as Command) : undefined;
  if (known !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(commandHelp(known));
    return;
  }
  try {
    await run(command, rest);
  } catch (err) {
    const problem = flagProblem(err as NodeJS.ErrnoException);
    if (problem !== undefined)
      fail(known === undefined ? problem : `${problem} for etagere ${known}`, 2, known === undefined ? USAGE : usageOf(known));
    throw err;
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const error = err as NodeJS.ErrnoException;
  if (err instanceof ConfigError) fail(error.message);
  if (error.code === 'EADDRINUSE') fail(`address already in use: ${firstLine(error.message)}`, 1);
  // No stack trace: one line that names the failure (an unexpected one included; an unreachable
  // admin port's message says what to do).
  fail(`${firstLine(error.message ?? String(err))}${typeof error.code === 'string' ? ` (${error.code})` : ''}`, 1);
});
