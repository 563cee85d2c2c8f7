import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseVerificationChecks } from '../../../src/core/checks/parse';
import { DEFAULT_MAX_OUTPUT_BYTES, defaultCheckEnvironment, hostCheckExecutor, killRunningChecksNow, runCheck, runChecks } from '../../../src/core/checks/runner';
import type { CheckSpec } from '../../../src/core/checks/types';

/** The one check a Verification text names. */
function check(verification: string): CheckSpec {
  const parsed = parseVerificationChecks(verification);
  assert.deepEqual(parsed.problems, []);
  assert.equal(parsed.checks.length, 1);
  return parsed.checks[0]!;
}

function commandCheck(script: string): CheckSpec {
  return check(`\`\`\`sh\n${script}\n\`\`\``);
}

/** Pids of live (non-zombie) processes whose environment holds `NAME=value`. */
async function processesWith(name: string, value: string): Promise<number[]> {
  const needle = Buffer.from(`${name}=${value}\0`);
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const environ = await readFile(`/proc/${entry}/environ`).catch(() => Buffer.alloc(0));
    if (environ.includes(needle)) found.push(Number(entry));
  }
  return found;
}

describe('checks: running a command on the host', function () {
  this.timeout(60_000);
  let worktree: string;
  let tag: string;
  /** Marks every process of a test's checks (beside Forge's own marker) so the test can look for leftovers. */
  const exec = (extra: Parameters<typeof hostCheckExecutor>[0] = {}) =>
    hostCheckExecutor({ env: { ...defaultCheckEnvironment(), FORGE_TEST_CHECK_TAG: tag }, ...extra });

  beforeEach(async () => {
    worktree = await mkdtemp(join(tmpdir(), 'forge-checks-'));
    tag = randomBytes(8).toString('hex');
  });
  afterEach(async () => {
    for (const pid of await processesWith('FORGE_TEST_CHECK_TAG', tag)) process.kill(pid, 'SIGKILL');
    await rm(worktree, { recursive: true, force: true });
  });

  it('passes a command that exits 0, in the worktree, with stdout and stderr interleaved in one tail', async () => {
    const result = await runCheck(commandCheck('echo one; echo two >&2; echo three; pwd'), { cwd: worktree, exec: exec(), now: () => 1_700_000_000_000 });
    assert.equal(result.status, 'passed');
    assert.equal(result.exitCode, 0);
    assert.equal(result.signal, null);
    assert.equal(result.message, 'exited with code 0');
    assert.equal(result.outputTail, `one\ntwo\nthree\n${worktree}\n`);
    assert.equal(result.outputBytes, Buffer.byteLength(result.outputTail));
    assert.equal(result.outputTruncated, false);
    assert.equal(result.startedAt, 1_700_000_000_000);
    assert.ok(result.durationMs >= 0 && result.durationMs < 10_000, String(result.durationMs));
    assert.equal(result.checkId, 'plan-1');
    assert.equal(result.label, 'check 1: echo one; echo two >&2; echo three; pwd');
  });

  it('fails a command that exits non-zero, keeping its exit code and output', async () => {
    const result = await runCheck(commandCheck('echo "1 failing" >&2\nexit 3'), { cwd: worktree, exec: exec() });
    assert.equal(result.status, 'failed');
    assert.equal(result.exitCode, 3);
    assert.equal(result.message, 'exited with code 3');
    assert.equal(result.outputTail, '1 failing\n');
  });

  it('says a command that cannot start is not found (exit 127) or not executable (exit 126), in bash\'s words', async () => {
    const missing = await runCheck(commandCheck('forge-no-such-command --flag'), { cwd: worktree, exec: exec() });
    assert.equal(missing.status, 'not-started');
    assert.equal(missing.exitCode, 127);
    assert.equal(missing.message, 'command not found (exit 127): bash: line 1: forge-no-such-command: command not found');
    await writeFile(join(worktree, 'script.sh'), 'echo hi\n', { mode: 0o644 });
    const notExecutable = await runCheck(commandCheck('./script.sh'), { cwd: worktree, exec: exec() });
    assert.equal(notExecutable.status, 'not-started');
    assert.equal(notExecutable.exitCode, 126);
    assert.equal(notExecutable.message, 'command found but not executable (exit 126): bash: line 1: ./script.sh: Permission denied');
  });

  it('runs a script that starts with "-" as a command, not as options of bash', async () => {
    const result = await runCheck(commandCheck('-n; echo ran'), { cwd: worktree, exec: exec() });
    assert.equal(result.exitCode, 0);
    assert.equal(result.outputTail, 'bash: line 1: -n: command not found\nran\n');
  });

  it('says a worktree that does not exist, without running anything', async () => {
    const result = await runCheck(commandCheck('touch /tmp/should-not-exist'), { cwd: join(worktree, 'gone'), exec: exec() });
    assert.equal(result.status, 'not-started');
    assert.equal(result.message, `could not start: the worktree folder ${join(worktree, 'gone')} does not exist; Forge runs checks in the loop's worktree`);
  });

  it('keeps only the tail of a command that prints 100 MB, with the memory of the test process staying bounded', async () => {
    let peakHeld = 0;
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peakRss = before;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 20);
    const result = await runCheck(commandCheck("head -c 100000000 /dev/zero | tr '\\0' x\necho\necho THE END"), {
      cwd: worktree,
      exec: exec({ onPeakHeldBytes: (bytes) => (peakHeld = bytes) }),
    });
    clearInterval(sampler);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    const growthMb = (peakRss - before) / 1024 / 1024;
    console.log(`      100 MB of output: RSS grew by ${growthMb.toFixed(1)} MB at most, the tail held at most ${peakHeld} bytes, ${result.durationMs} ms`);
    assert.equal(result.status, 'passed');
    assert.equal(result.outputBytes, 100_000_000 + 1 + 'THE END\n'.length);
    assert.equal(result.outputTruncated, true);
    assert.equal(Buffer.byteLength(result.outputTail), DEFAULT_MAX_OUTPUT_BYTES);
    assert.ok(result.outputTail.endsWith('xxxx\nTHE END\n'));
    assert.ok(peakHeld <= DEFAULT_MAX_OUTPUT_BYTES + 256 * 1024, `the tail held ${peakHeld} bytes`);
    assert.ok(growthMb < 50, `RSS grew by ${growthMb.toFixed(1)} MB while the command printed 100 MB`);
  });

  it('keeps the given tail size, and cuts no character in two', async () => {
    const result = await runCheck(commandCheck("printf 'é%.0s' $(seq 1 100); echo; echo done"), { cwd: worktree, exec: exec(), maxOutputBytes: 21 });
    assert.equal(result.outputTruncated, true);
    // 21 bytes: 'done\n', '\n', seven é (14 bytes) and half of one more, dropped.
    assert.equal(result.outputTail, 'ééééééé\ndone\n');
  });

  it('kills a hanging check at its timeout with everything it started: a disowned child, a setsid one and a double fork, all holding its output', async () => {
    const spec = commandCheck(
      [
        'sleep 1000 & disown',
        'setsid sleep 1001 &',
        'setsid bash -c "sleep 1002" &',
        '( ( sleep 1003 & ) & )',
        'echo started',
        'sleep 1004',
      ].join('\n'),
    );
    const running = runCheck(spec, { cwd: worktree, exec: exec(), timeoutMs: 1_500 });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const alive = await processesWith('FORGE_TEST_CHECK_TAG', tag);
    const commands = await Promise.all(alive.map(async (pid) => (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim()));
    // The five sleeps (bash execs the last one in its own place), in three sessions.
    assert.deepEqual(
      commands.filter((c) => c.startsWith('sleep ')).sort(),
      ['sleep 1000', 'sleep 1001', 'sleep 1002', 'sleep 1003', 'sleep 1004'],
    );
    const result = await running;
    assert.equal(result.status, 'timed-out');
    assert.equal(result.message, 'timed out after 1500 ms; Forge killed it and everything it started');
    assert.equal(result.exitCode, null);
    assert.equal(result.signal, 'SIGTERM');
    assert.equal(result.outputTail, 'started\n');
    assert.ok(result.durationMs < 10_000, `took ${result.durationMs} ms`);
    assert.deepEqual(await processesWith('FORGE_TEST_CHECK_TAG', tag), []);
  });

  it('kills a check that ignores SIGTERM with SIGKILL after the grace', async () => {
    const result = await runCheck(commandCheck("trap '' TERM\necho ready\nwhile true; do sleep 0.1; done"), {
      cwd: worktree,
      exec: exec({ killGraceMs: 500 }),
      timeoutMs: 800,
    });
    assert.equal(result.status, 'timed-out');
    assert.equal(result.signal, 'SIGKILL');
    assert.deepEqual(await processesWith('FORGE_TEST_CHECK_TAG', tag), []);
  });

  it('stops a check and everything it started when the loop is cancelled (its AbortSignal), and runs none once aborted', async () => {
    const controller = new AbortController();
    const running = runCheck(commandCheck('setsid sleep 1000 &\nsleep 1001 & disown\necho started\nsleep 1002'), {
      cwd: worktree,
      exec: exec(),
      timeoutMs: 60_000,
      signal: controller.signal,
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await processesWith('FORGE_TEST_CHECK_TAG', tag)).length, 3);
    controller.abort();
    const result = await running;
    assert.deepEqual([result.status, result.message, result.outputTail], ['cancelled', 'cancelled; Forge stopped it and everything it started', 'started\n']);
    assert.ok(result.durationMs < 5_000, `took ${result.durationMs} ms`);
    assert.deepEqual(await processesWith('FORGE_TEST_CHECK_TAG', tag), []);
    const after = await runCheck(commandCheck('touch ran.txt'), { cwd: worktree, exec: exec(), signal: controller.signal });
    assert.deepEqual([after.status, after.message], ['cancelled', 'cancelled before it started']);
    assert.deepEqual(await readdir(worktree), []);
  });

  it('kills the checks running now, synchronously, for an exit handler', async () => {
    const running = runCheck(commandCheck('setsid sleep 1000 &\nsleep 1001'), { cwd: worktree, exec: exec(), timeoutMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await processesWith('FORGE_TEST_CHECK_TAG', tag)).length, 2);
    assert.equal(killRunningChecksNow(), 1);
    const result = await running;
    assert.deepEqual([result.status, result.signal], ['failed', 'SIGKILL']);
    assert.deepEqual(await processesWith('FORGE_TEST_CHECK_TAG', tag), []);
    assert.equal(killRunningChecksNow(), 0);
  });

  it('ends a check when its command exits, killing a server it left in the background instead of waiting for the timeout', async () => {
    const result = await runCheck(commandCheck('setsid sleep 1000 &\nsleep 1001 &\necho ok'), { cwd: worktree, exec: exec(), timeoutMs: 30_000 });
    assert.equal(result.status, 'passed');
    assert.equal(result.outputTail, 'ok\n');
    assert.ok(result.durationMs < 5_000, `took ${result.durationMs} ms`);
    assert.deepEqual(await processesWith('FORGE_TEST_CHECK_TAG', tag), []);
  });

  it('does not give a check Forge\'s credentials by default', async () => {
    const env = defaultCheckEnvironment({ PATH: '/usr/bin', HOME: '/home/u', OPENAI_API_KEY: 'k', GITHUB_TOKEN: 't', FORGE_X: 'x', OPENCODE_SERVER_PASSWORD: 'p' });
    assert.deepEqual(env, { PATH: '/usr/bin', HOME: '/home/u' });
  });

  it('runs checks one after another and gives every result', async () => {
    const parsed = parseVerificationChecks('- `echo a > a.txt`\n- `test -f a.txt`\n- `exit 1`\n- exists: a.txt');
    const results = await runChecks(parsed.checks, { cwd: worktree, exec: exec() });
    assert.deepEqual(
      results.map((r) => [r.checkId, r.status]),
      [
        ['plan-1', 'passed'],
        ['plan-2', 'passed'],
        ['plan-3', 'failed'],
        ['plan-4', 'passed'],
      ],
    );
  });
});

