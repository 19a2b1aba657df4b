/**
 * Captures of what the proxies under test said, for the secrets scan after the whole suite
 * (test/helpers/secrets-scan.ts): log text, /metrics and admin answers, CLI output, and answers
 * with status >= 400. The scan's globalSetup creates a directory and exports it in
 * CAPTURE_DIR_ENV; every test process appends its captures to its own file there
 * (`captures/<pid>.txt`, sections headed by SECTION_MARK) and the secrets it saw to
 * `secrets/<pid>.jsonl`, which the scan reads and never scans. Without the variable (a test
 * run outside vitest's globalSetup) nothing is written.
 *
 * Writes are synchronous appends, so nothing is lost when a test process ends abruptly.
 * Identical texts are written once per process (answers repeat a lot under load).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { takeRecordedSecrets } from './secrets.js';

export const CAPTURE_DIR_ENV = 'ETAGERE_TEST_CAPTURE_DIR';
export const SECTION_MARK = '\n=== etagere-capture: ';

export type Origin = 'proxy' | 'admin';

const dir = process.env[CAPTURE_DIR_ENV];
const seen = new Set<string>();
const origins = new Map<string, Origin>();
const pending = new Set<() => void>();
let ready = false;

function files(): { captures: string; secrets: string } | undefined {
  if (dir === undefined || dir === '') return undefined;
  const out = { captures: join(dir, 'captures', `${process.pid}.txt`), secrets: join(dir, 'secrets', `${process.pid}.jsonl`) };
  if (!ready) {
    mkdirSync(join(dir, 'captures'), { recursive: true });
    mkdirSync(join(dir, 'secrets'), { recursive: true });
    ready = true;
  }
  return out;
}

/** Appends to a capture file; a capture never fails a test (an unwritable directory loses it). */
function append(file: string, text: string): void {
  try {
    appendFileSync(file, text);
  } catch {
    try {
      ready = false;
      files();
      appendFileSync(file, text);
    } catch {
      // lost: the scan covers less, the test is unaffected
    }
  }
}

let testFile = '';

/** The test file running in this process, relative to the repository (set by capture-setup.ts). */
export function setTestFile(file: string): void {
  testFile = file;
}

/** " in <test file>", for labels and secret names. */
export function inTestFile(): string {
  return testFile === '' ? '' : ` in ${testFile}`;
}

/** Whether captures are being written (the scan's globalSetup ran). */
export function capturing(): boolean {
  return dir !== undefined && dir !== '';
}

/** Writes the secrets recorded since the last call to this process's secrets file. */
export function persistSecrets(): void {
  let paths: ReturnType<typeof files>;
  try {
    paths = files();
  } catch {
    return;
  }
  if (paths === undefined) return;
  const secrets = takeRecordedSecrets();
  if (secrets.length > 0) append(paths.secrets, secrets.map((s) => `${JSON.stringify(s)}\n`).join(''));
}

/**
 * Appends `text` under a section named `label` (a label never holds a secret: no query strings,
 * no header values). A text already captured by this process is skipped.
 */
export function capture(label: string, text: string): void {
  let paths: ReturnType<typeof files>;
  try {
    paths = files();
  } catch {
    return;
  }
  if (paths === undefined || text.length === 0) return;
  const digest = text.length <= 256 ? text : createHash('sha1').update(text).digest('base64');
  if (seen.has(digest)) return;
  seen.add(digest);
  persistSecrets(); // the values this text must be scanned for are on disk before it
  append(paths.captures, `${SECTION_MARK}${label.replace(/\s+/g, ' ')}\n${text}\n`);
}

/** Marks a base URL as a proxy listener or an admin listener (their answers are captured). */
export function registerOrigin(url: string, kind: Origin): void {
  if (url === '') return;
  try {
    origins.set(new URL(url).origin, kind);
  } catch {
    // not a URL: nothing to watch
  }
}

export function originKind(origin: string): Origin | undefined {
  return origins.get(origin);
}

/** A capture to make when the test file ends, unless `done` is called first (a proxy never closed). */
export function atFileEnd(capture: () => void): { done(): void } {
  pending.add(capture);
  return { done: () => pending.delete(capture) };
}

/** Runs the captures still pending (the setup file's afterAll). */
export function flushPending(): void {
  for (const pendingCapture of [...pending]) {
    pending.delete(pendingCapture);
    try {
      pendingCapture();
    } catch {
      // a capture never fails a test
    }
  }
  persistSecrets();
}
