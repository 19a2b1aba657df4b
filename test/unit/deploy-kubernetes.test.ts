/**
 * The Kubernetes manifests of deploy/kubernetes/, without a cluster:
 * - every resource against the Kubernetes and Prometheus Operator schemas that the npm packages
 *   kubernetes-models and @kubernetes-models/prometheus-operator ship (required fields, types,
 *   enums, patterns; like the API server's, these schemas let unknown fields through);
 * - the shared service's resources against each other (selectors, named ports, targets, Secret keys)
 *   and against the app (its env vars, its config schema, its metric names);
 * - the PrometheusRule: the same alerts as docs/operations.md, `promtool check rules` and
 *   `promtool test rules` (alerts.promtool.yaml) when promtool is installed;
 * - the Grafana dashboard ConfigMap: the dashboard JSON byte for byte.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Model } from '@kubernetes-models/base';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { DASHBOARD_CONFIGMAP, DASHBOARD_JSON, dashboardConfigMap } from '../../deploy/kubernetes/grafana-dashboard.js';
import { ENV_VARS, consumerKeysFromFile, loadConfig } from '../../src/platform/config/load.js';
import { METRIC_SPECS } from '../../src/platform/metrics/specs.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');
const PACKAGE_VERSION = (JSON.parse(read('package.json')) as { version: string }).version;
const DIR = 'deploy/kubernetes';

type Obj = Record<string, unknown>;
const isObj = (value: unknown): value is Obj => value !== null && typeof value === 'object' && !Array.isArray(value);
function obj(value: unknown, what: string): Obj {
  if (!isObj(value)) throw new Error(`${what}: expected a mapping, got ${JSON.stringify(value)}`);
  return value;
}
function arr(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new Error(`${what}: expected a list, got ${JSON.stringify(value)}`);
  return value;
}
const objs = (value: unknown, what: string): Obj[] => (value === undefined ? [] : arr(value, what).map((item) => obj(item, what)));

/** Every resource of a manifest file; a YAML error fails the file. */
function resourcesOf(rel: string): Obj[] {
  const docs = parseAllDocuments(read(rel));
  if (!Array.isArray(docs)) throw new Error(`${rel}: no documents`);
  return docs.flatMap((doc) => {
    if (doc.errors.length > 0) throw new Error(`${rel}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as unknown;
    return value === null ? [] : [obj(value, rel)];
  });
}

const MODELS: Record<string, new (data: never) => Model<unknown>> = {
  'v1/Secret': Secret,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

const manifestFiles = readdirSync(join(root, DIR))
  .filter((name) => name.endsWith('.yaml') && !name.includes('.promtool.'))
  .sort();

describe('deploy/kubernetes: every manifest against the Kubernetes and Prometheus Operator schemas', () => {
  it('has the sidecar, the shared service and the dashboard', () => {
    expect(manifestFiles).toEqual(expect.arrayContaining(['grafana-dashboard.yaml', 'shared.yaml', 'sidecar.yaml']));
  });

  for (const file of manifestFiles) {
    it(`${file}: each resource validates against its kind's schema`, () => {
      const resources = resourcesOf(`${DIR}/${file}`);
      expect(resources.length).toBeGreaterThan(0);
      for (const resource of resources) {
        const kind = `${String(resource.apiVersion)}/${String(resource.kind)}`;
        const name = String(obj(resource.metadata, `${kind} metadata`).name);
        expect(name, `${kind} has metadata.name`).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
        const model = MODELS[kind];
        expect(model, `${kind} is a kind this test knows a schema for`).toBeDefined();
        expect(() => new model!(resource as never).validate(), `${kind} ${name}`).not.toThrow();
      }
    });
  }

  it("pins every image by tag: no :latest, no untagged image; etagere at package.json's version", () => {
    const images = manifestFiles.flatMap((file) =>
      resourcesOf(`${DIR}/${file}`)
        .filter((r) => r.kind === 'Deployment')
        .flatMap((deployment) => {
          const pod = obj(obj(obj(deployment.spec, 'spec').template, 'template').spec, 'pod spec');
          return [...objs(pod.containers, 'containers'), ...objs(pod.initContainers, 'initContainers')].map((c) => String(c.image));
        }),
    );
    expect(images.length).toBeGreaterThan(2);
    for (const image of images) expect(image, image).toMatch(/^[a-z0-9./-]+:(?!latest$)[A-Za-z0-9._-]+$/);
    expect(images.filter((image) => image.startsWith('etagere:'))).toEqual(
      images.filter((image) => image === `etagere:${PACKAGE_VERSION}`),
    );
  });

  it('the schemas do catch a wrong type and a missing required field', () => {
    const [deployment] = resourcesOf(`${DIR}/shared.yaml`).filter((r) => r.kind === 'Deployment');
    const broken = structuredClone(deployment!) as { spec: { replicas: unknown; selector?: unknown } };
    broken.spec.replicas = 'two';
    expect(() => new Deployment(broken as never).validate()).toThrow(/replicas/);
    delete broken.spec.selector;
    broken.spec.replicas = 2;
    expect(() => new Deployment(broken as never).validate()).toThrow(/selector/);
    expect(() =>
      new PrometheusRule({
        metadata: { name: 'x' },
        spec: { groups: [{ name: 'g', rules: [{ alert: 'A', expr: 'up', for: '2 minutes' }] }] },
      }).validate(),
    ).toThrow(/for/);
  });
});

