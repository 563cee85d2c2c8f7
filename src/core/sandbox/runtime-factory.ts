import path from 'node:path';
import { BwrapRuntime } from './bwrap-driver';
import { MsbRuntime } from './msb-driver';
import { OciRuntime } from './oci-driver';
import { selectDriver, AUTO_DRIVER_ORDER, type DriverSelection } from './select-driver';
import type { SandboxAvailability, SandboxDriverName, SandboxRuntime } from './types';

export interface RuntimeFactoryOptions {
  /** Forge's data folder; bwrap keeps its sandbox records under `<dataDir>/sandboxes`. */
  dataDir: string;
  /** Environment for engine CLIs (DOCKER_HOST, CONTAINER_HOST, …). */
  env?: NodeJS.ProcessEnv;
}

export function createSandboxRuntime(driver: SandboxDriverName, options: RuntimeFactoryOptions): SandboxRuntime {
  switch (driver) {
    case 'docker':
    case 'podman':
      // The engine CLI works in Forge's data folder, never in the user's current folder.
      return new OciRuntime({ engine: driver, workDir: path.join(options.dataDir, 'sandbox-engine'), ...(options.env ? { env: options.env } : {}) });
    case 'bwrap':
      return new BwrapRuntime({ stateDir: path.join(options.dataDir, 'sandboxes') });
    case 'msb':
      return new MsbRuntime(options.env ? { env: options.env } : {});
  }
}

/**
 * Resolves `forge.sandbox.driver` to a runtime: probes the drivers the setting may pick
 * (all of `auto`'s order, or just the named one) and applies `selectDriver`.
 */
export async function resolveSandboxRuntime(
  setting: string,
  options: RuntimeFactoryOptions,
): Promise<{ selection: DriverSelection; runtime: SandboxRuntime | null }> {
  const candidates: SandboxDriverName[] =
    setting === 'auto' ? [...AUTO_DRIVER_ORDER] : ([setting].filter((s) => ['docker', 'podman', 'bwrap', 'msb'].includes(s)) as SandboxDriverName[]);
  const probes: Partial<Record<SandboxDriverName, SandboxAvailability>> = {};
  const runtimes: Partial<Record<SandboxDriverName, SandboxRuntime>> = {};
  for (const d of candidates) {
    const rt = createSandboxRuntime(d, options);
    runtimes[d] = rt;
    probes[d] = await rt.checkAvailable();
    if (setting === 'auto' && probes[d]?.available) break;
  }
  const selection = selectDriver(setting, probes);
  return { selection, runtime: selection.ok ? (runtimes[selection.driver] ?? null) : null };
}
