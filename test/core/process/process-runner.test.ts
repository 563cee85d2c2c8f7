import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ProcessSpawnError, resolveOnPath, runProcess, runProcessSync, startProcess } from '../../../src/core/process/process-runner';

/** Running, not a zombie waiting for its (new) parent to reap it. */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

describe('process runner (real processes)', function () {
  this.timeout(30_000);

  it('captures output and the exit code, feeds input, and caps each stream at maxOutputBytes', async () => {
    const r = await runProcess('sh', ['-c', 'cat; echo err >&2; exit 3'], { input: 'hello\n' });
    assert.deepEqual([r.exitCode, r.signal, r.stdout, r.stderr, r.timedOut, r.cancelled, r.outputTruncated], [3, null, 'hello\n', 'err\n', false, false, false]);
    const big = await runProcess('sh', ['-c', 'head -c 100000 /dev/zero | tr "\\0" a'], { maxOutputBytes: 1000 });
    assert.equal(big.stdout, 'a'.repeat(1000));
    assert.equal(big.outputTruncated, true);
    assert.equal(big.exitCode, 0);
  });

  it('hands the output over as it comes (whole characters, each stream), beyond the cap too', async () => {
    const seen: string[] = [];
    let firstAt = 0;
    const started = Date.now();
    // The first line arrives while the process still runs; "é" is written byte by byte across two writes.
    const r = await runProcess('bash', ['-c', "echo first; sleep 0.5; printf '\\303'; sleep 0.1; printf '\\251\\n'; echo err >&2"], {
      maxOutputBytes: 3,
      onOutput: (text, stream) => {
        if (seen.length === 0) firstAt = Date.now() - started;
        seen.push(`${stream}:${text}`);
      },
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'fir', 'the capture keeps its cap');
    assert.equal(seen.filter((s) => s.startsWith('stdout:')).map((s) => s.slice(7)).join(''), 'first\né\n');
    assert.deepEqual(seen.filter((s) => s.startsWith('stderr:')), ['stderr:err\n']);
    assert.ok(firstAt < Date.now() - started - 400, `the first line came before the process ended (at ${firstAt} ms)`);
  });

  it('at its time-out kills the whole group, a grandchild included, and says so', async () => {
    const r = await runProcess('sh', ['-c', 'sleep 60 & echo $!; wait'], { processGroup: true, timeoutMs: 300 });
    assert.equal(r.timedOut, true);
    assert.equal(r.signal, 'SIGKILL');
    const grandchild = Number(r.stdout.trim());
    assert.ok(grandchild > 0, r.stdout);
    await new Promise((res) => setTimeout(res, 100));
    assert.equal(alive(grandchild), false, 'the grandchild survived the time-out');
  });

  it('a cancel signal stops it (SIGTERM, then SIGKILL after forceKillAfterMs for a process that ignores SIGTERM)', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const t0 = Date.now();
    const r = await runProcess('sh', ['-c', 'trap "" TERM; sleep 60 & wait; sleep 60'], { processGroup: true, signal: controller.signal, killSignal: 'SIGTERM', forceKillAfterMs: 300 });
    assert.deepEqual([r.cancelled, r.timedOut, r.signal], [true, false, 'SIGKILL']);
    assert.ok(Date.now() - t0 < 10_000);
    const already = await runProcess('sleep', ['60'], { signal: AbortSignal.abort() });
    assert.equal(already.cancelled, true);
  });

  it('tells a missing program from a missing working folder (node says ENOENT for both)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'forge-runner-'));
    try {
      const noProgram = await runProcess('forge-no-such-program', [], { cwd: dir }).then(() => null, (e: unknown) => e);
      assert.ok(noProgram instanceof ProcessSpawnError);
      assert.deepEqual([noProgram.kind, noProgram.code], ['program-not-found', 'ENOENT']);
      const noCwd = await runProcess('true', [], { cwd: path.join(dir, 'gone') }).then(() => null, (e: unknown) => e);
      assert.ok(noCwd instanceof ProcessSpawnError);
      assert.deepEqual([noCwd.kind, noCwd.code], ['cwd-not-found', 'ENOENT']);
      const started = startProcess('forge-no-such-program', []);
      assert.equal((await started.spawnFailed).kind, 'program-not-found');
      assert.equal(runProcessSync('forge-no-such-program', []), null);
      assert.equal(runProcessSync('sh', ['-c', 'echo ok']), 'ok\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('looks programs up on a given PATH', () => {
    assert.equal(resolveOnPath('sh', '/nonexistent:/bin'), '/bin/sh');
    assert.equal(resolveOnPath('forge-no-such-program', '/bin'), 'forge-no-such-program');
    assert.equal(resolveOnPath('./x/sh', '/bin'), './x/sh');
  });
});

describe('process runner is the only place that spawns', () => {
  it('no other engine or CLI file imports node:child_process', () => {
    const root = path.join(__dirname, '../../../src');
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (/\.tsx?$/.test(entry.name) && /from ['"](node:)?child_process['"]/.test(readFileSync(file, 'utf8'))) offenders.push(path.relative(root, file));
      }
    };
    walk(root);
    assert.deepEqual(offenders, ['core/process/process-runner.ts'], 'spawn through src/core/process/process-runner.ts instead');
  });
});
