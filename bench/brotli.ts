/**
 * Does re-encoding a stored body to brotli pay off at store time (an optional `br`)?
 * Sizes and µs per call of gzip and brotli at several levels, and of decoding each, for the bench's
 * GitHub repository record (bench/memory.ts) and a page of 100 of them.
 *
 *   npx tsx bench/brotli.ts
 */
import { brotliCompressSync, brotliDecompressSync, constants, gunzipSync, gzipSync } from 'node:zlib';
import { makeEntry } from './memory.js';

/** Mean µs per call of `encode` over `runs` calls (after one warm-up), and the size of its output. */
function timed(encode: () => Buffer, runs: number): { micros: number; bytes: number } {
  let out = encode();
  const started = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) out = encode();
  return { micros: Number(process.hrtime.bigint() - started) / runs / 1000, bytes: out.length };
}

const brotli = (body: Buffer, quality: number): Buffer =>
  brotliCompressSync(body, {
    params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });

const now = Date.now();
const record = (index: number): Buffer => gunzipSync(makeEntry(index, now, 'repo-gzip').entry.body);
const page = Buffer.from(`[${Array.from({ length: 100 }, (_, index) => record(index).toString('utf8')).join(',')}]`);

for (const [name, body, runs] of [
  ['one repository', record(7), 300],
  ['page of 100', page, 20],
] as const) {
  const cells = [`identity ${body.length} B`];
  for (const level of [1, 6, 9]) {
    const { micros, bytes } = timed(() => gzipSync(body, { level }), runs);
    cells.push(`gzip-${level} ${bytes} B ${micros.toFixed(0)} µs`);
  }
  for (const quality of [4, 5, 6, 9, 11]) {
    const { micros, bytes } = timed(() => brotli(body, quality), quality >= 9 ? Math.max(3, runs / 10) : runs);
    cells.push(`br-${quality} ${bytes} B ${micros.toFixed(0)} µs`);
  }
  const gzipped = gzipSync(body);
  const brotlied = brotli(body, 5);
  cells.push(`decode gzip ${timed(() => gunzipSync(gzipped), runs).micros.toFixed(0)} µs`);
  cells.push(`decode br-5 ${timed(() => brotliDecompressSync(brotlied), runs).micros.toFixed(0)} µs`);
  process.stdout.write(`${name}:\n  ${cells.join('\n  ')}\n`);
}
