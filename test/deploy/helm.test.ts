import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config/load.js';

// Issue 27 §5: the Helm chart in deploy/helm/mcpgate, linted and rendered by the `helm` binary (HELM, else the
// one on PATH). Machines without Helm skip the suite and say so.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = join(ROOT, 'deploy/helm/mcpgate');
const HELM = process.env.HELM ?? 'helm';

function helm(args: readonly string[]): { status: number | null; stdout: string; stderr: string; error?: Error } {
  const result = spawnSync(HELM, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '', ...(result.error === undefined ? {} : { error: result.error }) };
}

function helmVersion(): string | undefined {
  const result = helm(['version', '--short']);
  return result.status === 0 ? result.stdout.trim() : undefined;
}

const version = helmVersion();
const skip = version === undefined ? `helm binary not found on PATH: install Helm 3.8+ or set HELM=/path/to/helm (tried "${HELM}")` : false;

/* Just enough of the Kubernetes objects for the checks; the rendered YAML is not typed otherwise. */
interface Env {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly secretKeyRef?: { readonly name: string; readonly key: string; readonly optional?: boolean } };
}
interface Probe {
  readonly httpGet?: { readonly path: string; readonly port: string | number };
}
interface Container {
  readonly name: string;
  readonly image: string;
  readonly args?: readonly string[];
  readonly command?: readonly string[];
  readonly ports?: ReadonlyArray<{ readonly name: string; readonly containerPort: number }>;
  readonly env?: readonly Env[];
  readonly startupProbe?: Probe;
  readonly livenessProbe?: Probe;
  readonly readinessProbe?: Probe;
  readonly lifecycle?: { readonly preStop?: { readonly exec?: { readonly command: readonly string[] } } };
  readonly securityContext?: {
    readonly runAsNonRoot?: boolean;
    readonly runAsUser?: number;
    readonly readOnlyRootFilesystem?: boolean;
    readonly allowPrivilegeEscalation?: boolean;
    readonly capabilities?: { readonly drop?: readonly string[] };
  };
  readonly volumeMounts?: ReadonlyArray<{ readonly name: string; readonly mountPath: string; readonly readOnly?: boolean }>;
}
interface PodSpec {
  readonly securityContext?: { readonly runAsNonRoot?: boolean; readonly runAsUser?: number; readonly fsGroup?: number };
  readonly terminationGracePeriodSeconds?: number;
  readonly automountServiceAccountToken?: boolean;
  readonly containers: readonly Container[];
  readonly volumes?: ReadonlyArray<{ readonly name: string; readonly emptyDir?: object; readonly configMap?: { readonly name: string }; readonly persistentVolumeClaim?: { readonly claimName: string } }>;
}
interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string>; readonly annotations?: Record<string, string> };
  readonly spec?: {
    readonly replicas?: number;
    readonly strategy?: { readonly type: string };
    readonly selector?: { readonly matchLabels?: Record<string, string> } & Record<string, string>;
    readonly template?: { readonly metadata: { readonly labels: Record<string, string>; readonly annotations?: Record<string, string> }; readonly spec: PodSpec };
    readonly minAvailable?: number | string;
    readonly maxUnavailable?: number | string;
    readonly ports?: ReadonlyArray<{ readonly port: number; readonly targetPort: string | number }>;
  } & PodSpec;
  readonly data?: Record<string, string>;
}

