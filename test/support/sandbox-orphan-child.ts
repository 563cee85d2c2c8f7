/**
 * A Forge process that starts a loop sandbox and is then killed (SIGKILL) by the test,
 * leaving an orphan behind. Configured by the FORGE_ORPHAN_CHILD JSON environment variable.
 */
import { BwrapRuntime } from '../../src/core/sandbox/bwrap-driver';
import { SandboxManager, type LoopSandboxRequest } from '../../src/core/sandbox/manager';
import { OciRuntime } from '../../src/core/sandbox/oci-driver';
import type { SandboxRuntime } from '../../src/core/sandbox/types';

interface ChildConfig {
  driver: 'docker' | 'podman' | 'bwrap';
  stateDir: string;
  prefix: string;
  request: LoopSandboxRequest;
}

const config = JSON.parse(process.env.FORGE_ORPHAN_CHILD ?? '{}') as ChildConfig;
const runtime: SandboxRuntime =
  config.driver === 'bwrap' ? new BwrapRuntime({ stateDir: config.stateDir }) : new OciRuntime({ engine: config.driver });
const manager = new SandboxManager({ runtime, prefix: config.prefix, isLoopRunning: () => true });
await manager.start(config.request);
process.stdout.write('READY\n');
setInterval(() => undefined, 1 << 30);
