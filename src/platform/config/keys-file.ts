/**
 * Pure: consumers.keys_file, the consumer keys of a mounted Secret. One `name=key` line per key,
 * blank lines and `#` comments skipped. The config says who the consumers are and what they may do
 * (consumers.keys: name, weight, caps, allow); the file gives their keys, several per consumer
 * allowed (the old and the new one while clients move over). It is read at start and again when it
 * changes (src/pool/consumers/keys-reload.ts). Messages name the line, never its text.
 */
export interface ConsumerKeyLine {
  readonly name: string;
  readonly value: string;
  /** 1-based, counting blank and comment lines. */
  readonly line: number;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const KEY = /^[\x21-\x7e]{1,1024}$/;

/** What is wrong with one line, or undefined. Never quotes the line. */
function lineProblem(name: string, value: string): string | undefined {
  if (name === '') return 'write "name=key", the name of a consumer of consumers.keys';
  if (!NAME.test(name)) return 'the name before "=" must be 1-63 letters, digits, "_", "." or "-", starting with a letter or digit';
  if (value === '') return 'no key after "="';
  if (!KEY.test(value)) return 'the key must be 1-1024 printable characters without spaces';
  return undefined;
}

/** The file's keys, or why it cannot be read: the first malformed line ("consumer keys file line 3: ..."), never its text. */
export function parseConsumerKeysFile(text: string): ConsumerKeyLine[] | string {
  const lines: ConsumerKeyLine[] = [];
  const items = text.split(/\r?\n/);
  for (let index = 0; index < items.length; index++) {
    const item = items[index]!.trim();
    if (item === '' || item.startsWith('#')) continue;
    const equals = item.indexOf('=');
    const name = equals === -1 ? '' : item.slice(0, equals).trim();
    const value = equals === -1 ? '' : item.slice(equals + 1).trim();
    const problem = lineProblem(name, value);
    if (problem !== undefined) return `consumer keys file line ${index + 1}: ${problem} (value not shown)`;
    lines.push({ name, value, line: index + 1 });
  }
  return lines;
}

/**
 * Why the file's keys cannot be used with these configured consumers, or undefined: a name that
 * consumers.keys does not list (a consumer's rights are the config's to give), or a key that is
 * also another line's or a configured key (one key, one consumer).
 */
export function consumerKeysProblem(
  lines: readonly ConsumerKeyLine[],
  configured: ReadonlyArray<{ readonly name: string; readonly value?: string | undefined }>,
): string | undefined {
  const names = new Set(configured.map((key) => key.name));
  const seen = new Map<string, string>();
  configured.forEach((key, index) => {
    if (key.value !== undefined) seen.set(key.value, `consumers.keys[${index}]`);
  });
  for (const line of lines) {
    if (!names.has(line.name))
      return `consumer keys file line ${line.line}: no consumer "${line.name}" in consumers.keys (the config names each consumer and what it may use)`;
    const before = seen.get(line.value);
    if (before !== undefined) return `consumer keys file line ${line.line}: the same key as ${before} (value not shown)`;
    seen.set(line.value, `line ${line.line}`);
  }
  return undefined;
}
