/**
 * `node --import ./test/helpers/record-imports.mjs ...`: appends the URL of every module the process
 * loads (ES modules through a load hook, CommonJS through Module._load) to the file named by
 * RECORD_IMPORTS_TO, one per line.
 */
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

const out = process.env.RECORD_IMPORTS_TO;
if (out) {
  const hooks = `
    import { appendFileSync } from 'node:fs';
    export async function load(url, context, next) {
      appendFileSync(${JSON.stringify(out)}, url + '\\n');
      return next(url, context);
    }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
  const Module = createRequire(import.meta.url)('node:module');
  const original = Module._load;
  Module._load = function (request, parent, isMain) {
    const loaded = original.call(this, request, parent, isMain);
    try {
      appendFileSync(out, `${pathToFileURL(Module._resolveFilename(request, parent, isMain)).href}\n`);
    } catch {
      // a builtin: node:... has no file
    }
    return loaded;
  };
}
