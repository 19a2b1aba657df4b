/**
 * Several `etagere serve` processes (real children) sharing one Redis: started on free ports and
 * returned once each one is connected to Redis; stopped with SIGTERM.
 */
import { request } from 'undici';
import { serveCli, type CliProcess } from './cli.js';
import { until } from './proxy.js';

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
    const { cli, url, admin } = await serveCli({ LOG_LEVEL: 'warn', ...env });
    replicas.push({ cli, url, adminUrl: admin });
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
