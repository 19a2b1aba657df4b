/**
 * Every example a user copies works: each ```yaml block of README.md and docs/ parses, and each
 * one that is a whole configuration (its top-level keys are all keys of the config) loads as
 * `etagere check-config` loads it, with placeholder values for the variables it names (`env:`
 * items, `private_key_env`, variables of the environment table) and placeholder files for the
 * files it names (tokens, consumer keys, webhook secret, App key, TLS pair). The README's example
 * also goes through the real `etagere check-config`.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { ENV_VARS, loadConfig } from '../../src/platform/config/load.js';
import { configSchema } from '../../src/platform/config/schema.js';
import { runCli } from '../helpers/cli.js';
import { hasOpenssl, makeTestCa } from '../helpers/tls-certs.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const FILES = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

interface Block {
  /** `docs/x.md:12`: the file and the line of the opening fence. */
  readonly where: string;
  readonly text: string;
}

/** Every ```yaml block of a Markdown text, with the line of its fence. */
function yamlBlocks(file: string, markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let at = 0; at < lines.length; at++) {
    const open = /^(\s*)```ya?ml\s*$/.exec(lines[at]!);
    if (open === null) continue;
    const body: string[] = [];
    let end = at + 1;
    for (; end < lines.length && !/^\s*```\s*$/.test(lines[end]!); end++) body.push(lines[end]!.slice(open[1]!.length));
    blocks.push({ where: `${file}:${at + 1}`, text: body.join('\n') });
    at = end;
  }
  return blocks;
}

/** The parse errors of a block (every document of it), as `where: message`. */
function parseErrors(block: Block): string[] {
  return parseAllDocuments(block.text).flatMap((doc) => doc.errors.map((error) => `${block.where}: ${error.message.split('\n')[0]}`));
}

const CONFIG_KEYS = new Set(Object.keys(configSchema.shape));
type Raw = Record<string, unknown>;
const isMapping = (value: unknown): value is Raw => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A block that is a whole configuration: one mapping whose keys are all the config's own. */
function asConfig(block: Block): Raw | undefined {
  const docs = parseAllDocuments(block.text);
  if (docs.length !== 1) return undefined;
  const value = docs[0]!.toJS() as unknown;
  return isMapping(value) && Object.keys(value).length > 0 && Object.keys(value).every((key) => CONFIG_KEYS.has(key)) ? value : undefined;
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const PEM = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
let tls: { cert: string; key: string } | undefined;

/**
 * The config with placeholder files where it names files that do not exist here, and the
 * environment of placeholders for the variables the block names.
 */
function withPlaceholders(config: Raw, block: Block, dir: string): { file: string; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const match of block.text.matchAll(/\b(env|private_key_env):\s*([A-Z_][A-Z0-9_]*)/g))
    env[match[2]!] = match[1] === 'private_key_env' ? PEM : `placeholder_${match[2]!.toLowerCase()}_0123456789`;
  for (const name of Object.keys(ENV_VARS))
    if (new RegExp(`\\b${name}\\b`).test(block.text)) env[name] ??= `placeholder-${name.toLowerCase()}-0123456789`;
  const consumers = isMapping(config.consumers) && Array.isArray(config.consumers.keys) ? (config.consumers.keys as Raw[]) : [];
  const placeholder = (key: string): string => {
    const path = join(dir, key);
    if (key === 'tokens_file') writeFileSync(path, 'ci-bot=placeholder_token_0123456789\n');
    else if (key === 'keys_file')
      writeFileSync(
        path,
        consumers
          .filter((c) => c.value === undefined && c.env === undefined)
          .map((c) => `${String(c.name)}=placeholder-key-${String(c.name)}-0123\n`)
          .join(''),
      );
    else if (key === 'private_key_file') writeFileSync(path, PEM);
    else if (key === 'cert_file' || key === 'key_file') {
      tls ??= makeTestCa(mkdtempSync(join(dir, 'ca-'))).server('docs');
      return key === 'cert_file' ? tls.cert : tls.key;
    } else writeFileSync(path, 'placeholder-secret-0123456789abcdef\n');
    return path;
  };
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (isMapping(value))
      for (const [key, item] of Object.entries(value)) {
        if (key.endsWith('_file') && typeof item === 'string' && !existsSync(item)) value[key] = placeholder(key);
        else walk(item);
      }
  };
  walk(config);
  const file = join(dir, 'etagere.yaml');
  writeFileSync(file, stringify(config));
  return { file, env };
}

const blocks = FILES.flatMap((file) => yamlBlocks(file, readFileSync(join(root, file), 'utf8')));
const configs = blocks.flatMap((block) => {
  const config = asConfig(block);
  return config === undefined ? [] : [{ block, config }];
});

describe('the YAML examples of README.md and docs/', () => {
  it('finds the blocks, and the rule fires on a broken one (the old first example of consumers.md)', () => {
    expect(blocks.length).toBeGreaterThan(10);
    expect(configs.length).toBeGreaterThan(8);
    const broken = yamlBlocks('planted.md', '# x\n\n```yaml\nallow:\n  - paths: [/repos/acme/*/issues], methods: [GET, POST]\n```\n');
    expect(broken).toHaveLength(1);
    expect(parseErrors(broken[0]!)).not.toEqual([]);
    expect(parseErrors(broken[0]!)[0]).toMatch(/^planted\.md:3: /);
  });

  it('every block parses as YAML', () => {
    expect(blocks.flatMap(parseErrors)).toEqual([]);
  });

  it.skipIf(!hasOpenssl()).each(configs.map(({ block, config }) => [block.where, block, config] as const))(
    '%s is a whole configuration that loads, with placeholders for what it names',
    (_where, block, config) => {
      const dir = mkdtempSync(join(tmpdir(), 'etagere-docs-example-'));
      dirs.push(dir);
      const { file, env } = withPlaceholders(structuredClone(config), block, dir);
      expect(() => loadConfig({ file, env }), block.text).not.toThrow();
    },
  );

  it('hostile: a whole configuration with a mistake is refused the same way (the check is not vacuous)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'etagere-docs-example-'));
    dirs.push(dir);
    const block = { where: 'planted.md:1', text: 'consumers:\n  enabled: true\n  keys:\n    - {name: web, env: KEY_WEB}\n' };
    const { file, env } = withPlaceholders(
      { consumers: { enabled: true, keys: [{ name: 'web', env: 'KEY_WEB' }], unknown: 'maybe' } },
      block,
      dir,
    );
    expect(() => loadConfig({ file, env })).toThrow(/consumers\.unknown/);
  });

  it("the README's example passes the real `etagere check-config`", async () => {
    const readme = configs.find(({ block }) => block.where.startsWith('README.md'))!;
    const dir = mkdtempSync(join(tmpdir(), 'etagere-docs-example-'));
    dirs.push(dir);
    const { file, env } = withPlaceholders(structuredClone(readme.config), readme.block, dir);
    const cli = runCli(['check-config', '--config', file], { ...env, ETAGERE_CONFIG: undefined });
    const { code } = await cli.exited;
    expect(code, cli.stderr()).toBe(0);
    expect(cli.stderr()).toContain('the configuration is valid');
  }, 30_000);
});