describe('checks: file assertions', () => {
  let worktree: string;
  let outside: string;
  beforeEach(async () => {
    const base = await mkdtemp(join(tmpdir(), 'forge-file-checks-'));
    worktree = join(base, 'wt');
    outside = join(base, 'outside');
    await mkdir(join(worktree, 'src'), { recursive: true });
    await mkdir(outside);
    await writeFile(join(worktree, 'README.md'), '# Tool\n\n## Usage\nrun it\n');
    await writeFile(join(worktree, 'src', 'cli.ts'), 'export function main() {}\n');
    await writeFile(join(outside, 'secret.txt'), 'password\n');
    await symlink('README.md', join(worktree, 'readme-link'));
    await symlink(join(outside, 'secret.txt'), join(worktree, 'secret-link'));
    await symlink(outside, join(worktree, 'outside-dir'));
    await symlink(join(outside, 'missing.txt'), join(worktree, 'dangling-out'));
    await symlink('missing.txt', join(worktree, 'dangling-in'));
  });
  afterEach(async () => rm(join(worktree, '..'), { recursive: true, force: true }));

  const table: Array<[string, string, string]> = [
    ['- exists: README.md', 'passed', 'README.md exists'],
    ['- exists: src', 'passed', 'src exists'],
    ['- exists: .', 'passed', '. exists'],
    ['- exists: src/missing.ts', 'failed', 'src/missing.ts does not exist in the worktree'],
    ['- contains: README.md: ## Usage', 'passed', 'README.md contains "## Usage"'],
    ['- contains: README.md: ## Install', 'failed', 'README.md does not contain "## Install"'],
    ['- contains: src: x', 'failed', 'src is a folder; "contains" reads a file: name a file'],
    ['- matches: src/cli.ts: /^export function main\\(/m', 'passed', 'src/cli.ts matches /^export function main\\(/m'],
    ['- matches: README.md: /^## usage$/im', 'passed', 'README.md matches /^## usage$/im'],
    ['- matches: README.md: /^## usage$/m', 'failed', 'README.md does not match /^## usage$/m'],
    ['- contains: readme-link: run it', 'passed', 'readme-link contains "run it"'],
    ['- exists: dangling-in', 'failed', 'dangling-in does not exist in the worktree'],
  ];
  for (const [line, status, message] of table) {
    it(`${line} → ${status}`, async () => {
      const result = await runCheck(check(line), { cwd: worktree });
      assert.deepEqual([result.status, result.message], [status, message]);
      assert.equal(result.exitCode, null);
      assert.equal(result.outputTail, '');
    });
  }

  it('refuses a symbolic link whose real path leaves the worktree: to a file, through a folder, dangling', async () => {
    for (const line of ['- contains: secret-link: password', '- exists: secret-link', '- exists: outside-dir/secret.txt', '- exists: outside-dir/none.txt', '- exists: dangling-out']) {
      const result = await runCheck(check(line), { cwd: worktree });
      assert.equal(result.status, 'refused', `${line}: ${result.message}`);
      assert.match(result.message, / through a symbolic link, outside the worktree; Forge checks files inside the worktree only: check a file of the repository instead$/);
      assert.ok(!result.message.includes('password'));
    }
  });

  it('refuses a path that leaves through .. even when a spec was built by hand', async () => {
    const spec: CheckSpec = { ...check('- exists: x'), kind: 'exists', path: '../outside/secret.txt' } as CheckSpec;
    const result = await runCheck(spec, { cwd: worktree });
    assert.equal(result.status, 'refused');
  });

  it('stops a matches expression that backtracks without end at the check\'s timeout', async () => {
    await writeFile(join(worktree, 'a.txt'), `${'a'.repeat(40)}b`);
    const started = Date.now();
    const result = await runCheck(check('- matches: a.txt: /^(a+)+$/'), { cwd: worktree, timeoutMs: 300 });
    assert.equal(result.status, 'timed-out');
    assert.equal(result.message, '/^(a+)+$/ did not finish on a.txt within 300 ms (the expression backtracks too much): simplify it');
    assert.ok(Date.now() - started < 3_000);
  });

  it('reads only regular files: a named pipe, a link to one and a socket fail at once with a clear message (issue 27)', async () => {
    assert.equal(spawnSync('mkfifo', [join(worktree, 'pipe.txt')]).status, 0);
    await symlink('pipe.txt', join(worktree, 'pipe-link'));
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(worktree, 'sock'), resolve));
    try {
      const cases: Array<[string, string]> = [
        ['- contains: pipe.txt: x', 'pipe.txt is a named pipe (FIFO), not a regular file; Forge reads only regular files for "contains": the check needs pipe.txt to be a file of the repository'],
        ['- matches: pipe-link: /x/', 'pipe-link is a named pipe (FIFO), not a regular file; Forge reads only regular files for "matches": the check needs pipe-link to be a file of the repository'],
        ['- contains: sock: x', 'sock is a socket, not a regular file; Forge reads only regular files for "contains": the check needs sock to be a file of the repository'],
      ];
      for (const [line, message] of cases) {
        const result = await runCheck(check(line), { cwd: worktree, timeoutMs: 60_000 });
        assert.deepEqual([result.status, result.message], ['failed', message]);
      }
      // Existing is not reading: a pipe exists.
      assert.equal((await runCheck(check('- exists: pipe.txt'), { cwd: worktree })).status, 'passed');
    } finally {
      server.close();
    }
  });

  it('runs no file assertion once the loop is cancelled', async () => {
    const abort = new AbortController();
    abort.abort();
    const result = await runCheck(check('- contains: README.md: Usage'), { cwd: worktree, signal: abort.signal });
    assert.equal(result.status, 'cancelled');
  });

  it('says a worktree that does not exist', async () => {
    const result = await runCheck(check('- exists: x'), { cwd: join(worktree, 'gone') });
    assert.equal(result.status, 'not-started');
  });
});
