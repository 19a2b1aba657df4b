/**
 * Runs the built etagere CLI (dist/src/main/cli.js, brought up to date by test/helpers/build-dist.ts before
 * the tests) as a child process. For the secrets scan after the suite (test/helpers/secrets-scan.ts)
 * it records the secrets in the child's environment and arguments, watches its listeners' answers,
 * and captures its output once it has exited.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { DIST_CLI } from './build-dist.js';
import { capture, capturing, inTestFile, registerOrigin } from './capture.js';
import { recordSecret } from './secrets.js';
import { until } from './until.js';
import { deadPort } from './upstream.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function runCli(args: string[], env: Record<string, string | undefined> = {}): CliProcess {
  const child = spawn(process.execPath, [DIST_CLI, ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  if (capturing()) {
    watchForScan(args, env);
    // 'close': the output streams have ended too.
    child.once('close', () =>
      capture(
        `etagere ${args[0] ?? ''} (pid ${child.pid ?? '?'})${inTestFile()}: stdout and stderr`,
        withoutDocumentedHint(`${out}\n${err}`),
      ),
    );
  }
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * `etagere demo` prints, on purpose, a curl command with one of the fake's documented demo tokens
 * (the same line is in the README): that one exact hint is not a leak. Any other occurrence of
 * the token in the output still is.
 */
const DOCUMENTED_HINT = /^(\s*curl -i -H 'Authorization: token )demo_token_alice_repo(' http:\/\/[^\s]+\/user)$/m;

function withoutDocumentedHint(output: string): string {
  return output.replace(DOCUMENTED_HINT, '$1<documented demo token>$2');
}

/** Environment variables that hold secrets (besides the token lists handled below). */
const SECRET_ENV = /TOKEN|SECRET|PASSWORD|^ETAGERE_KEY_|_KEY$/;

function watchForScan(args: readonly string[], env: Record<string, string | undefined>): void {
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (name === 'ETAGERE_TOKENS') {
      for (const item of value.split(',')) {
        const eq = item.indexOf('=');
        recordSecret(
          `ETAGERE_TOKENS entry ${eq > 0 ? item.slice(0, eq).trim() : '(unnamed)'} of a CLI process${inTestFile()}`,
          eq > 0 ? item.slice(eq + 1) : item,
        );
      }
    } else if (name === 'ETAGERE_TOKENS_FILE') {
      try {
        readFileSync(value, 'utf8')
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l !== '' && !l.startsWith('#'))
          .forEach((line, index) =>
            recordSecret(
              `ETAGERE_TOKENS_FILE line ${index + 1} of a CLI process${inTestFile()}`,
              line.includes('=') ? line.slice(line.indexOf('=') + 1) : line,
            ),
          );
      } catch {
        // no such file: the process reports it
      }
    } else if (SECRET_ENV.test(name)) {
      recordSecret(`environment variable ${name} of a CLI process${inTestFile()}`, value);
    }
  }
  const flag = (name: string): string | undefined => {
    const index = args.indexOf(name);
    return index < 0 ? undefined : args[index + 1];
  };
  const tokens = flag('--tokens');
  if (tokens !== undefined) {
    try {
      parseTokenSpec(tokens).forEach((t) => recordSecret(`--tokens entry ${t.login} of a CLI process${inTestFile()}`, t.token));
    } catch {
      // an invalid spec: the process reports it
    }
  }
  const host = env.HOST ?? '127.0.0.1';
  const port = env.PORT ?? flag('--port');
  const adminPort = env.ADMIN_PORT ?? flag('--admin-port');
  if (port !== undefined) registerOrigin(`http://${host}:${port}`, 'proxy');
  if (adminPort !== undefined) registerOrigin(`http://127.0.0.1:${adminPort}`, 'admin');
}

/** The CLI's exit, and its stderr lines (once both outputs have ended). */
export async function finished(cli: CliProcess): Promise<{ code: number | null; lines: string[] }> {
  const { code } = await cli.exited;
  await until(() => cli.child.stdout!.readableEnded && cli.child.stderr!.readableEnded, 5_000, 'the output to end');
  return {
    code,
    lines: cli
      .stderr()
      .split('\n')
      .filter((line) => line !== ''),
  };
}

/** The JSON log lines a process has written so far. */
export function logLines(cli: CliProcess): Array<Record<string, unknown>> {
  return cli
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

export interface ServedCli {
  cli: CliProcess;
  url: string;
  admin: string;
}

/** `etagere serve` on free loopback ports, with no config file unless `env` names one; `env` goes on top. */
export async function serveCli(env: Record<string, string | undefined>): Promise<ServedCli> {
  const [port, adminPort] = [await deadPort(), await deadPort()];
  const cli = runCli(['serve'], {
    PORT: String(port),
    HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    ETAGERE_CONFIG: undefined,
    ...env,
  });
  return { cli, url: `http://127.0.0.1:${port}`, admin: `http://127.0.0.1:${adminPort}` };
}
