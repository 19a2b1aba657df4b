/**
 * Static checks of the deployment files (Dockerfile, docker-compose.yml, Prometheus, Grafana and the
 * Kubernetes sidecar manifest). Nothing here runs Docker or a cluster: the files are parsed and
 * cross-checked against each other and against the app (its env vars, its admin port, its paths).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { ENV_VARS } from '../../src/platform/config/load.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
function obj(value: unknown, what: string): Obj {
  if (!isObj(value)) throw new Error(`${what}: expected a mapping, got ${JSON.stringify(value)}`);
  return value;
}
function arr(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new Error(`${what}: expected a list, got ${JSON.stringify(value)}`);
  return value;
}
function str(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new Error(`${what}: expected a string, got ${JSON.stringify(value)}`);
  return value;
}

// ---------------------------------------------------------------------------------------------
// docker-compose.yml

const compose = obj(parse(read('docker-compose.yml')), 'docker-compose.yml');
const services = obj(compose.services, 'services');
const service = (name: string): Obj => obj(services[name], `services.${name}`);

/** Short-syntax ("8080:8080", "127.0.0.1:9090:9090") and long-syntax ports as {host, container}. */
function ports(svc: Obj): Array<{ host: string | undefined; container: number }> {
  return portBindings(svc).map(({ host, container }) => ({ host, container }));
}

/** The same with the host address each port is published on (undefined: every address). */
function portBindings(svc: Obj): Array<{ ip: string | undefined; host: string | undefined; container: number }> {
  if (svc.ports === undefined) return [];
  return arr(svc.ports, 'ports').map((port) => {
    if (isObj(port)) {
      return {
        ip: port.host_ip === undefined ? undefined : String(port.host_ip),
        host: port.published === undefined ? undefined : String(port.published),
        container: Number(port.target),
      };
    }
    const parts = String(port).split('/')[0]!.split(':');
    const container = Number(parts[parts.length - 1]);
    return {
      ip: parts.length >= 3 ? parts.slice(0, -2).join(':') : undefined,
      host: parts.length >= 2 ? parts[parts.length - 2] : undefined,
      container,
    };
  });
}

/** Every string value in a parsed YAML tree, with its path. */
function strings(value: unknown, path: string): Array<[string, string]> {
  if (typeof value === 'string') return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((item, index) => strings(item, `${path}[${index}]`));
  if (isObj(value)) return Object.entries(value).flatMap(([key, item]) => strings(item, path === '' ? key : `${path}.${key}`));
  return [];
}

