/**
 * The real opencode binary, driven by a scripted model, runs its `bash` tool (and, on
 * Docker, its ripgrep-based `grep` tool) through Forge's shims inside the loop's sandbox.
 * Proof that a command ran inside: the sandbox's hostname and HOME, a write to /etc that
 * fails, and (Docker) a search of /etc that finds the container's own /etc/hostname.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createOpencodeClient } from '@opencode-ai/sdk/v2';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { SandboxManager } from '../../../src/core/sandbox/manager';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import { prepareOpencodeSandbox } from '../../../src/core/sandbox/shell-shim';
import type { SandboxRuntime } from '../../../src/core/sandbox/types';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { startScriptedModel, text, toolCall, type ScriptedModel } from '../../support/scripted-model';
import {
  bwrapPrereqs,
  dockerPrereqs,
  makeSandboxTestDirs,
  REPO_ROOT,
  SMALL_LIMITS,
  TEST_IMAGE,
  uniqueLoopName,
  type SandboxTestDirs,
} from '../../support/sandbox-fixtures';

const OPENCODE = path.join(REPO_ROOT, 'node_modules', 'opencode-linux-x64', 'bin', 'opencode');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startOpencode(cwd: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const port = await freePort();
  const child = spawn(OPENCODE, ['serve', '--port', String(port), '--hostname', '127.0.0.1', '--print-logs', '--log-level', 'INFO'], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      output += b.toString();
      if (output.includes('opencode server listening')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`opencode exited (${code}) before listening:\n${output}`)));
  });
  return { child, url: `http://127.0.0.1:${port}`, output: () => output };
}

interface Case {
  driver: 'docker' | 'bwrap';
  prereqs(): NodeJS.ProcessEnv;
  runtime(dirs: SandboxTestDirs, env: NodeJS.ProcessEnv): SandboxRuntime;
  image?: string;
}

const cases: Case[] = [
  { driver: 'docker', prereqs: dockerPrereqs, runtime: (_d, env) => new OciRuntime({ engine: 'docker', env }), image: TEST_IMAGE },
  {
    driver: 'bwrap',
    prereqs: () => {
      bwrapPrereqs();
      return process.env;
    },
    runtime: (d) => new BwrapRuntime({ stateDir: d.stateDir }),
  },
];

for (const c of cases) {
  describe(`opencode shell tool through the ${c.driver} sandbox shim (real opencode)`, function () {
    this.timeout(300_000);
    let env: NodeJS.ProcessEnv;
    let dirs: SandboxTestDirs;
    let model: ScriptedModel | undefined;
    let ocEnv: OpencodeTestEnvironment | undefined;
    let server: { child: ChildProcess; url: string; output: () => string } | undefined;
    let manager: SandboxManager;
    let loop: string;

    before(function () {
      this.timeout(20 * 60_000);
      env = c.prereqs();
    });

    beforeEach(() => {
      dirs = makeSandboxTestDirs(`oc-${c.driver}`);
      manager = new SandboxManager({ runtime: c.runtime(dirs, env), prefix: `ft${process.pid}oc-`, isLoopRunning: () => false });
      loop = uniqueLoopName(c.driver);
    });

    afterEach(async () => {
      if (server?.child.pid) {
        try {
          process.kill(-server.child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      server = undefined;
      await model?.close();
      model = undefined;
      await manager.stop(loop).catch(() => undefined);
      await ocEnv?.cleanup();
      ocEnv = undefined;
      dirs.cleanup();
    });

    it('runs the agent\'s bash commands inside the sandbox, in the worktree, with /etc read-only, despite a project config naming another shell', async () => {
      const handle = await manager.start({
        loopName: loop,
        worktreeDir: dirs.worktreeDir,
        gitCommonDir: dirs.gitCommonDir,
        network: false,
        limits: SMALL_LIMITS,
        ...(c.image ? { image: c.image } : {}),
      });
      // opencode started here reads the worktree's opencode.json (Forge's loops never do, see
      // project-config.ts): Forge's inline `shell` still wins over it.
      const additions = await prepareOpencodeSandbox(handle, { shimRoot: dirs.shimRoot });
      assert.ok(!additions.shellShimPath.startsWith(dirs.worktreeDir), 'the shim is never written into the worktree');

      // An agent could write a project config naming another shell; Forge's inline config wins.
      writeFileSync(path.join(dirs.worktreeDir, 'opencode.json'), JSON.stringify({ shell: '/bin/bash' }));
      const etcTarget = `/etc/forge-oc-${process.pid}`;
      const steps = [
        toolCall('bash', {
          command: `echo "host=$(hostname) home=$HOME pwd=$(pwd)" > proof.txt; echo x > ${etcTarget}; echo "etc-exit=$?" >> proof.txt; git status --porcelain >> proof.txt`,
          description: 'Prove where commands run',
        }),
        ...(c.driver === 'docker' ? [toolCall('grep', { pattern: 'forge-sandbox', path: '/etc', include: 'hostname' })] : []),
        text('done'),
      ];
      model = await startScriptedModel({ handler: (_req, ctx) => steps[ctx.turnInSession] ?? text('done') });
      ocEnv = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
      const forgeConfig = {
        ...additions.config,
        permission: { edit: 'allow', bash: 'allow', webfetch: 'allow', external_directory: 'allow' },
      };
      server = await startOpencode(dirs.worktreeDir, {
        ...process.env,
        ...ocEnv.env,
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_SHARE: '1',
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_CONFIG_CONTENT: JSON.stringify(forgeConfig),
        ...additions.env,
      });
      const client = createOpencodeClient({ baseUrl: server.url, directory: dirs.worktreeDir });
      const session = await client.session.create({ title: 'sandbox shim' });
      assert.ok(session.data, `session.create failed: ${JSON.stringify(session.error)}`);
      await client.session.prompt({ sessionID: session.data.id, parts: [{ type: 'text', text: 'Prove where you run.' }] });

      const proofFile = path.join(dirs.worktreeDir, 'proof.txt');
      assert.ok(existsSync(proofFile), `the bash tool did not write proof.txt; opencode log:\n${server.output().slice(-3000)}`);
      const proof = readFileSync(proofFile, 'utf8');
      assert.notEqual(os.hostname(), 'forge-sandbox');
      assert.match(proof, new RegExp(`^host=forge-sandbox home=/tmp pwd=${dirs.worktreeDir}$`, 'm'));
      assert.match(proof, /^etc-exit=[1-9]\d*$/m, 'writing /etc must fail inside the sandbox');
      assert.match(proof, /\?\? proof\.txt/, 'git status works inside on the linked worktree');
      assert.equal(existsSync(etcTarget), false);

      const bashResult = model.agentRequests.flatMap((r) => r.toolResults).find((t) => t.name === 'bash');
      assert.ok(bashResult, 'opencode sent the bash result back to the model');
      if (c.driver === 'docker') {
        const grepResult = model.agentRequests.flatMap((r) => r.toolResults).find((t) => t.name === 'grep');
        assert.ok(grepResult, 'opencode sent the grep result back');
        // Only the container's /etc/hostname says forge-sandbox: ripgrep searched inside.
        assert.match(grepResult.content, /\/etc\/hostname/, `grep output: ${grepResult.content}`);
      }
    });
  });
}
