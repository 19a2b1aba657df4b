/**
 * Pure: the command line's help texts (`etagere --help`, `etagere <command> --help`) and version.
 * Every flag and every environment variable is listed; the variables come from ENV_VARS, the one
 * list load.ts reads, so the help cannot drift from it.
 */
import { readFileSync } from 'node:fs';
import { ENV_VARS } from './config/load.js';
import { fakeUpstreamFlags } from './fake-upstream/index.js';

export const COMMANDS = ['serve', 'fake-upstream', 'demo'] as const;
export type Command = (typeof COMMANDS)[number];

/** The version in package.json (the same file from src/ and from dist/). */
export function version(): string {
  const text = readFileSync(new URL('../package.json', import.meta.url), 'utf8');
  const parsed = JSON.parse(text) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : 'unknown';
}

function columns(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`).join('\n');
}

function envSection(): string {
  return `environment (each overrides its key of the config file):\n${columns(Object.entries(ENV_VARS))}`;
}

const SERVE = `usage: etagere serve [--config FILE]

Runs the proxy. Its configuration: the YAML file (--config, else ETAGERE_CONFIG), then the
environment variables below, else built-in defaults (GitHub at https://api.github.com, port 8080,
admin port 9090, both on 127.0.0.1). Reference: docs/configuration.md.

flags:
${columns([
  ['-c, --config FILE', 'the YAML config file'],
  ['-h, --help', 'this help'],
])}

`;

const DEMO = `usage: etagere demo [--port N] [--fake-port N] [--admin-port N] [--quiet] [--verbose]

Starts the fake upstream and a proxy in front of it (config/examples/demo.yaml), with a small
built-in consumer load and a summary line per second. The pool uses two of the fake's demo tokens
unless ETAGERE_TOKENS names others.

flags:
${columns([
  ['--port N', "the proxy's port (default 8080)"],
  ['--fake-port N', "the fake upstream's port (default 9100)"],
  ['--admin-port N', 'the admin port: status page, metrics, health (default 9090)'],
  ['--quiet', 'no consumer load and no summary lines'],
  ['--verbose', "the proxy's log lines too (the access log: one line per request); LOG_LEVEL sets the level"],
  ['-h, --help', 'this help'],
])}

`;

function placeholder(flag: string): string {
  if (flag === '--host') return 'H';
  return flag === '--tokens' || flag === '--faults' ? 'SPEC' : 'N';
}

const FAKE = `usage: etagere fake-upstream [options]

Runs the fake upstream: a GitHub-like read API with rate limits, ETags and fault injection
(docs/fake-upstream.md). It reads no environment variable.

flags:
${columns([
  ...fakeUpstreamFlags.map((flag) => [`${flag.flag} ${placeholder(flag.flag)}`, flag.description] as const),
  ['-h, --help', 'this help'],
])}
  fault kinds: refuse, reset-headers, reset-body, truncate, slow-headers, slow-body, status,
  bad-json, huge; more rules through POST /__fake/faults
`;

/** `etagere <command> --help`. */
export function commandHelp(command: Command): string {
  if (command === 'serve') return `${SERVE}${envSection()}\n`;
  if (command === 'demo') return `${DEMO}${envSection()}\n`;
  return FAKE;
}

/** `etagere --help`, and what an unknown command or flag prints. */
export const USAGE = `usage: etagere <command> [flags]

commands:
${columns([
  ['serve [--config FILE]', 'run the proxy'],
  ['fake-upstream [flags]', 'run the fake upstream API'],
  ['demo [flags]', 'the fake upstream, a proxy in front of it, a consumer load and a live summary'],
])}

  etagere <command> --help   every flag of a command
  etagere --version          the version

${envSection()}
`;
