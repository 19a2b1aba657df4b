/**
 * Keeps docs/configuration.md true to the code. The zod schema (src/platform/config/schema.ts) is walked,
 * not copied: every key path it accepts must be documented, every documented key must exist, and
 * each documented default must equal the schema's. The environment variables that
 * src/platform/config/load.ts reads, and the flags of the commands (src/main/cli*.ts), must be documented too.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ENV_VARS } from '../../src/platform/config/load.js';
import { configSchema } from '../../src/platform/config/schema.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');

/** What the schema says about one key path. */
interface SchemaKey {
  path: string;
  /** An object or a list of objects: its keys are documented one by one. */
  container: boolean;
  /** The schema default, when there is one (an object's prefault is not a documented default). */
  defaultValue?: unknown;
  /** Neither a default nor optional/nullable: an item is invalid without it. */
  required: boolean;
  /** Allowed literal values (enums, literals in unions), each of which the Type cell must name. */
  literals: string[];
}

/** The schema node under default/prefault/optional/nullable/transform wrappers, and what they said. */
function unwrap(schema: z.core.$ZodType): { inner: z.core.$ZodType; defaultValue?: unknown; hasDefault: boolean; optional: boolean } {
  let node = schema;
  let hasDefault = false;
  let optional = false;
  let defaultValue: unknown;
  for (;;) {
    if (node instanceof z.ZodDefault) {
      if (!hasDefault) defaultValue = node.def.defaultValue;
      hasDefault = true;
      node = node.def.innerType;
    } else if (node instanceof z.ZodPrefault) {
      hasDefault = true;
      node = node.def.innerType;
    } else if (node instanceof z.ZodOptional || node instanceof z.ZodNullable) {
      optional = true;
      node = node.def.innerType;
    } else if (node instanceof z.ZodPipe) {
      node = node.def.in;
    } else {
      return hasDefault ? { inner: node, defaultValue, hasDefault, optional } : { inner: node, hasDefault, optional };
    }
  }
}

function literalsOf(node: z.core.$ZodType): string[] {
  if (node instanceof z.ZodEnum) return node.options.map(String);
  if (node instanceof z.ZodLiteral) return node.values.size > 0 ? [...node.values].map(String) : [];
  if (node instanceof z.ZodUnion) return node.options.flatMap((o: z.core.$ZodType) => literalsOf(o));
  return [];
}

/** Every key path of an object schema, depth first: `a.b`, lists of objects as `a[].b`. */
function schemaKeys(shape: Record<string, z.core.$ZodType>, prefix = ''): SchemaKey[] {
  const out: SchemaKey[] = [];
  for (const [name, field] of Object.entries(shape)) {
    const path = `${prefix}${name}`;
    const { inner, defaultValue, hasDefault, optional } = unwrap(field);
    const element = inner instanceof z.ZodArray ? unwrap(inner.def.element).inner : undefined;
    const objectShape = inner instanceof z.ZodObject ? inner.shape : element instanceof z.ZodObject ? element.shape : undefined;
    const key: SchemaKey = { path, container: objectShape !== undefined, required: !hasDefault && !optional, literals: literalsOf(inner) };
    if (hasDefault && !(inner instanceof z.ZodObject)) key.defaultValue = defaultValue;
    out.push(key);
    if (objectShape !== undefined)
      out.push(...schemaKeys(objectShape as Record<string, z.core.$ZodType>, inner instanceof z.ZodArray ? `${path}[].` : `${path}.`));
  }
  return out;
}

/** One row of a markdown table, as trimmed cells. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());
}

/** The body rows of every table whose header row starts with these column names. */
function tableRows(markdown: string, header: readonly string[]): string[][] {
  const rows: string[][] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const head = cells(lines[i]!);
    if (!lines[i]!.trim().startsWith('|') || header.some((h, j) => head[j]?.toLowerCase() !== h)) continue;
    for (i += 2; i < lines.length && lines[i]!.trim().startsWith('|'); i++) rows.push(cells(lines[i]!));
  }
  return rows;
}

