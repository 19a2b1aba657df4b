/**
 * Several `etagere serve` processes (real children) sharing one Redis: started on free ports and
 * returned once each one is connected to Redis; stopped with SIGTERM.
 */
import { request } from 'undici';
import { runCli, type CliProcess } from './cli.js';
import { until } from './proxy.js';
import { deadPort } from './upstream.js';

export interface Replica {
  cli: CliProcess;
  url: string;
  adminUrl: string;
}

export async function metric(adminUrl: string, name: string): Promise<string> {
  const res = await request(`${adminUrl}/metrics`);
  const text = await res.body.text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');
}

export async function startReplicas(count: number, env: Record<string, string | undefined>): Promise<Replica[]> {
  const replicas: Replica[] = [];
  for (let i = 0; i < count; i++) {
    const [port, adminPort] = [await deadPort(), await deadPort()];
    const cli = runCli(['serve'], {
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      ETAGERE_CONFIG: undefined,
      LOG_LEVEL: 'warn',
      ...env,
    });
    replicas.push({ cli, url: `http://127.0.0.1:${port}`, adminUrl: `http://127.0.0.1:${adminPort}` });
  }
  for (const replica of replicas) {
    await until(
      async () => {
        try {
          return (await metric(replica.adminUrl, 'etagere_redis_up')).endsWith(' 1');
        } catch {
          return false;
        }
      },
      20_000,
      'a replica to start and reach Redis',
    );
  }
  return replicas;
}

export async function stopReplicas(replicas: readonly Replica[]): Promise<void> {
  for (const replica of replicas) replica.cli.child.kill('SIGTERM');
  await Promise.all(replicas.map((r) => r.cli.exited));
}
