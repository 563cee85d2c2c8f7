// Benchmarks end with a message instead of hanging or skipping (bench/bench-common.mjs benchRun).
//
// bench:loop must end with a message when the loop's end event never reaches it (it hung once
// its bare side stopped answering opencode's permission requests). A real run of the benchmark in its quick mode (real engine, opencode, git, scripted model),
// told to wait for an end event name the runtime never emits: it must exit with the time-out's
// status and name the step and what it waited for, within its time-out.
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

describe('bench:loop without its end event', function () {
  this.timeout(180_000);
  this.retries(0);

  it('fails with a message naming the step and the awaited event within its time-out', async () => {
    // The Forge loop's step starts a few seconds in and never ends: any time-out past that lands in it.
    const timeoutS = 45;
    const t0 = Date.now();
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['bench/loop-overhead.mjs', '--quick', '--timeout', String(timeoutS), '--end-event', 'loop.never_emitted'], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (b) => (err += b));
      child.stdout.resume();
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c, stderr: err }));
    });
    const seconds = (Date.now() - t0) / 1000;
    assert.equal(code, 124, `exit status 124 (timed out) expected; stderr:\n${stderr}`);
    assert.match(stderr, /bench:loop: TIMED OUT after 45 s in step \d+ "run 1: Forge loop \(shared server\)", waiting for the runtime's event loop\.never_emitted for Forge loop "bench"/);
    // The progress lines came before it, step by step.
    assert.match(stderr, /step 1: load the engine/);
    assert.match(stderr, /step \d+: run 1: Forge loop \(shared server\)/);
    assert.doesNotMatch(stderr, /step \d+: run 1: bare SDK/, 'it never got past the Forge loop');
    // Its own time-out, plus the bounded clean-up (20 s) and the process start.
    assert.ok(seconds < timeoutS + 40, `ended ${seconds.toFixed(0)} s after start`);
  });
});

describe('a benchmark under CI=true', function () {
  this.timeout(120_000);

  it('fails, naming the step, when a driver it measures is not available (never a skip)', async () => {
    // A docker daemon that cannot be reached: the driver's own availability probe says so.
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['bench/sandbox.mjs', '--quick', '--drivers', 'docker'], {
        cwd: root,
        env: { ...process.env, CI: 'true', DOCKER_HOST: 'unix:///nonexistent/forge-bench-test.sock' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (b) => (err += b));
      child.stdout.resume();
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c, stderr: err }));
    });
    assert.equal(code, 1, stderr);
    assert.match(stderr, /bench:sandbox: FAILED in step \d+ "docker: availability", waiting for docker's availability probe, after [\d.]+ s: Error: driver docker cannot run under CI=true: /);
  });
});

