/**
 * What every command of the command line shares: the one-line error and its exit status, integer
 * and port flags, and the signal handlers. Imports nothing but Node, so `--version` stays fast.
 */

/** One line on stderr (then `usage`, when given: a command's usage lines), and the exit status. */
export function fail(message: string, code = 2, usage?: string): never {
  process.stderr.write(`etagere: ${message}\n${usage ?? ''}`);
  process.exit(code);
}

export function intFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

/** A port flag: 0-65535 (0: any free port), else exit 2 naming the flag. */
export function portFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) fail(`--${name} must be a port number, 0-65535, got "${printable(value)}"`);
  return Number(value);
}

/** A flag's value as an error line may quote it: control characters shown, at most 40 characters. */
function printable(value: string): string {
  const shown = value.replace(/[\x00-\x1f\x7f]/g, (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return shown.length > 40 ? `${shown.slice(0, 40)}...` : shown;
}

export function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}

/**
 * SIGTERM and SIGINT stop gracefully (a second one exits at once). With `reload` (etagere serve),
 * SIGHUP calls it (the tokens file) instead of ending the process, as daemons do.
 */
export function onSignals(stop: (signal: NodeJS.Signals) => Promise<void>, reload?: () => Promise<unknown>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`etagere: second ${signal}, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    stop(signal).then(
      () => process.exit(0),
      (err: unknown) => fail(`shutdown failed: ${(err as Error).message}`, 1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  if (reload !== undefined)
    process.on('SIGHUP', () => {
      if (!stopping) void reload();
    });
}
