/**
 * LoopJobs with the real unconfined host agent shell (real bash, real processes): the exit,
 * max_wait and background paths, poll and log, a bad pattern refused, no secret in a job's
 * environment, and dispose() killing every tree (exited shells' detached children too).
 * Processes are counted by a unique token in their command line.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { JobRequestError, LoopJobs } from '../../../src/core/jobs/loop-jobs';
import { prepareAgentHostShell } from '../../../src/core/sandbox/host-shell';

const token = () => `87${randomInt(100, 999)}.${randomInt(100000, 999999)}`;
function processesWith(tag: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(tag)) pids.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return pids;
}

describe('LoopJobs through the unconfined host agent shell (real bash)', function () {
  this.timeout(60_000);
  let dir: string;
  let jobs: LoopJobs;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'forge-jobs-'));
    const shell = await prepareAgentHostShell({ dir: path.join(dir, 'shell'), loopName: 'jobs-test' });
    jobs = new LoopJobs({
      loopName: 'jobs-test',
      shellPath: shell.shellPath,
      cwd: dir,
      logDir: path.join(dir, 'shell', 'jobs'),
      baseEnv: { ...process.env, OPENCODE_SERVER_PASSWORD: 'pw-secret', FORGE_TOOL_SECRET: 'tool-secret', MY_API_KEY: 'k', KEEP_ME: 'kept' },
    });
  });
  after(async () => {
    await jobs?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('returns at exit with the exit code and output, and no secret reached the command', async () => {
    const out = await jobs.shell({ command: "env | grep -E 'KEEP_ME|FORGE_|OPENCODE_|API_KEY|secret'; exit 3" });
    assert.match(out, /^status: exited with code 3/);
    assert.match(out, /KEEP_ME=kept/);
    assert.match(out, /FORGE_JOB_MARK=job-\d+-[0-9a-f]{16}/);
    assert.doesNotMatch(out, /pw-secret|tool-secret|MY_API_KEY|OPENCODE_SERVER_PASSWORD/);
  });

  it('returns still-running at max_wait_ms even while output keeps coming, and the job goes on', async () => {
    const t0 = Date.now();
    const out = await jobs.shell({ command: 'while true; do echo tick; sleep 0.1; done', idle_ms: 5000, max_wait_ms: 800 });
    assert.match(out, /status: still-running \(max_wait_ms 800 reached/);
    assert.ok(Date.now() - t0 < 4000);
    const id = /job: (job-\d+)/.exec(out)![1]!;
    const polled = await jobs.jobs({ action: 'poll', jobId: id, wait_ms: 2000 });
    assert.match(polled, new RegExp(`^job ${id}: running\\n--- new output ---\\ntick`));
    assert.match(await jobs.jobs({ action: 'kill', jobId: id }), /killed with its whole process tree/);
    assert.match(await jobs.jobs({ action: 'poll', jobId: id, wait_ms: 0 }), /killed/);
  });

  it('runs in the background, pages the log by lines, and refuses unknown jobs and bad patterns clearly', async () => {
    const out = await jobs.shell({ command: 'for i in 1 2 3 4 5; do echo line$i; done', run_in_background: true });
    assert.match(out, /^status: started in the background\njob: (job-\d+)/);
    const id = /job: (job-\d+)/.exec(out)![1]!;
    assert.match(await jobs.jobs({ action: 'poll', jobId: id, wait_ms: 5000 }), /line1/);
    for (let i = 0; i < 50 && !/exited/.test(await jobs.jobs({ action: 'poll', jobId: id, wait_ms: 100 })); i++);
    assert.equal(await jobs.jobs({ action: 'log', jobId: id, offset: 1, limit: 2 }), `job ${id}: exited with code 0; log lines 1–2 of 5 (next offset 3)\nline2\nline3`);
    await assert.rejects(jobs.jobs({ action: 'poll', jobId: 'job-99' }), (e: unknown) => e instanceof JobRequestError && /No job "job-99" in this loop\. Jobs: job-1/.test((e as Error).message));
    await assert.rejects(jobs.shell({ command: 'true', success_pattern: '([' }), /success_pattern is not a valid regular expression/);
  });

  it('dispose kills every job, and the detached children of shells that already exited', async () => {
    const tag = token();
    const out = await jobs.shell({ command: `setsid sleep ${tag} > /dev/null 2>&1 < /dev/null & echo spawned` });
    assert.match(out, /status: exited with code 0/);
    assert.equal(processesWith(tag).length, 1);
    await jobs.dispose();
    assert.deepEqual(processesWith(tag), []);
    await assert.rejects(jobs.shell({ command: 'true' }), /The loop is ending; no new jobs start/);
  });
});
