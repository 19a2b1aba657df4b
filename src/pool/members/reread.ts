/**
 * A watched file read again for a reload (the tokens file, the consumer keys file): its text; or
 * `unchanged` when a file event finds the bytes of the last reading (an event that changed
 * nothing costs a read and a digest); or why it cannot be read (its code, never its content). A
 * signal always gives the text, so SIGHUP reports the same bad file again.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** What asked for the reload: SIGHUP (or a caller acting for it), or a change of the file. */
export type ReloadTrigger = 'signal' | 'file';

export type Reread = { readonly text: string } | { readonly unchanged: true } | { readonly why: string };

const digest = (text: string): string => createHash('sha256').update(text).digest('hex');

export function createReread(file: string, readFile: (path: string) => string = (path) => readFileSync(path, 'utf8')) {
  let lastDigest: string | undefined;
  return (trigger: ReloadTrigger): Reread => {
    let text: string;
    try {
      text = readFile(file);
    } catch (err) {
      return { why: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}` };
    }
    const textDigest = digest(text);
    if (trigger === 'file' && textDigest === lastDigest) return { unchanged: true };
    lastDigest = textDigest; // the same bad bytes are reported once per signal, not once per file event
    return { text };
  };
}
