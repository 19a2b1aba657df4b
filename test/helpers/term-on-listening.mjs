/**
 * Preloaded into a CLI process (NODE_OPTIONS=--import): the moment the process writes its
 * "listening" line (or what TERM_ON_WRITE matches), it sends itself SIGTERM, before any later
 * statement can run. That is the earliest a supervisor reading the line could signal; the process
 * must then stop gracefully.
 */
import fs from 'node:fs';

const pattern = new RegExp(process.env.TERM_ON_WRITE ?? 'listening');

let sent = false;
function check(chunk) {
  if (sent) return;
  const text = typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString('latin1') : '';
  if (!pattern.test(text)) return;
  sent = true;
  process.kill(process.pid, 'SIGTERM');
}

for (const name of ['write', 'writeSync']) {
  const original = fs[name];
  fs[name] = function (fd, chunk, ...rest) {
    if (fd === 1) check(chunk);
    return original.call(this, fd, chunk, ...rest);
  };
}
const stdoutWrite = process.stdout.write;
process.stdout.write = function (chunk, ...rest) {
  check(chunk);
  return stdoutWrite.call(this, chunk, ...rest);
};