// ---------------------------------------------------------------------------------------------
// The shared service

describe('deploy/kubernetes/shared.yaml', () => {
  const resources = resourcesOf(`${DIR}/shared.yaml`);
  const ofKind = (kind: string): Obj[] => resources.filter((r) => r.kind === kind);
  const named = (kind: string, name: string): Obj => {
    const found = ofKind(kind).find((r) => obj(r.metadata, 'metadata').name === name);
    if (found === undefined) throw new Error(`no ${kind} named ${name}`);
    return found;
  };
  const spec = (resource: Obj): Obj => obj(resource.spec, `${String(resource.kind)}.spec`);
  const labelsOf = (resource: Obj): Obj => obj(obj(resource.metadata, 'metadata').labels ?? {}, 'labels');
  const podTemplate = (deployment: Obj): Obj => obj(spec(deployment).template, 'template');
  const podLabels = (deployment: Obj): Obj => obj(obj(podTemplate(deployment).metadata, 'template.metadata').labels, 'template labels');
  const podSpec = (deployment: Obj): Obj => obj(podTemplate(deployment).spec, 'template.spec');
  const containers = (deployment: Obj): Obj[] => objs(podSpec(deployment).containers, 'containers');
  /** matchLabels selects labels: every selector label is there with its value. */
  const selects = (matchLabels: Obj, labels: Obj): boolean =>
    Object.keys(matchLabels).length > 0 && Object.entries(matchLabels).every(([key, value]) => labels[key] === value);
  const matchLabels = (selector: unknown): Obj => obj(obj(selector, 'selector').matchLabels, 'matchLabels');

  const deployment = named('Deployment', 'etagere');
  const redis = named('Deployment', 'etagere-redis');
  const service = named('Service', 'etagere');
  const etagere = containers(deployment).find((c) => c.name === 'etagere')!;
  const containerPorts = objs(etagere.ports, 'ports');
  const portNames = containerPorts.map((p) => p.name);
  const secret = named('Secret', 'etagere-shared');
  const secretKeys = Object.keys(obj(secret.stringData, 'stringData'));
  const env = objs(etagere.env, 'env');
  const stringData = obj(secret.stringData, 'stringData');
  /** An env entry's value: plain, or from the Secret of the manifest (a placeholder here). */
  const valueOf = (entry: Obj): string =>
    typeof entry.value === 'string'
      ? entry.value
      : String(stringData[String(obj(obj(entry.valueFrom, 'valueFrom').secretKeyRef, 'secretKeyRef').key)]);
  /** The container's environment as the kubelet makes it: `$(NAME)` replaced by an earlier variable's value. */
  const envOf = (entries: Obj[]): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const entry of entries) out[String(entry.name)] = valueOf(entry).replace(/\$\(([A-Z_]+)\)/g, (_, name: string) => out[name] ?? '');
    return out;
  };
  const plainEnv = envOf(env);

  it('runs etagere as 2 replicas, each Deployment selecting its own pod template only', () => {
    expect(spec(deployment).replicas).toBe(2);
    expect(etagere.image).toBe(`etagere:${PACKAGE_VERSION}`);
    for (const each of ofKind('Deployment')) expect(selects(matchLabels(spec(each).selector), podLabels(each))).toBe(true);
    expect(selects(matchLabels(spec(deployment).selector), podLabels(redis))).toBe(false);
    expect(selects(matchLabels(spec(redis).selector), podLabels(deployment))).toBe(false);
  });

  it('shares one Redis: REDIS_URL names the Redis Service, which selects the Redis pods on a port they declare', () => {
    const url = new URL(plainEnv.REDIS_URL!);
    expect(url.password).toBe(stringData['redis-password']);
    const redisService = named('Service', url.hostname);
    expect(selects(obj(spec(redisService).selector, 'selector'), podLabels(redis))).toBe(true);
    const servicePort = objs(spec(redisService).ports, 'ports').find((p) => p.port === Number(url.port));
    expect(servicePort).toBeDefined();
    const redisPorts = objs(containers(redis)[0]!.ports, 'ports');
    expect(redisPorts.map((p) => p.name)).toContain(servicePort!.targetPort);
    const command = [...arr(containers(redis)[0]!.args, 'args')].map(String).join(' ');
    expect(command).toMatch(/--save\s+ --appendonly no/);
  });

  it('exposes the proxy and admin ports through the Service, by the names the pods declare', () => {
    expect(selects(obj(spec(service).selector, 'selector'), podLabels(deployment))).toBe(true);
    expect(selects(obj(spec(service).selector, 'selector'), podLabels(redis))).toBe(false);
    const ports = objs(spec(service).ports, 'ports');
    expect(ports.map((p) => [p.name, p.port])).toEqual(
      expect.arrayContaining([
        ['http', 8080],
        ['admin', 9090],
      ]),
    );
    for (const port of ports) expect(portNames, `targetPort ${String(port.targetPort)}`).toContain(port.targetPort);
    expect(containerPorts).toContainEqual(expect.objectContaining({ name: 'admin', containerPort: 9090 }));
    expect(containerPorts).toContainEqual(expect.objectContaining({ name: 'http', containerPort: 8080 }));
  });

  it('probes /healthz and /readyz on the admin port, with a startupProbe, and sleeps in preStop before SIGTERM', () => {
    const probe = (name: string): Obj => obj(obj(etagere[name], name).httpGet, `${name}.httpGet`);
    expect(probe('livenessProbe')).toMatchObject({ path: '/healthz', port: 'admin' });
    expect(probe('readinessProbe')).toMatchObject({ path: '/readyz', port: 'admin' });
    expect(probe('startupProbe')).toMatchObject({ path: '/healthz', port: 'admin' });
    const startup = obj(etagere.startupProbe, 'startupProbe');
    expect(Number(startup.periodSeconds) * Number(startup.failureThreshold)).toBeGreaterThanOrEqual(30);
    const preStop = obj(obj(etagere.lifecycle, 'lifecycle').preStop, 'preStop');
    expect(obj(preStop.exec, 'exec').command).toEqual(['sleep', '5']);
    // preStop, then the drain (shutdown.drain_timeout_ms, 10 s), within the grace period.
    expect(Number(podSpec(deployment).terminationGracePeriodSeconds)).toBeGreaterThan(5 + 10);
  });

  it('keeps Redis closed: a password from the Secret (requirepass), the same one in REDIS_URL and the probe', () => {
    const redisContainer = containers(redis)[0]!;
    const args = arr(redisContainer.args, 'args').map(String);
    const redisEnv = envOf(objs(redisContainer.env, 'env'));
    expect(args[args.indexOf('--requirepass') + 1]).toBe('$(REDIS_PASSWORD)');
    expect(redisEnv.REDIS_PASSWORD).toBe(stringData['redis-password']);
    expect(redisEnv.REDISCLI_AUTH).toBe(stringData['redis-password']);
    expect(new URL(plainEnv.REDIS_URL!).password).toBe(redisEnv.REDIS_PASSWORD);
    expect(String(stringData['redis-password'])).toMatch(/^[A-Za-z0-9]{16,}$/); // used in a URL as it is
  });

  it('lets only etagere reach Redis, and only the monitoring namespace reach the admin port (NetworkPolicies)', () => {
    const policies = ofKind('NetworkPolicy');
    const selecting = (pod: Obj): Obj[] => policies.filter((p) => selects(matchLabels(spec(p).podSelector), podLabels(pod)));
    const [redisPolicy] = selecting(redis);
    expect(selecting(redis)).toHaveLength(1);
    expect(spec(redisPolicy!).policyTypes).toEqual(['Ingress']);
    const redisRules = objs(spec(redisPolicy!).ingress, 'ingress');
    expect(redisRules).toHaveLength(1);
    const from = objs(redisRules[0]!.from, 'from');
    expect(from).toHaveLength(1);
    expect(selects(matchLabels(from[0]!.podSelector), podLabels(deployment))).toBe(true);
    expect(from[0]!.namespaceSelector).toBeUndefined();
    expect(objs(redisRules[0]!.ports, 'ports').map((p) => p.port)).toEqual(['redis']);

    const [proxyPolicy] = selecting(deployment);
    expect(selecting(deployment)).toHaveLength(1);
    const rules = objs(spec(proxyPolicy!).ingress, 'ingress');
    const rulesFor = (port: string): Obj[] => rules.filter((rule) => objs(rule.ports, 'ports').some((p) => p.port === port));
    expect(rulesFor('http').map((rule) => rule.from)).toEqual([undefined]); // every pod: consumer keys decide
    const adminFrom = rulesFor('admin').flatMap((rule) => objs(rule.from, 'from'));
    expect(adminFrom).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }]);
    for (const name of ['http', 'admin']) expect(portNames).toContain(name);
  });

  it('takes the admin token, the pool tokens and the consumer keys from the Secret, the files mounted as a directory', () => {
    expect(plainEnv.ADMIN_HOST).toBe('0.0.0.0');
    expect(plainEnv.ETAGERE_ADMIN_TOKEN).toBe(stringData['admin-token']);
    const mount = objs(etagere.volumeMounts, 'volumeMounts').find((m) => m.name === 'secret')!;
    expect(mount.subPath).toBeUndefined(); // a subPath mount is never updated: no reload
    const items = objs(obj(objs(podSpec(deployment).volumes, 'volumes').find((v) => v.name === 'secret')!.secret, 'secret').items, 'items');
    for (const variable of ['ETAGERE_TOKENS_FILE', 'ETAGERE_CONSUMER_KEYS_FILE']) {
      const file = plainEnv[variable]!;
      expect(file.startsWith(`${String(mount.mountPath)}/`), variable).toBe(true);
      const item = items.find((i) => i.path === file.slice(String(mount.mountPath).length + 1));
      expect(item, variable).toBeDefined();
      expect(Object.keys(stringData)).toContain(item!.key);
    }
  });

  it('keeps one pod through voluntary disruptions: the PodDisruptionBudget selects the etagere pods', () => {
    const pdb = named('PodDisruptionBudget', 'etagere');
    expect(selects(matchLabels(spec(pdb).selector), podLabels(deployment))).toBe(true);
    expect(selects(matchLabels(spec(pdb).selector), podLabels(redis))).toBe(false);
    expect(spec(pdb).minAvailable).toBe(1);
    expect(spec(pdb).minAvailable as number).toBeLessThan(spec(deployment).replicas as number);
  });

  it('scales the etagere Deployment on CPU from its replica count up', () => {
    const hpa = spec(named('HorizontalPodAutoscaler', 'etagere'));
    expect(obj(hpa.scaleTargetRef, 'scaleTargetRef')).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'etagere' });
    expect(hpa.minReplicas).toBe(spec(deployment).replicas);
    expect(hpa.maxReplicas as number).toBeGreaterThan(hpa.minReplicas as number);
    const metric = objs(hpa.metrics, 'metrics')[0]!;
    expect(obj(metric.resource, 'resource').name).toBe('cpu');
    // Utilization is of the request, so the container must have one.
    expect(obj(obj(etagere.resources, 'resources').requests, 'requests').cpu).toBeDefined();
  });

  it('has the ServiceMonitor select the Service and scrape its admin port', () => {
    const monitor = spec(named('ServiceMonitor', 'etagere'));
    expect(selects(matchLabels(monitor.selector), labelsOf(service))).toBe(true);
    const others = ofKind('Service').filter((s) => s !== service);
    for (const other of others) expect(selects(matchLabels(monitor.selector), labelsOf(other))).toBe(false);
    const endpoint = objs(monitor.endpoints, 'endpoints')[0]!;
    expect(endpoint).toMatchObject({ port: 'admin', path: '/metrics' });
    expect(objs(spec(service).ports, 'ports').map((p) => p.name)).toContain(endpoint.port);
  });

  it('mounts the ConfigMap and the Secret it defines, and takes env secrets from keys the Secret has', () => {
    const volumes = objs(podSpec(deployment).volumes, 'volumes');
    const mounts = objs(etagere.volumeMounts, 'volumeMounts');
    for (const mount of mounts) {
      expect(volumes.map((v) => v.name)).toContain(mount.name);
      expect(mount.readOnly).toBe(true);
    }
    const configVolume = volumes.find((v) => isObj(v.configMap))!;
    named('ConfigMap', String(obj(configVolume.configMap, 'configMap').name));
    const secretVolume = volumes.find((v) => isObj(v.secret))!;
    expect(obj(secretVolume.secret, 'secret').secretName).toBe('etagere-shared');
    for (const item of objs(obj(secretVolume.secret, 'secret').items, 'items')) expect(secretKeys).toContain(item.key);
    for (const entry of [...env, ...objs(containers(redis)[0]!.env, 'env')].filter((e) => e.valueFrom !== undefined)) {
      const ref = obj(obj(entry.valueFrom, 'valueFrom').secretKeyRef, 'secretKeyRef');
      expect(ref.name).toBe('etagere-shared');
      expect(secretKeys).toContain(ref.key);
    }
    expect(String(secret.stringData && obj(secret.stringData, 'stringData').tokens)).toMatch(/REPLACE_ME/);
  });

  it('gives etagere a config the app loads: consumer keys on, Redis, every env var known to the app or the config', () => {
    const configMap = named('ConfigMap', 'etagere-config');
    const text = String(obj(configMap.data, 'data')['etagere.yaml']);
    const config = parse(text) as { consumers: { keys: Array<{ env?: string }> } };
    const keyEnvs = config.consumers.keys.map((k) => k.env).filter((e): e is string => e !== undefined);
    // A variable the app does not read is there only to build another one (REDIS_PASSWORD into REDIS_URL).
    const referenced = env.flatMap((e) => [...String(e.value ?? '').matchAll(/\$\(([A-Z_]+)\)/g)].map((m) => m[1]!));
    for (const entry of env) expect([...Object.keys(ENV_VARS), ...keyEnvs, ...referenced], String(entry.name)).toContain(entry.name);

    // The args point at the file the ConfigMap becomes.
    const args = arr(etagere.args, 'args').map(String);
    const configPath = args[args.indexOf('--config') + 1]!;
    const mount = objs(etagere.volumeMounts, 'volumeMounts').find((m) => m.name === 'config')!;
    expect(configPath).toBe(`${String(mount.mountPath)}/etagere.yaml`);

    const dir = mkdtempSync(join(tmpdir(), 'etagere-k8s-'));
    try {
      writeFileSync(join(dir, 'etagere.yaml'), text);
      writeFileSync(join(dir, 'tokens'), String(stringData.tokens));
      writeFileSync(join(dir, 'consumer-keys'), String(stringData['consumer-keys']));
      // The image's ENV, then the Deployment's, with the Secret's files where this test wrote them.
      const loaded = loadConfig({
        file: join(dir, 'etagere.yaml'),
        env: {
          HOST: '0.0.0.0',
          ...plainEnv,
          ETAGERE_TOKENS_FILE: join(dir, 'tokens'),
          ETAGERE_CONSUMER_KEYS_FILE: join(dir, 'consumer-keys'),
        },
      });
      expect(loaded.listen.host).toBe('0.0.0.0');
      expect(loaded.admin).toMatchObject({ host: '0.0.0.0', token: stringData['admin-token'], open: false });
      expect(loaded.consumers.enabled).toBe(true);
      expect(consumerKeysFromFile(loaded).map((line) => line.name)).toEqual(['web']);
      expect(loaded.redis.url).toBe(`redis://:${String(stringData['redis-password'])}@etagere-redis:6379/0`);
      expect(loaded.admin.allowed_hosts).toContain(obj(service.metadata, 'metadata').name);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs every container non-root, read-only, with requests and limits', () => {
    for (const each of ofKind('Deployment')) {
      for (const container of containers(each)) {
        const security = obj(container.securityContext, 'securityContext');
        expect(security).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
        expect(typeof security.runAsUser === 'number' && security.runAsUser > 0).toBe(true);
        const resources = obj(container.resources, 'resources');
        obj(resources.requests, 'requests');
        obj(resources.limits, 'limits');
      }
    }
    expect(obj(etagere.securityContext, 'securityContext').runAsUser).toBe(1000);
  });
});

