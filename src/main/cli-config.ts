/**
 * `etagere check-config`, and the config `etagere serve` runs with: the file, then the environment,
 * then serve's address flags. Loads the config modules (zod, YAML) and nothing of the proxy.
 */
import { parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import { ConfigError, loadConfig, type FlagOverrides } from '../platform/config/load.js';
import { maskedConfig } from '../platform/config/masked.js';
import type { Config } from '../platform/config/schema.js';
import { version } from './cli-help.js';
import { fail } from './cli-common.js';

/** The config `serve` would run with; a config error exits 2 with its one line. */
export function configOrExit(file: string | undefined, flags: FlagOverrides = {}): Config {
  try {
    return loadConfig({ file, flags });
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
}

/** Validates the config as `serve` would and prints it, secrets masked (`nginx -t`). */
export function checkConfig(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } }, strict: true });
  const config = configOrExit(values.config);
  process.stdout.write(`# etagere ${version()}: the effective configuration (file, environment, defaults); secrets masked\n`);
  process.stdout.write(toYaml(maskedConfig(config), { aliasDuplicateObjects: false }));
  process.stderr.write('etagere: the configuration is valid\n');
  return Promise.resolve();
}
