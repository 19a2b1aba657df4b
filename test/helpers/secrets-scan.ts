/**
 * The secrets scan after the whole suite (vitest `globalSetup`, see vitest.config.ts).
 *
 * setup():    creates a capture directory and exports it in CAPTURE_DIR_ENV; test processes
 *             write their captures there (test/helpers/capture.ts).
 * teardown(): scans every captured file for every known secret value (test/helpers/secrets.ts:
 *             the KNOWN_SECRETS, the values recorded during the run) and for GitHub-shaped token
 *             patterns. Any hit sets the exit code to 1 and throws, so `vitest run` (and `npm test`) exits non-zero;
 *             the message names the file, its section and the secret's NAME, never its value.
 *             Prints one summary line: files scanned, bytes, tokens checked, hits.
 *             The directory is removed after a clean scan unless ETAGERE_KEEP_CAPTURES is set.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CAPTURE_DIR_ENV, SECTION_MARK } from './capture.js';
import { KNOWN_SECRETS, MIN_SECRET_LENGTH, SECRET_PATTERNS, type NamedSecret } from './secrets.js';

export interface ScanHit {
  /** The file, relative to the scanned directory. */
  file: string;
  /** The capture section the value was found in (its label). */
  section: string;
  /** The secret's name, or the pattern's: never the value. */
  secret: string;
}

export interface ScanResult {
  files: number;
  bytes: number;
  /** Distinct secret values looked for. */
  tokens: number;
  /** Values too short to look for (see MIN_SECRET_LENGTH). */
  skipped: number;
  hits: ScanHit[];
}

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** The secrets recorded by test processes under `<dir>/secrets` (one JSON object per line). */
export function recordedSecrets(dir: string): NamedSecret[] {
  const out: NamedSecret[] = [];
  let files: string[] = [];
  try {
    files = walk(join(dir, 'secrets'));
  } catch {
    return out;
  }
  for (const file of files) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      const parsed = JSON.parse(line) as Partial<NamedSecret>;
      if (typeof parsed.name === 'string' && typeof parsed.value === 'string') out.push({ name: parsed.name, value: parsed.value });
    }
  }
  return out;
}

function sectionAt(text: string, offset: number): string {
  const start = text.lastIndexOf(SECTION_MARK, offset);
  if (start < 0) return '(no section)';
  const from = start + SECTION_MARK.length;
  const end = text.indexOf('\n', from);
  return text.slice(from, end < 0 ? undefined : end);
}

/**
 * Looks for every secret (by value) and every SECRET_PATTERNS match in every file under `dir`,
 * except the `secrets` subdirectory (where the values themselves are kept).
 */
export function scanForSecrets(dir: string, secrets: readonly NamedSecret[]): ScanResult {
  const byValue = new Map<string, string>();
  let skipped = 0;
  for (const secret of secrets) {
    if (byValue.has(secret.value)) continue;
    if (secret.value.length < MIN_SECRET_LENGTH) {
      skipped++;
      continue;
    }
    byValue.set(secret.value, secret.name);
  }
  const secretsDir = join(dir, 'secrets');
  const files = walk(dir).filter((f) => !f.startsWith(secretsDir + '/') && f !== secretsDir);
  const hits: ScanHit[] = [];
  let bytes = 0;
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    bytes += Buffer.byteLength(text);
    const rel = relative(dir, file);
    for (const [value, name] of byValue) {
      const at = text.indexOf(value);
      if (at >= 0) hits.push({ file: rel, section: sectionAt(text, at), secret: name });
    }
    for (const pattern of SECRET_PATTERNS) {
      const match = pattern.re.exec(text);
      if (match !== null) hits.push({ file: rel, section: sectionAt(text, match.index), secret: pattern.name });
    }
  }
  return { files: files.length, bytes, tokens: byValue.size, skipped, hits };
}

let dir: string | undefined;

export function setup(): void {
  dir = mkdtempSync(join(tmpdir(), 'etagere-secrets-scan-'));
  process.env[CAPTURE_DIR_ENV] = dir;
}

export function teardown(): void {
  if (dir === undefined) return;
  const scanned = dir;
  const result = scanForSecrets(scanned, [...KNOWN_SECRETS, ...recordedSecrets(scanned)]);
  const mb = (result.bytes / 1024 / 1024).toFixed(1);
  console.log(
    `secrets scan: ${result.files} capture files (${mb} MB) scanned for ${result.tokens} token values ` +
      `(+${SECRET_PATTERNS.length} patterns; ${result.skipped} values under ${MIN_SECRET_LENGTH} characters skipped): ${result.hits.length} hits`,
  );
  if (result.hits.length === 0) {
    if (process.env.ETAGERE_KEEP_CAPTURES === undefined) rmSync(scanned, { recursive: true, force: true });
    else console.log(`secrets scan: captures kept in ${scanned}`);
    return;
  }
  const lines = result.hits.slice(0, 50).map((h) => `  ${h.file} [${h.section}]: ${h.secret}`);
  // vitest only logs an error thrown by a global teardown ("error during close") and would still
  // exit 0: the exit code is set here so that `npm test` fails.
  process.exitCode = 1;
  throw new Error(`secrets scan: ${result.hits.length} token values found in captured output (kept in ${scanned}):\n${lines.join('\n')}`);
}
