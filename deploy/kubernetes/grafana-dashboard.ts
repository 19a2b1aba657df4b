/**
 * Writes grafana-dashboard.yaml: grafana/dashboards/etagere.json as a ConfigMap that Grafana's
 * dashboard sidecar (kube-prometheus-stack, the Grafana chart) loads by its `grafana_dashboard` label.
 *   npx tsx deploy/kubernetes/grafana-dashboard.ts
 * test/unit/deploy-kubernetes.test.ts fails when the ConfigMap and the JSON differ.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const root = fileURLToPath(new URL('../../', import.meta.url));
export const DASHBOARD_JSON = 'grafana/dashboards/etagere.json';
export const DASHBOARD_CONFIGMAP = 'deploy/kubernetes/grafana-dashboard.yaml';

/** The ConfigMap's text for a dashboard's JSON text, which it holds byte for byte. */
export function dashboardConfigMap(json: string): string {
  const manifest = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'etagere-dashboard',
      labels: { 'app.kubernetes.io/name': 'etagere', grafana_dashboard: '1' },
    },
    data: { 'etagere.json': json },
  };
  const header = `# Generated from ${DASHBOARD_JSON} by deploy/kubernetes/grafana-dashboard.ts: do not edit.\n`;
  return header + stringify(manifest, { lineWidth: 0, blockQuote: 'literal' });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(root + DASHBOARD_CONFIGMAP, dashboardConfigMap(readFileSync(root + DASHBOARD_JSON, 'utf8')));
}