// ---------------------------------------------------------------------------------------------
// Alerts

const ruleManifest = resourcesOf(`${DIR}/shared.yaml`).find((r) => r.kind === 'PrometheusRule')!;
const ruleGroups = arr(obj(ruleManifest.spec, 'PrometheusRule.spec').groups, 'groups');

/** The yaml block of docs/operations.md's "Alerts" section. */
function documentedAlerts(): unknown[] {
  const doc = read('docs/operations.md');
  const section = doc.slice(doc.indexOf('\n## Alerts'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section);
  if (block === null) throw new Error('docs/operations.md: no yaml block under "## Alerts"');
  return arr(obj(parse(block[1]!), 'alerts').groups, 'groups');
}

function has(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}
const PROMTOOL = has('promtool');
if (!PROMTOOL) {
  process.stderr.write(
    'deploy-kubernetes: promtool checks skipped: the Debian package "prometheus" (promtool) is not installed; apt-get install prometheus\n',
  );
}

describe('the PrometheusRule', () => {
  it('holds the alerts of docs/operations.md', () => {
    expect(ruleGroups).toEqual(documentedAlerts());
  });

  it('uses only metrics etagere exports', () => {
    const known = new Set(Object.values(METRIC_SPECS).map((spec) => spec.name));
    const used = JSON.stringify(ruleGroups).match(/\betagere_[a-z_]+/g) ?? [];
    expect(used.length).toBeGreaterThan(5);
    for (const name of used) expect(known, name).toContain(name);
  });

  describe.skipIf(!PROMTOOL)('promtool', () => {
    let dir = '';
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'etagere-rules-'));
      writeFileSync(join(dir, 'etagere-rules.yaml'), stringify({ groups: ruleGroups }));
      copyFileSync(join(root, DIR, 'alerts.promtool.yaml'), join(dir, 'alerts.promtool.yaml'));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const run = (...args: string[]): { status: number | null; output: string } => {
      const result = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8', timeout: 30_000 });
      return { status: result.status, output: `${result.stdout}${result.stderr}` };
    };

    it('check rules: the groups parse and every expression is valid PromQL', () => {
      const result = run('check', 'rules', 'etagere-rules.yaml');
      expect(result.output).toMatch(/SUCCESS: 8 rules found/);
      expect(result.status, result.output).toBe(0);
    });

    it('test rules: each alert fires on synthetic series that should fire it, and not on a near miss', () => {
      const result = run('test', 'rules', 'alerts.promtool.yaml');
      expect(result.status, result.output).toBe(0);
    });

    it('test rules fails when a threshold changes (the tests are not vacuous)', () => {
      const loosened = stringify({ groups: ruleGroups }).replace('< 0.1', '< 0.01');
      writeFileSync(join(dir, 'etagere-rules.yaml'), loosened);
      const result = run('test', 'rules', 'alerts.promtool.yaml');
      writeFileSync(join(dir, 'etagere-rules.yaml'), stringify({ groups: ruleGroups }));
      expect(result.status).not.toBe(0);
      expect(result.output).toContain('EtagerePoolLow');
    });
  });
});

// ---------------------------------------------------------------------------------------------
// The Grafana dashboard as a ConfigMap

describe('deploy/kubernetes/grafana-dashboard.yaml', () => {
  it('is what grafana-dashboard.ts generates from the dashboard JSON (rerun it after editing the dashboard)', () => {
    expect(read(DASHBOARD_CONFIGMAP)).toBe(dashboardConfigMap(read(DASHBOARD_JSON)));
  });

  it('holds the dashboard JSON byte for byte, under the label Grafana sidecars look for', () => {
    const [configMap] = resourcesOf(DASHBOARD_CONFIGMAP);
    const data = obj(configMap!.data, 'data');
    expect(Object.keys(data)).toEqual(['etagere.json']);
    expect(data['etagere.json']).toBe(read(DASHBOARD_JSON));
    expect(JSON.parse(String(data['etagere.json']))).toEqual(JSON.parse(read(DASHBOARD_JSON)));
    expect(obj(obj(configMap!.metadata, 'metadata').labels, 'labels').grafana_dashboard).toBe('1');
  });
});