/** `helm template` with `--set` pairs; the rendered documents, or the failure's stderr. */
function render(sets: Record<string, string | number | boolean> = {}): Manifest[] {
  const args = ['template', 'rel', CHART, '--namespace', 'gw'];
  for (const [key, value] of Object.entries(sets)) args.push('--set', `${key}=${String(value)}`);
  const result = helm(args);
  assert.equal(result.status, 0, `helm ${args.join(' ')}\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((document) => {
      assert.deepEqual(document.errors, []);
      return document.toJS() as Manifest | null;
    })
    .filter((manifest): manifest is Manifest => manifest !== null);
}

function refuse(sets: Record<string, string | number | boolean>): string {
  const args = ['template', 'rel', CHART];
  for (const [key, value] of Object.entries(sets)) args.push('--set', `${key}=${String(value)}`);
  const result = helm(args);
  assert.notEqual(result.status, 0, `helm ${args.join(' ')} should fail`);
  return result.stderr;
}

function one(manifests: readonly Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind && (name === undefined || manifest.metadata.name === name));
  assert.equal(found.length, 1, `one ${kind}${name === undefined ? '' : ` ${name}`}`);
  return found[0]!;
}

function gatewayContainer(manifests: readonly Manifest[]): { pod: PodSpec; container: Container } {
  const pod = one(manifests, 'Deployment').spec?.template?.spec;
  assert.ok(pod !== undefined);
  const container = pod.containers.find((candidate) => candidate.name === 'mcpgate');
  assert.ok(container !== undefined);
  return { pod, container };
}

function envOf(container: Container, name: string): Env {
  const entries = (container.env ?? []).filter((entry) => entry.name === name);
  assert.equal(entries.length, 1, `env ${name}`);
  return entries[0]!;
}

function configOf(manifests: readonly Manifest[]): string {
  const text = one(manifests, 'ConfigMap').data?.['config.yaml'];
  assert.ok(text !== undefined);
  return text;
}

const SECRET_ENV = {
  MCPGATE_KEY_SECRET: 'key-secret',
  MCPGATE_SESSION_KEY: 'session-key',
  MCPGATE_STATE_KEY: 'state-key',
  MCPGATE_RECEIPT_SIGNING_KEY: 'receipt-signing-key',
  MCPGATE_ADMIN_TOKEN: 'admin-token',
} as const;

/** A test of the chart: skipped, and counted as skipped, where there is no helm. */
function check(name: string, fn: () => void): void {
  it(name, { skip }, fn);
}

describe('Helm chart deploy/helm/mcpgate', () => {
  check('passes helm lint', () => {
    const result = helm(['lint', '--strict', CHART]);
    assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
    assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    assert.doesNotMatch(result.stdout, /\[(WARNING|ERROR)\]/);
  });

  describe('rendered with its defaults', () => {
    // Rendered in a hook, so that nothing runs helm where the suite is skipped.
    let manifests: Manifest[] = [];
    let pod: PodSpec;
    let container: Container;
    before(() => {
      if (skip !== false) return;
      manifests = render();
      ({ pod, container } = gatewayContainer(manifests));
    });

    check('renders a Deployment, Service, PodDisruptionBudget, ConfigMap, Secret and ServiceAccount, labelled as Helm charts are', () => {
      for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'ConfigMap', 'Secret', 'ServiceAccount']) {
        const manifest = one(manifests, kind);
        assert.equal(manifest.metadata.name, 'rel-mcpgate');
        const labels = manifest.metadata.labels ?? {};
        assert.equal(labels['app.kubernetes.io/name'], 'mcpgate');
        assert.equal(labels['app.kubernetes.io/instance'], 'rel');
        assert.equal(labels['app.kubernetes.io/managed-by'], 'Helm');
        assert.match(labels['helm.sh/chart'] ?? '', /^mcpgate-\d+\.\d+\.\d+/);
      }
    });

    check('runs two replicas that roll one at a time and a budget that lets one go', () => {
      const deployment = one(manifests, 'Deployment');
      assert.ok((deployment.spec?.replicas ?? 0) >= 2);
      assert.equal(deployment.spec?.strategy?.type, 'RollingUpdate');
      const pdb = one(manifests, 'PodDisruptionBudget');
      assert.equal(pdb.apiVersion, 'policy/v1');
      assert.ok(pdb.spec?.maxUnavailable === 1 || pdb.spec?.minAvailable === 1);
      assert.deepEqual(pdb.spec?.selector?.matchLabels, deployment.spec?.selector?.matchLabels);
      const service = one(manifests, 'Service');
      assert.deepEqual(service.spec?.selector, deployment.spec?.selector?.matchLabels);
      assert.equal(service.spec?.ports?.[0]?.targetPort, 'http');
    });

    check('probes /healthz for liveness and start-up and /readyz for readiness, on the gateway\'s port', () => {
      assert.deepEqual(container.ports?.map((port) => [port.name, port.containerPort]), [['http', 8080]]);
      assert.deepEqual(container.livenessProbe?.httpGet, { path: '/healthz', port: 'http' });
      assert.deepEqual(container.readinessProbe?.httpGet, { path: '/readyz', port: 'http' });
      assert.deepEqual(container.startupProbe?.httpGet, { path: '/healthz', port: 'http' });
    });

    check('runs non-root with a read-only root filesystem, no privilege escalation and no capabilities', () => {
      assert.equal(pod.securityContext?.runAsNonRoot, true);
      assert.equal(pod.securityContext?.runAsUser, 10001);
      assert.equal(pod.automountServiceAccountToken, false);
      const security = container.securityContext;
      assert.equal(security?.runAsNonRoot, true);
      assert.equal(security?.readOnlyRootFilesystem, true);
      assert.equal(security?.allowPrivilegeEscalation, false);
      assert.deepEqual(security?.capabilities?.drop, ['ALL']);
      // The only writable paths: an emptyDir on /tmp (and /data with SQLite), the configuration read-only.
      const mounts = container.volumeMounts ?? [];
      assert.deepEqual(mounts.map((mount) => mount.mountPath).sort(), ['/etc/mcpgate', '/tmp']);
      assert.equal(mounts.find((mount) => mount.mountPath === '/etc/mcpgate')?.readOnly, true);
      const tmp = pod.volumes?.find((volume) => volume.name === mounts.find((mount) => mount.mountPath === '/tmp')?.name);
      assert.ok(tmp?.emptyDir !== undefined);
    });

    check('drains: a preStop sleep, and a grace period longer than the sleep, the delay, the grace and the gateway\'s 10 s', () => {
      const command = container.lifecycle?.preStop?.exec?.command ?? [];
      assert.equal(command[0], '/bin/sleep');
      const sleep = Number(command[1]);
      assert.ok(sleep > 0);
      const config = parseConfig(configOf(manifests), { env: fakeEnv(manifests), fileName: 'config.yaml' });
      const { shutdownDelayMs, shutdownGraceMs } = config.gateway.limits;
      assert.ok(shutdownDelayMs > 0, 'the gateway goes on serving with /readyz 503 after SIGTERM');
      assert.ok((pod.terminationGracePeriodSeconds ?? 0) > sleep + (shutdownDelayMs + shutdownGraceMs) / 1000 + 10);
    });

    check('starts `mcpgate serve` on the mounted configuration', () => {
      assert.deepEqual(container.args, ['serve', '--config', '/etc/mcpgate/config.yaml']);
      assert.equal(container.image, 'mcpgate:0.1.0');
      const config = pod.volumes?.find((volume) => volume.name === container.volumeMounts?.find((mount) => mount.mountPath === '/etc/mcpgate')?.name);
      assert.equal(config?.configMap?.name, one(manifests, 'ConfigMap').metadata.name);
    });

    check('reads every key from the Secret, never from the ConfigMap', () => {
      const secret = one(manifests, 'Secret');
      for (const [name, key] of Object.entries(SECRET_ENV)) {
        const ref = envOf(container, name).valueFrom?.secretKeyRef;
        assert.equal(ref?.name, secret.metadata.name, name);
        assert.equal(ref?.key, key, name);
        if (key !== 'admin-token') assert.ok(secret.data?.[key] !== undefined, `the Secret holds ${key}`);
      }
      assert.equal(envOf(container, 'MCPGATE_ADMIN_TOKEN').valueFrom?.secretKeyRef?.optional, true, 'no admin token: the admin API is off');
      assert.equal(secret.metadata.annotations?.['helm.sh/resource-policy'], 'keep');
      for (const key of ['key-secret', 'session-key', 'state-key']) assert.ok(Buffer.from(secret.data?.[key] ?? '', 'base64').length >= 32, key);
      assert.match(Buffer.from(secret.data?.['receipt-signing-key'] ?? '', 'base64').toString(), /^-----BEGIN PRIVATE KEY-----\n/);
      assert.equal(envOf(container, 'MCPGATE_STORE_URL').value, 'postgres://mcpgate@postgres:5432/mcpgate');
      assert.equal(envOf(container, 'MCPGATE_REDIS_URL').value, 'redis://redis:6379');
      assert.doesNotMatch(configOf(manifests), /BEGIN PRIVATE KEY|postgres:\/\/|redis:\/\//);
    });

    check('writes a configuration the gateway accepts, every ${VAR} of it set on the container', () => {
      const text = configOf(manifests);
      const variables = [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)].map((match) => match[1] ?? '');
      for (const name of new Set(variables)) {
        // HOSTNAME, the pod's name, is set by the container runtime.
        if (name !== 'HOSTNAME') envOf(container, name);
      }
      const config = parseConfig(text, { env: fakeEnv(manifests), fileName: 'config.yaml' });
      assert.equal(config.gateway.mode, 'production');
      assert.deepEqual(config.gateway.listen, { host: '0.0.0.0', port: 8080 });
      assert.equal(config.gateway.store, 'postgres://mcpgate@postgres:5432/mcpgate');
      assert.equal(config.gateway.cluster.redis?.url, 'redis://redis:6379');
      assert.equal(config.gateway.cluster.replicaId, 'rel-mcpgate-5d9c7b6f4-x2k8q');
      assert.equal(config.gateway.auth.keySecret, fakeEnv(manifests)['MCPGATE_KEY_SECRET']);
      assert.equal(config.gateway.cluster.sessionKey, fakeEnv(manifests)['MCPGATE_SESSION_KEY']);
      assert.equal(config.gateway.mrtr.stateKey, fakeEnv(manifests)['MCPGATE_STATE_KEY']);
      assert.equal(config.gateway.receipts.signingKey, fakeEnv(manifests)['MCPGATE_RECEIPT_SIGNING_KEY']);
      assert.equal(config.gateway.admin.token, undefined);
    });

    check('keeps the `helm test` pod out of the Service and the budget', () => {
      const test = manifests.find((manifest) => manifest.metadata.annotations?.['helm.sh/hook'] === 'test');
      assert.ok(test !== undefined);
      const selector = one(manifests, 'Service').spec?.selector ?? {};
      const labels = test.metadata.labels ?? {};
      assert.ok(Object.entries(selector).some(([key, value]) => labels[key] !== value));
    });
  });

  check('takes replicaCount and an existing Secret: every key from it, no Secret of its own', () => {
    const manifests = render({ replicaCount: 3, existingSecret: 'mcpgate-keys' });
    assert.equal(one(manifests, 'Deployment').spec?.replicas, 3);
    assert.equal(manifests.filter((manifest) => manifest.kind === 'Secret').length, 0);
    const { container } = gatewayContainer(manifests);
    for (const [name, key] of Object.entries(SECRET_ENV)) {
      assert.deepEqual(envOf(container, name).valueFrom?.secretKeyRef, { name: 'mcpgate-keys', key, ...(key === 'admin-token' ? { optional: true } : {}) });
    }
  });

  check('reads the PostgreSQL and Redis URLs from the Secret when they hold passwords', () => {
    const manifests = render({ 'postgres.fromSecret': true, 'postgres.url': 'postgres://gw:pw@db:5432/mcpgate', 'redis.fromSecret': true, 'redis.url': 'rediss://:pw@cache:6380' });
    const { container } = gatewayContainer(manifests);
    assert.deepEqual(envOf(container, 'MCPGATE_STORE_URL').valueFrom?.secretKeyRef, { name: 'rel-mcpgate', key: 'postgres-url' });
    assert.deepEqual(envOf(container, 'MCPGATE_REDIS_URL').valueFrom?.secretKeyRef, { name: 'rel-mcpgate', key: 'redis-url' });
    const secret = one(manifests, 'Secret');
    assert.equal(Buffer.from(secret.data?.['postgres-url'] ?? '', 'base64').toString(), 'postgres://gw:pw@db:5432/mcpgate');
    assert.equal(Buffer.from(secret.data?.['redis-url'] ?? '', 'base64').toString(), 'rediss://:pw@cache:6380');
    assert.doesNotMatch(JSON.stringify(one(manifests, 'Deployment')), /pw@/);
  });

  check('puts given keys and the admin token in its Secret as they are', () => {
    const adminToken = 'a'.repeat(40);
    const manifests = render({ 'secret.keySecret': 'k'.repeat(40), 'secret.adminToken': adminToken });
    const secret = one(manifests, 'Secret');
    assert.equal(Buffer.from(secret.data?.['key-secret'] ?? '', 'base64').toString(), 'k'.repeat(40));
    assert.equal(Buffer.from(secret.data?.['admin-token'] ?? '', 'base64').toString(), adminToken);
    const config = parseConfig(configOf(manifests), { env: fakeEnv(manifests), fileName: 'config.yaml' });
    assert.equal(config.gateway.admin.token, adminToken);
  });

  check('computes the grace period from the drain settings, gateway.extra included, and refuses one too short', () => {
    const manifests = render({ 'drain.preStopSleepSeconds': 7, 'gateway.shutdownDelayMs': 10000, 'gateway.extra.limits.shutdownGraceMs': 30500 });
    const { pod, container } = gatewayContainer(manifests);
    assert.deepEqual(container.lifecycle?.preStop?.exec?.command, ['/bin/sleep', '7']);
    const config = parseConfig(configOf(manifests), { env: fakeEnv(manifests), fileName: 'config.yaml' });
    assert.equal(config.gateway.limits.shutdownDelayMs, 10000);
    assert.equal(config.gateway.limits.shutdownGraceMs, 30500);
    // 7 + ceil(40.5) + 10, and 5 s to spare.
    assert.equal(pod.terminationGracePeriodSeconds, 63);
    assert.equal(gatewayContainer(render({ 'drain.terminationGracePeriodSeconds': 120 })).pod.terminationGracePeriodSeconds, 120);
    assert.match(refuse({ 'drain.terminationGracePeriodSeconds': 45 }), /terminationGracePeriodSeconds \(45\) must exceed .* = 45/);
  });

  check('serves one replica from SQLite on /data, and refuses two', () => {
    const manifests = render({ replicaCount: 1, 'postgres.enabled': false, 'redis.enabled': false, 'persistence.existingClaim': 'gw-data' });
    const deployment = one(manifests, 'Deployment');
    assert.equal(deployment.spec?.strategy?.type, 'Recreate');
    const { pod, container } = gatewayContainer(manifests);
    assert.equal(envOf(container, 'MCPGATE_STORE_URL').value, '/data/mcpgate.db');
    assert.equal((container.env ?? []).some((entry) => entry.name === 'MCPGATE_REDIS_URL'), false);
    const data = container.volumeMounts?.find((mount) => mount.mountPath === '/data');
    assert.equal(pod.volumes?.find((volume) => volume.name === data?.name)?.persistentVolumeClaim?.claimName, 'gw-data');
    const config = parseConfig(configOf(manifests), { env: fakeEnv(manifests), fileName: 'config.yaml' });
    assert.equal(config.gateway.store, '/data/mcpgate.db');
    assert.equal(config.gateway.cluster.redis, undefined);
    assert.match(refuse({ 'postgres.enabled': false }), /SQLite .* one replica only/);
  });

  check('validates values against its schema', () => {
    assert.match(refuse({ replicaCount: 0 }), /replicaCount/);
    assert.match(refuse({ 'secret.keySecret': 'short' }), /keySecret/);
    assert.match(refuse({ replicaCount2: 1 }), /replicaCount2/);
  });
});

/**
 * The environment a pod of `manifests` would have: literal values as they are, secretKeyRefs from the rendered
 * Secret (or made up, for an existing one), HOSTNAME a pod name.
 */
function fakeEnv(manifests: readonly Manifest[]): Record<string, string> {
  const { container } = gatewayContainer(manifests);
  const secret = manifests.find((manifest) => manifest.kind === 'Secret')?.data ?? {};
  const env: Record<string, string> = { HOSTNAME: 'rel-mcpgate-5d9c7b6f4-x2k8q' };
  for (const entry of container.env ?? []) {
    if (entry.value !== undefined) env[entry.name] = entry.value;
    const ref = entry.valueFrom?.secretKeyRef;
    if (ref === undefined) continue;
    const data = secret[ref.key];
    if (data !== undefined) env[entry.name] = Buffer.from(data, 'base64').toString();
    else if (ref.optional !== true) env[entry.name] = `made-up-${ref.key}-`.padEnd(48, 'x');
  }
  return env;
}