/** environment as a map, from either the list form (NAME=value) or the map form. */
function environment(svc: Obj): Record<string, string> {
  const env = svc.environment;
  if (env === undefined) return {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((item) => {
        const entry = String(item);
        const equals = entry.indexOf('=');
        return equals < 0 ? [entry, ''] : [entry.slice(0, equals), entry.slice(equals + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(obj(env, 'environment')).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

/** Host paths of bind mounts (short "./a:/b[:ro]" or long {type: bind, source}). Named volumes are skipped. */
function bindSources(svc: Obj): string[] {
  if (svc.volumes === undefined) return [];
  const out: string[] = [];
  for (const volume of arr(svc.volumes, 'volumes')) {
    if (isObj(volume)) {
      if (volume.type === 'bind') out.push(str(volume.source, 'volumes[].source'));
      continue;
    }
    const source = String(volume).split(':')[0]!;
    if (source.startsWith('.') || source.startsWith('/') || source.startsWith('~')) out.push(source);
  }
  return out;
}

function dependsOn(svc: Obj): string[] {
  const dependencies = svc.depends_on;
  if (dependencies === undefined) return [];
  return Array.isArray(dependencies) ? dependencies.map(String) : Object.keys(obj(dependencies, 'depends_on'));
}

function command(svc: Obj): string[] {
  const value = svc.command;
  return Array.isArray(value)
    ? value.map(String)
    : String(value ?? '')
        .split(/\s+/)
        .filter((s) => s.length > 0);
}

describe('docker-compose.yml', () => {
  it('has the etagere, redis, prometheus, grafana and fake-upstream services with their ports', () => {
    const expected: Record<string, Array<[string, number]>> = {
      etagere: [
        ['8080', 8080],
        ['9090', 9090],
      ],
      prometheus: [['9091', 9090]],
      grafana: [['3000', 3000]],
      'fake-upstream': [['9100', 9100]],
    };
    for (const [name, mappings] of Object.entries(expected)) {
      const got = ports(service(name));
      for (const [host, container] of mappings) expect(got, `${name} publishes ${host}:${container}`).toContainEqual({ host, container });
    }
    // Pulled images are pinned by tag (what compose pulls today is what it pulls next year).
    expect(service('redis').image).toBe('redis:7.4.2-alpine');
    expect(service('prometheus').image).toMatch(/^prom\/prometheus:v\d+\.\d+\.\d+$/);
    expect(service('grafana').image).toMatch(/^grafana\/grafana-oss:\d+\.\d+\.\d+$/);
    // The image compose builds is tagged with the package's version, never :latest.
    expect(service('etagere').image).toBe(`etagere:${PACKAGE_VERSION}`);
  });

  it('publishes every port on the host loopback only', () => {
    const published = Object.entries(services).flatMap(([name, svc]) => portBindings(obj(svc, name)).map((p) => [name, p] as const));
    expect(published.length).toBeGreaterThanOrEqual(5);
    for (const [name, port] of published)
      expect(port.ip, `${name} publishes ${port.host}:${port.container} on 127.0.0.1`).toBe('127.0.0.1');
  });

  it('uses only ${VAR} substitutions that both docker compose and podman-compose 1.0 accept', () => {
    // podman-compose 1.0 (Debian) leaves ${VAR:-} (an empty default) in place, literally; the same
    // value under docker compose is blank. Plain ${VAR} means the same in both.
    const substituted = strings(compose, '').filter(([, value]) => value.includes('$'));
    expect(substituted.length).toBeGreaterThan(0);
    for (const [path, value] of substituted) {
      for (const match of value.matchAll(/\$(\$|\{[^}]*\}|[A-Za-z_]\w*)/g)) {
        if (match[1] === '$') continue;
        expect(match[1], `${path}: ${match[0]} is $NAME or \${NAME}`).toMatch(/^(\{[A-Za-z_]\w*\}|[A-Za-z_]\w*)$/);
      }
    }
  });

  it('builds etagere from the Dockerfile and makes it depend on redis', () => {
    const etagere = service('etagere');
    expect(etagere.build === '.' || (isObj(etagere.build) && etagere.build.context === '.')).toBe(true);
    expect(dependsOn(etagere)).toContain('redis');
  });

  it('runs redis without persistence', () => {
    const cmd = command(service('redis')).join(' ');
    expect(cmd).toMatch(/--save\s+(""|''|\s|$)/);
    expect(cmd).toMatch(/--appendonly no/);
  });

  it('gives the etagere service only environment variables the app knows, with the expected values', () => {
    const env = environment(service('etagere'));
    const known = Object.keys(ENV_VARS);
    for (const name of Object.keys(env)) expect(known, `${name} is in ENV_VARS (src/platform/config/load.ts)`).toContain(name);
    expect(env.REDIS_URL).toBe('redis://redis:6379/0');
    expect(env.ADMIN_HOST).toBe('0.0.0.0'); // otherwise Prometheus cannot scrape the admin port
    expect(env.ETAGERE_ADMIN_TOKEN).toBe('${ETAGERE_ADMIN_TOKEN}'); // blank: admin.open in config/container.yaml
    // Plain ${VAR}: unset gives a blank value, which the app reads as unset (no pool, api.github.com).
    expect(env.ETAGERE_TOKENS).toBe('${ETAGERE_TOKENS}');
    expect(env.UPSTREAM_URL).toBe('${UPSTREAM_URL}');
    // The redis host in REDIS_URL is a compose service.
    expect(Object.keys(services)).toContain(new URL(env.REDIS_URL!).hostname);
  });

  it('mounts only host paths that exist in the repository', () => {
    const sources = Object.entries(services).flatMap(([name, svc]) => bindSources(obj(svc, name)).map((s) => [name, s] as const));
    expect(sources.length).toBeGreaterThanOrEqual(3);
    for (const [name, source] of sources) {
      expect(isAbsolute(source), `${name}: ${source} is relative to the repository`).toBe(false);
      expect(existsSync(resolve(root, source)), `${name}: ${source} exists`).toBe(true);
    }
  });

  it('mounts the Prometheus config and the Grafana provisioning and dashboards where the images expect them', () => {
    const mounts = (name: string): string[] => arr(service(name).volumes, `${name}.volumes`).map(String);
    expect(mounts('prometheus')).toContainEqual(
      expect.stringMatching(/^\.\/config\/prometheus\.yml:\/etc\/prometheus\/prometheus\.yml(:ro)?$/),
    );
    expect(mounts('grafana')).toContainEqual(expect.stringMatching(/^\.\/grafana\/provisioning:\/etc\/grafana\/provisioning(:ro)?$/));
    expect(mounts('grafana')).toContainEqual(expect.stringMatching(/^\.\/grafana\/dashboards:\/var\/lib\/grafana\/dashboards(:ro)?$/));
    const genv = environment(service('grafana'));
    expect(genv.GF_AUTH_ANONYMOUS_ENABLED).toBe('true');
    expect(genv.GF_AUTH_ANONYMOUS_ORG_ROLE).toBe('Viewer');
  });

  it('puts the fake upstream under the demo profile, built from the same Dockerfile, listening on 0.0.0.0:9100', () => {
    const fake = service('fake-upstream');
    expect(arr(fake.profiles, 'profiles')).toContain('demo');
    expect(fake.build === '.' || (isObj(fake.build) && fake.build.context === '.')).toBe(true);
    expect(command(fake)).toEqual(['node', 'dist/src/main/cli.js', 'fake-upstream', '--port', '9100', '--host', '0.0.0.0']);
    // No always-on service may depend on it: without --profile demo it does not exist.
    for (const [name, svc] of Object.entries(services)) {
      if (name !== 'fake-upstream') expect(dependsOn(obj(svc, name))).not.toContain('fake-upstream');
    }
  });

  it('puts Jaeger under the tracing profile, its UI on loopback, and hands etagere the OTLP endpoint variable', () => {
    const jaeger = service('jaeger');
    expect(arr(jaeger.profiles, 'profiles')).toContain('tracing');
    expect(jaeger.image).toMatch(/^jaegertracing\/jaeger:2\./);
    expect(ports(jaeger)).toContainEqual({ host: '16686', container: 16686 });
    // Blank unless given: tracing is off by default, and nothing waits for Jaeger.
    expect(environment(service('etagere')).OTEL_EXPORTER_OTLP_ENDPOINT).toBe('${OTEL_EXPORTER_OTLP_ENDPOINT}');
    for (const [name, svc] of Object.entries(services)) if (name !== 'jaeger') expect(dependsOn(obj(svc, name))).not.toContain('jaeger');
    expect(read('docker-compose.yml')).toContain('OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose --profile tracing up');
  });

  it('documents both ways to run it in its header comment', () => {
    const text = read('docker-compose.yml');
    const header = text.slice(0, text.indexOf('services:'));
    expect(header).toContain('docker compose up');
    expect(header).toContain(
      'UPSTREAM_URL=http://fake-upstream:9100 ETAGERE_TOKENS=alice=demo_token_alice_public,bob=demo_token_bob_public docker compose --profile demo up',
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Prometheus and Grafana

describe('Prometheus and Grafana configuration', () => {
  it('scrapes etagere:9090 every 5 s, a port the compose etagere service exposes', () => {
    const prom = obj(parse(read('config/prometheus.yml')), 'prometheus.yml');
    const job = arr(prom.scrape_configs, 'scrape_configs')
      .map((j) => obj(j, 'scrape_config'))
      .find((j) => j.job_name === 'etagere');
    expect(job).toBeDefined();
    expect(job!.scrape_interval).toBe('5s');
    expect(job!.metrics_path ?? '/metrics').toBe('/metrics');
    const targets = arr(job!.static_configs, 'static_configs').flatMap((s) => arr(obj(s, 'static_config').targets, 'targets').map(String));
    expect(targets).toContain('etagere:9090');
    for (const target of targets) {
      const [host, port] = target.split(':');
      expect(Object.keys(services)).toContain(host);
      expect(ports(service(host!)).map((p) => p.container)).toContain(Number(port));
    }
  });

  it('provisions a default Prometheus datasource with uid prometheus', () => {
    const ds = obj(parse(read('grafana/provisioning/datasources/prometheus.yml')), 'datasources file');
    const prom = arr(ds.datasources, 'datasources')
      .map((d) => obj(d, 'datasource'))
      .find((d) => d.name === 'Prometheus');
    expect(prom).toMatchObject({ type: 'prometheus', uid: 'prometheus', url: 'http://prometheus:9090', isDefault: true });
    // The URL is the compose service and its container port.
    expect(ports(service('prometheus')).map((p) => p.container)).toContain(9090);
  });

  it('provisions dashboards from the directory the compose file mounts', () => {
    const dash = obj(parse(read('grafana/provisioning/dashboards/etagere.yml')), 'dashboards file');
    const providers = arr(dash.providers, 'providers').map((p) => obj(p, 'provider'));
    expect(providers.length).toBeGreaterThan(0);
    for (const provider of providers) {
      expect(provider.type).toBe('file');
      expect(obj(provider.options, 'options').path).toBe('/var/lib/grafana/dashboards');
    }
  });

  // grafana/dashboards/etagere.json is written separately and may not exist yet: when it is absent
  // this test checks nothing more; when present it must be valid JSON whose datasource references
  // resolve (the provisioned uid "prometheus", a dashboard variable, or the default datasource).
  it('has a well-formed etagere dashboard if one is present', () => {
    const file = join(root, 'grafana/dashboards/etagere.json');
    if (!existsSync(file)) return;
    const dashboard = obj(JSON.parse(readFileSync(file, 'utf8')) as unknown, 'etagere.json');
    expect(typeof dashboard.title).toBe('string');
    const variables = new Set(
      (isObj(dashboard.templating) && Array.isArray(dashboard.templating.list) ? dashboard.templating.list : [])
        .filter(isObj)
        .map((v) => String(v.name)),
    );
    const uids: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (isObj(node)) {
        if (isObj(node.datasource) && typeof node.datasource.uid === 'string') uids.push(node.datasource.uid);
        Object.values(node).forEach(walk);
      }
    };
    walk(dashboard);
    for (const uid of uids) {
      if (uid === 'prometheus' || uid === '-- Grafana --' || uid === 'grafana') continue;
      const variable = /^\$\{?([A-Za-z0-9_]+)/.exec(uid);
      expect(variable !== null && variables.has(variable[1]!), `datasource uid ${uid} is "prometheus" or a dashboard variable`).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Dockerfile

interface Instruction {
  op: string;
  args: string;
}

/** Instructions of a Dockerfile (comments dropped, backslash continuations joined). */
function dockerInstructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\r?\n/g, ' ');
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .map((line) => {
      const parts = /^(\S+)\s*(.*)$/.exec(line)!;
      return { op: parts[1]!.toUpperCase(), args: parts[2]!.trim() };
    });
}

describe('Dockerfile', () => {
  const instructions = dockerInstructions(read('Dockerfile'));
  const all = (op: string): Instruction[] => instructions.filter((i) => i.op === op);
  const stages = all('FROM');
  // The runtime stage: everything after the last FROM.
  const lastFrom = instructions.lastIndexOf(stages[stages.length - 1]!);
  const runtime = instructions.slice(lastFrom);

  it('builds every stage on node:20-slim', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const from of stages) expect(from.args).toMatch(/^node:20-slim(\s|$)/);
  });

  it('builds with npm ci and ships production dependencies only', () => {
    const runs = all('RUN').map((r) => r.args);
    expect(runs.some((r) => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r))).toBe(true);
    expect(runs.some((r) => /npm prune --omit=dev|npm ci\b.*--omit=dev/.test(r))).toBe(true);
  });

  it('runs the runtime stage as a non-root user', () => {
    const users = runtime.filter((i) => i.op === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users[users.length - 1]!.args.split(':')[0];
    expect(['root', '0']).not.toContain(user);
  });

  it('sets WORKDIR, the env, the ports and the files the runtime needs', () => {
    expect(runtime.filter((i) => i.op === 'WORKDIR').map((i) => i.args)).toContain('/app');
    const env = runtime
      .filter((i) => i.op === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toMatch(/NODE_ENV=production/);
    expect(env).not.toMatch(/ADMIN_HOST/); // the admin port stays on the container's loopback unless told
    const exposed = runtime.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/));
    expect(exposed).toEqual(expect.arrayContaining(['8080', '9090']));
    const copies = runtime
      .filter((i) => i.op === 'COPY')
      .map((i) => i.args)
      .join('\n');
    for (const what of ['dist', 'config', 'package.json', 'node_modules']) expect(copies).toContain(what);
  });

  it('has a HEALTHCHECK that uses node to GET the admin /healthz', () => {
    const hc = runtime.filter((i) => i.op === 'HEALTHCHECK');
    expect(hc).toHaveLength(1);
    expect(hc[0]!.args).toMatch(/CMD\s+\[?\s*"?node"?/);
    expect(hc[0]!.args).toContain('http://127.0.0.1:');
    expect(hc[0]!.args).toContain('9090');
    expect(hc[0]!.args).toContain('/healthz');
    expect(hc[0]!.args).not.toMatch(/\bcurl\b|\bwget\b/);
  });

  it('starts the proxy with a config file and an entry point that exist in the repo', () => {
    const cmds = runtime.filter((i) => i.op === 'CMD');
    expect(cmds).toHaveLength(1);
    const cmd = JSON.parse(cmds[0]!.args) as unknown;
    expect(cmd).toEqual(['node', 'dist/src/main/cli.js', 'serve', '--config', 'config/default.yaml']);
    const argv = cmd as string[];
    const config = argv[argv.indexOf('--config') + 1]!;
    expect(existsSync(join(root, config))).toBe(true);
    // dist/src/main/cli.js is compiled from src/main/cli.ts (tsconfig.build.json: rootDir ., outDir dist).
    expect(existsSync(join(root, argv[1]!.replace(/^dist\//, '').replace(/\.js$/, '.ts')))).toBe(true);
  });

  it('copies from the build context only files that exist and that .dockerignore keeps', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim().replace(/\/$/, ''))
      .filter((l) => l.length > 0 && !l.startsWith('#'));
    for (const patt of ['node_modules', 'dist', '.git', 'coverage']) expect(ignored).toContain(patt);
    const contextCopies = all('COPY').filter((c) => !c.args.includes('--from='));
    expect(contextCopies.length).toBeGreaterThan(0);
    for (const copy of contextCopies) {
      const words = copy.args.split(/\s+/).filter((w) => !w.startsWith('--'));
      for (const source of words.slice(0, -1)) {
        expect(existsSync(join(root, source)), `COPY source ${source} exists`).toBe(true);
        const top = posix.normalize(source).split('/')[0]!;
        expect(ignored, `COPY source ${source} is not excluded by .dockerignore`).not.toContain(top);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Kubernetes sidecar manifest

describe('deploy/kubernetes/sidecar.yaml', () => {
  const docs = parseAllDocuments(read('deploy/kubernetes/sidecar.yaml'));

  it('parses without errors', () => {
    expect(Array.isArray(docs)).toBe(true);
    for (const doc of docs as Iterable<{ errors: unknown[] }>) expect(doc.errors).toEqual([]);
  });

  const resources = (Array.isArray(docs) ? docs : []).map((d) => d.toJS() as unknown).filter(isObj);
  const ofKind = (kind: string): Obj[] => resources.filter((r) => r.kind === kind);
  const deployment = ofKind('Deployment')[0];
  const template = obj(obj(deployment?.spec, 'Deployment.spec').template, 'spec.template');
  const podSpec = obj(template.spec, 'template.spec');
  const containers = [
    ...arr(podSpec.containers, 'containers'),
    ...(podSpec.initContainers === undefined ? [] : arr(podSpec.initContainers, 'initContainers')),
  ].map((c) => obj(c, 'container'));
  const etagere = containers.find((c) => c.name === 'etagere');
  const envOf = (container: Obj): Record<string, string> =>
    Object.fromEntries(
      (container.env === undefined ? [] : arr(container.env, 'env'))
        .map((e) => obj(e, 'env[]'))
        .map((e) => [String(e.name), String(e.value)]),
    );

  it('has a Deployment with an app container and the etagere sidecar', () => {
    expect(deployment).toBeDefined();
    expect(etagere).toBeDefined();
    expect(etagere!.image).toBe(`etagere:${PACKAGE_VERSION}`);
    const app = containers.find((c) => c !== etagere);
    expect(app?.image).toMatch(/^curlimages\/curl:\d+\.\d+\.\d+$/);
    expect(JSON.stringify([app?.command, app?.args])).toContain('http://127.0.0.1:8080/rate_limit');
    // The Deployment's selector matches its pod template.
    const selector = obj(obj(obj(deployment!.spec, 'spec').selector, 'selector').matchLabels, 'matchLabels');
    expect(obj(obj(template.metadata, 'metadata').labels, 'labels')).toMatchObject(selector);
  });

  it('probes /healthz and /readyz on the admin port 9090, which the container declares', () => {
    const probe = (name: string): Obj => obj(obj(etagere![name], name).httpGet, `${name}.httpGet`);
    expect(probe('livenessProbe')).toMatchObject({ path: '/healthz', port: 9090 });
    expect(probe('readinessProbe')).toMatchObject({ path: '/readyz', port: 9090 });
    const declared = arr(etagere!.ports, 'ports').map((p) => obj(p, 'port'));
    expect(declared).toContainEqual(expect.objectContaining({ name: 'admin', containerPort: 9090 }));
    expect(declared).toContainEqual(expect.objectContaining({ name: 'http', containerPort: 8080 }));
    // Probes come from the kubelet on the pod IP, so the admin listener must leave loopback.
    const env = envOf(etagere!);
    expect(env.ADMIN_HOST).toBe('0.0.0.0');
    for (const name of Object.keys(env)) expect(Object.keys(ENV_VARS), `${name} is in ENV_VARS`).toContain(name);
    // Beyond loopback /admin/* needs a token: from the Secret of the same manifest.
    const token = arr(etagere!.env, 'env')
      .map((e) => obj(e, 'env[]'))
      .find((e) => e.name === 'ETAGERE_ADMIN_TOKEN');
    const ref = obj(obj(token?.valueFrom, 'valueFrom').secretKeyRef, 'secretKeyRef');
    const secret = ofKind('Secret').find((s) => obj(s.metadata, 'metadata').name === ref.name)!;
    expect(Object.keys(obj(secret.stringData, 'stringData'))).toContain(ref.key);
  });

  it('starts, drains and updates like a production pod: a startupProbe, a preStop sleep before SIGTERM', () => {
    expect(obj(obj(etagere!.startupProbe, 'startupProbe').httpGet, 'httpGet')).toMatchObject({ path: '/healthz', port: 9090 });
    const preStop = obj(obj(etagere!.lifecycle, 'lifecycle').preStop, 'preStop');
    expect(obj(preStop.exec, 'exec').command).toEqual(['sleep', '5']);
    expect(Number(podSpec.terminationGracePeriodSeconds)).toBeGreaterThan(5 + 10); // preStop + the drain timeout
  });

  it('has Prometheus scrape annotations on the pod that match the admin port', () => {
    const annotations = obj(obj(template.metadata, 'metadata').annotations, 'annotations');
    expect(annotations['prometheus.io/scrape']).toBe('true');
    expect(annotations['prometheus.io/path']).toBe('/metrics');
    const port = annotations['prometheus.io/port'];
    expect(typeof port).toBe('string'); // annotation values must be strings
    const declared = arr(etagere!.ports, 'ports').map((p) => Number(obj(p, 'port').containerPort));
    expect(declared).toContain(Number(port));
    expect(obj(obj(etagere!.livenessProbe, 'livenessProbe').httpGet, 'httpGet').port).toBe(Number(port));
  });

  it('mounts the tokens Secret from the same manifest read-only, and ETAGERE_TOKENS_FILE points into it', () => {
    const volumes = arr(podSpec.volumes, 'volumes').map((v) => obj(v, 'volume'));
    const secretVolumes = volumes.filter((v) => isObj(v.secret));
    expect(secretVolumes.length).toBeGreaterThan(0);
    const secretNames = ofKind('Secret').map((s) => obj(s.metadata, 'metadata').name);
    for (const volume of secretVolumes) expect(secretNames).toContain(obj(volume.secret, 'secret').secretName);

    const tokensVolume = secretVolumes.find((v) => obj(v.secret, 'secret').secretName === 'etagere-tokens');
    expect(tokensVolume).toBeDefined();
    const mount = arr(etagere!.volumeMounts, 'volumeMounts')
      .map((m) => obj(m, 'volumeMount'))
      .find((m) => m.name === tokensVolume!.name);
    expect(mount).toBeDefined();
    expect(mount!.readOnly).toBe(true);
    const mountPath = str(mount!.mountPath, 'mountPath');

    const file = envOf(etagere!).ETAGERE_TOKENS_FILE;
    expect(file).toBeDefined();
    const rel = posix.relative(mountPath, file!);
    expect(rel.length > 0 && !rel.startsWith('..') && !posix.isAbsolute(rel), `${file} is inside ${mountPath}`).toBe(true);
    // The file name is a key of the Secret, so the projected file exists.
    const secret = ofKind('Secret').find((s) => obj(s.metadata, 'metadata').name === 'etagere-tokens')!;
    const keys = [...Object.keys(isObj(secret.stringData) ? secret.stringData : {}), ...Object.keys(isObj(secret.data) ? secret.data : {})];
    expect(keys).toContain(rel);
  });

  it('gives the sidecar resources and a locked-down securityContext', () => {
    const res = obj(etagere!.resources, 'resources');
    obj(res.requests, 'resources.requests');
    obj(res.limits, 'resources.limits');
    expect(obj(etagere!.securityContext, 'securityContext')).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    // The image's USER is a name ("node"); runAsNonRoot can only be verified with a numeric uid.
    const uid =
      obj(etagere!.securityContext, 'securityContext').runAsUser ?? obj(podSpec.securityContext ?? {}, 'pod securityContext').runAsUser;
    expect(typeof uid === 'number' && uid > 0).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Secrets

/** Every file of the deployment set, recursively for directories. */
function deployFiles(): string[] {
  const entries = ['Dockerfile', '.dockerignore', 'docker-compose.yml', 'config', 'grafana', 'deploy'];
  const out: string[] = [];
  const walk = (abs: string): void => {
    if (!existsSync(abs)) return;
    if (statSync(abs).isDirectory()) for (const child of readdirSync(abs)) walk(join(abs, child));
    else out.push(abs);
  };
  for (const entry of entries) walk(join(root, entry));
  return out;
}

describe('secrets', () => {
  it('no deployment or config file contains something that looks like a real GitHub token', () => {
    const files = deployFiles();
    expect(files.length).toBeGreaterThan(5);
    const tokenLike = /gh[pousr]_[A-Za-z0-9]{20,}/;
    for (const file of files) expect(tokenLike.test(readFileSync(file, 'utf8')), relative(root, file)).toBe(false);
  });

  it('the Secret holds a placeholder, not a token', () => {
    const secret = parseAllDocuments(read('deploy/kubernetes/sidecar.yaml'))
      .map((d) => d.toJS() as unknown)
      .filter(isObj)
      .find((r) => r.kind === 'Secret');
    const tokens = String(obj(secret?.stringData, 'stringData').tokens);
    expect(tokens).toMatch(/REPLACE_ME/);
  });
});