/** The first `code span` of a cell, or undefined. */
const codeSpan = (cell: string): string | undefined => /`([^`]+)`/.exec(cell)?.[1];

/** How a schema default is written in the Default column (inside its code span). */
function rendered(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return JSON.stringify(value);
}

const doc = read('docs/configuration.md');
const keys = schemaKeys(configSchema.shape as Record<string, z.core.$ZodType>);
const byPath = new Map(keys.map((k) => [k.path, k]));
const documented = new Map<string, string[]>();
for (const row of tableRows(doc, ['key', 'type', 'default', 'description'])) {
  const path = codeSpan(row[0] ?? '');
  if (path === undefined) throw new Error(`docs/configuration.md: a key row without a code span: | ${row.join(' | ')} |`);
  documented.set(path, row);
}

describe('docs/configuration.md against the zod schema', () => {
  it('walks the schema (sanity: known keys are found)', () => {
    expect(byPath.get('cache.max_bytes')?.defaultValue).toBe(256 * 1024 * 1024);
    expect(byPath.get('upstreams[].cache.policy')?.literals).toContain('rfc9111');
    expect(byPath.get('upstreams[].url')?.required).toBe(true);
    expect(documented.size).toBeGreaterThan(40);
  });

  it('documents every key of the schema', () => {
    const missing = keys.filter((k) => !k.container && !documented.has(k.path)).map((k) => k.path);
    expect(missing, 'keys in src/platform/config/schema.ts missing from docs/configuration.md').toEqual([]);
  });

  it('documents no key the schema does not have', () => {
    const unknown = [...documented.keys()].filter((p) => !byPath.has(p));
    expect(unknown, 'keys in docs/configuration.md that src/platform/config/schema.ts does not accept').toEqual([]);
  });

  it('gives each key the default of the schema', () => {
    const wrong: string[] = [];
    for (const [path, row] of documented) {
      const key = byPath.get(path);
      if (key === undefined) continue;
      const cell = row[2] ?? '';
      // A default is the cell's first code span; without one the cell starts with "required" or "—".
      const expected = 'defaultValue' in key ? `\`${rendered(key.defaultValue)}\`` : key.required ? 'required' : '—';
      const actual = 'defaultValue' in key ? `\`${codeSpan(cell) ?? cell}\`` : cell.startsWith(expected) ? expected : cell;
      if (actual !== expected) wrong.push(`${path}: documented ${JSON.stringify(cell)}, schema ${expected}`);
    }
    expect(wrong).toEqual([]);
  });

  it('names every allowed value of enumerated keys', () => {
    const missing: string[] = [];
    for (const key of keys) {
      const type = documented.get(key.path)?.[1] ?? '';
      for (const value of key.literals) if (!type.includes(`\`${value}\``)) missing.push(`${key.path}: ${value}`);
    }
    expect(missing).toEqual([]);
  });
});

describe('docs/configuration.md against the environment and the command line', () => {
  const envRows = tableRows(doc, ['variable', 'sets']).map((r) => codeSpan(r[0] ?? ''));
  /** Variables load.ts reads (env.NAME or env['NAME']), besides those it declares in ENV_VARS. */
  const readByLoader = [...read('src/platform/config/load.ts').matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!);
  const readByCli = [...read('src/main/cli.ts').matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!);

  it('lists every environment variable the loader reads, and no other', () => {
    const used = new Set([...Object.keys(ENV_VARS), ...readByLoader, ...readByCli]);
    expect(readByLoader.length).toBeGreaterThan(5);
    expect([...used].filter((v) => !envRows.includes(v)).sort()).toEqual([]);
    expect(envRows.filter((v) => v === undefined || !used.has(v))).toEqual([]);
  });

  /** The flags a source file names (`--port`, `--admin-port`). */
  const flagsOf = (text: string): Set<string> => new Set([...text.matchAll(/(?<![\w-])--([a-z][a-z-]*)/g)].map((m) => m[1]!));

  it("names every flag of the commands in src/main/cli*.ts (the fake upstream's: docs/fake-upstream.md)", () => {
    const modules = readdirSync(join(root, 'src/main')).filter((name) => /^cli.*\.ts$/.test(name) && !/^cli-(fake|help)\.ts$/.test(name));
    const flags = new Set(modules.flatMap((name) => [...flagsOf(read(`src/main/${name}`))]));
    expect(flags.size).toBeGreaterThan(15);
    expect([...flags].filter((f) => !doc.includes(`--${f}`)).sort()).toEqual([]);
    const fakeDoc = read('docs/fake-upstream.md');
    const fakeFlags = [...flagsOf(read('src/main/cli-fake.ts')), ...flagsOf(read('fake-github/flags.ts'))];
    expect(fakeFlags.filter((f) => !fakeDoc.includes(`--${f}`)).sort()).toEqual([]);
    // The help texts name both kinds.
    expect([...flagsOf(read('src/main/cli-help.ts'))].filter((f) => !doc.includes(`--${f}`) && !fakeDoc.includes(`--${f}`))).toEqual([]);
  });
});
