/**
 * The pure parts of forge_shell / forge_jobs and the shell-hang watchdog: defaults and caps,
 * tails and paging, result texts, the watchdog's threshold, overdue calls and call matching.
 */
import { strict as assert } from 'node:assert';
import {
  compileSuccessPattern,
  formatJobList,
  formatShellResult,
  keepTail,
  lastLines,
  pageLines,
  renderWatchdogStamp,
  shellTimings,
  splitLines,
  type JobSummary,
} from '../../../src/core/jobs/job-core';
import { effectiveStallMs, overdueCalls, registrationsOf, WATCHDOG_FLOOR_MS } from '../../../src/core/jobs/shell-watchdog';

const job = (over: Partial<JobSummary> = {}): JobSummary => ({
  id: 'job-1',
  command: 'npm test',
  state: 'running',
  exitCode: null,
  signal: null,
  startedAt: 1000,
  endedAt: null,
  outputBytes: 12,
  logPath: '/x/job-1.log',
  ...over,
});

describe('forge_shell core', () => {
  it('defaults idle_ms 60 s and max_wait_ms 120 s, caps max_wait_ms at 600 s and idle_ms at max_wait_ms', () => {
    assert.deepEqual(shellTimings({}), { idleMs: 60_000, maxWaitMs: 120_000 });
    assert.deepEqual(shellTimings({ max_wait_ms: 10_000_000 }), { idleMs: 60_000, maxWaitMs: 600_000 });
    assert.deepEqual(shellTimings({ idle_ms: 90_000, max_wait_ms: 5000 }), { idleMs: 5000, maxWaitMs: 5000 });
    assert.deepEqual(shellTimings({ idle_ms: 0, max_wait_ms: 0 }), { idleMs: 1, maxWaitMs: 1 });
  });

  it('compiles success_pattern multiline, and says what is wrong with a bad one', () => {
    assert.equal(compileSuccessPattern(undefined), undefined);
    assert.equal(compileSuccessPattern(''), undefined);
    const re = compileSuccessPattern('^listening on \\d+$');
    assert.ok(re instanceof RegExp && re.test('booting\nlistening on 80\nmore'));
    const bad = compileSuccessPattern('([');
    assert.ok(bad && !(bad instanceof RegExp) && /success_pattern is not a valid regular expression/.test(bad.error));
  });

  it('keeps tails from a line start, splits and pages lines', () => {
    assert.equal(keepTail('abc', 10), 'abc');
    assert.equal(keepTail('line1\nline2\nline3', 8), 'line3');
    assert.deepEqual(splitLines(''), []);
    assert.deepEqual(splitLines('a\nb\n'), ['a', 'b']);
    assert.deepEqual(lastLines('a\nb\nc\n', 2), { lines: ['b', 'c'], omitted: 1 });
    assert.deepEqual(pageLines('a\nb\nc\n', 1, 1), { lines: ['b'], total: 3, next: 2 });
    assert.deepEqual(pageLines('a\nb\nc\n', 2, 5), { lines: ['c'], total: 3, next: null });
    assert.deepEqual(pageLines('a\n', 9, 5), { lines: [], total: 1, next: null });
  });

  it('says why a call returned, the job id while it runs, and the output tail', () => {
    const idle = formatShellResult(job(), { kind: 'idle', idleMs: 1500 }, 'started\n');
    assert.match(idle, /^status: still-running \(no output for 1500 ms\)\njob: job-1\nlog: \/x\/job-1\.log\nUse forge_jobs .*\n--- output ---\nstarted$/);
    const exited = formatShellResult(job({ state: 'exited', exitCode: 2 }), { kind: 'exited', exitCode: 2, signal: null }, '');
    assert.match(exited, /^status: exited with code 2\n/);
    assert.doesNotMatch(exited, /Use forge_jobs/);
    assert.match(exited, /\(no output\)$/);
    assert.match(formatShellResult(job(), { kind: 'pattern', match: 'listening on 1' }, 'x'), /success_pattern matched \("listening on 1"\); the process is still running/);
    assert.match(formatShellResult(job(), { kind: 'max-wait', maxWaitMs: 9 }, 'x'), /max_wait_ms 9 reached; the process was not stopped/);
    assert.doesNotMatch(formatShellResult(job(), { kind: 'background' }, 'x'), /output/);
    const many = Array.from({ length: 100 }, (_, i) => `l${i}`).join('\n');
    assert.match(formatShellResult(job(), { kind: 'idle', idleMs: 1 }, many), /last 60 lines; forge_jobs log for the rest/);
    assert.equal(formatJobList([], 0), 'No jobs in this loop.');
    assert.match(formatJobList([job(), job({ id: 'job-2', state: 'killed', endedAt: 3000 })], 5000), /^job-1 {2}running {2}4 s .*\njob-2 {2}killed/);
  });

  it('stamps only builtin shell calls (not forge_shell jobs) and quotes the calls folder', () => {
    const lines = renderWatchdogStamp("/tmp/it's").join('\n');
    assert.match(lines, /if \[ -z "\$\{FORGE_JOB_MARK:-\}" \]/);
    assert.match(lines, /export FORGE_WATCHDOG_MARK/);
    assert.ok(lines.includes(`'/tmp/it'\\''s'/"$FORGE_WATCHDOG_MARK"`));
  });
});

describe('shell-hang watchdog core', () => {
  it('never goes below the 60 s floor unless a test lowers the floor', () => {
    assert.equal(WATCHDOG_FLOOR_MS, 60_000);
    assert.equal(effectiveStallMs(1000), 60_000);
    assert.equal(effectiveStallMs(600_000), 600_000);
    assert.equal(effectiveStallMs(3000, 500), 3000);
  });

  it('finds calls open past the threshold once', () => {
    const calls = [
      { callId: 'a', sessionId: 's', command: 'x', startedAt: 0 },
      { callId: 'b', sessionId: 's', command: 'y', startedAt: 500 },
    ];
    assert.deepEqual(overdueCalls(calls, new Set(), 999, 1000).map((c) => c.callId), []);
    assert.deepEqual(overdueCalls(calls, new Set(), 1000, 1000).map((c) => c.callId), ['a']);
    assert.deepEqual(overdueCalls(calls, new Set(['a']), 2000, 1000).map((c) => c.callId), ['b']);
  });

  it('matches a call to the registrations of its command made after it started', () => {
    const call = { callId: 'a', sessionId: 's', command: 'sleep 9 &', startedAt: 10_000 };
    const regs = [
      { mark: 'm1', command: 'sleep 9 &', registeredAt: 9500 },
      { mark: 'm2', command: 'sleep 9 &', registeredAt: 5000 },
      { mark: 'm3', command: 'other', registeredAt: 10_100 },
    ];
    assert.deepEqual(registrationsOf(call, regs).map((r) => r.mark), ['m1']);
  });
});
