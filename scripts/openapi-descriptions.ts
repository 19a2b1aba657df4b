/**
 * GitHub's REST API descriptions from @octokit/openapi, fetched on demand rather than installed:
 * `npm pack` downloads the pinned package's tarball (about 29 MB; installed, it is 400 MB) once into
 * node_modules/.cache/etagere-openapi/, and the descriptions are read out of it in memory.
 */
import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';

/** The @octokit/openapi release the route table is generated from; raise it and regenerate. */
export const OPENAPI_VERSION = '23.0.2';

const CACHE = fileURLToPath(new URL('../node_modules/.cache/etagere-openapi/', import.meta.url));

/** Runs npm: the one running this script (`npm run`, `npx`), else the one on the PATH. */
function npm(args: string[]): void {
  const cli = process.env['npm_execpath'];
  if (cli !== undefined && /npm-cli\.[cm]?js$/.test(cli))
    execFileSync(process.execPath, [cli, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  else execFileSync('npm', args, { stdio: ['ignore', 'ignore', 'inherit'], shell: process.platform === 'win32' });
}

/** The cached tarball of @octokit/openapi `version`, downloaded first if missing (never left half-written). */
export function openapiTarball(version: string = OPENAPI_VERSION): string {
  const file = join(CACHE, `octokit-openapi-${version}.tgz`);
  if (existsSync(file)) return file;
  mkdirSync(CACHE, { recursive: true });
  const temp = mkdtempSync(join(CACHE, 'pack-'));
  try {
    process.stderr.write(`fetching @octokit/openapi@${version} (npm pack) into ${CACHE}\n`);
    npm(['pack', `@octokit/openapi@${version}`, '--pack-destination', temp, '--silent']);
    const packed = readdirSync(temp).find((name) => name.endsWith('.tgz'));
    if (packed === undefined) throw new Error(`npm pack @octokit/openapi@${version} wrote no tarball`);
    renameSync(join(temp, packed), file);
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
  return file;
}

/** A tar header's NUL-terminated text field. */
const field = (header: Buffer, start: number, length: number): string => {
  const text = header.toString('utf8', start, start + length);
  const nul = text.indexOf('\0');
  return nul === -1 ? text : text.slice(0, nul);
};

/**
 * The regular files of a .tgz whose path `want` accepts (every file's path is passed), read in one
 * streaming pass: a 512-byte header (ustar: name, octal size, type, prefix), the data, padding to 512.
 */
export async function readTgz(file: string, want: (path: string) => boolean): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  let pending: Buffer = Buffer.alloc(0);
  let left = 0; // bytes of the current entry's data and padding still to come
  let dataLeft = 0; // of which data
  let current: { path: string; chunks: Buffer[] } | undefined;
  for await (const chunk of createReadStream(file).pipe(createGunzip()) as AsyncIterable<Buffer>) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length > 0) {
      if (left > 0) {
        const take = Math.min(left, pending.length);
        if (current !== undefined && dataLeft > 0) current.chunks.push(pending.subarray(0, Math.min(take, dataLeft)));
        dataLeft = Math.max(0, dataLeft - take);
        left -= take;
        pending = pending.subarray(take);
        if (left === 0 && current !== undefined) files.set(current.path, Buffer.concat(current.chunks));
        continue;
      }
      if (pending.length < 512) break;
      const header = pending.subarray(0, 512);
      pending = pending.subarray(512);
      const name = field(header, 0, 100);
      if (name === '') continue; // the end-of-archive blocks
      const prefix = field(header, 345, 155);
      const path = prefix === '' ? name : `${prefix}/${name}`;
      const size = Number.parseInt(field(header, 124, 12).trim() || '0', 8);
      const regular = header[156] === 0x30 /* 0 */ || header[156] === 0;
      current = regular && want(path) ? { path, chunks: [] } : undefined;
      dataLeft = size;
      left = Math.ceil(size / 512) * 512;
      if (left === 0 && current !== undefined) files.set(path, Buffer.alloc(0));
    }
  }
  return files;
}
