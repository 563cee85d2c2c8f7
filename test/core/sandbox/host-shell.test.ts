/**
 * The agent shell of an unconfined loop (src/core/sandbox/host-shell.ts), run for real: bash,
 * git, a local bare remote. What docs/sandbox.md promises for unconfined loops is checked here
 * command by command, and end to end by test/core/loop/loop-hostile.test.ts.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSecretVariableName, prepareAgentHostShell, type AgentHostShell } from '../../../src/core/sandbox/host-shell';
import { pushGuardEnv } from '../../../src/core/sandbox/push-guard';

function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

describe('unconfined agent shell (real bash and git)', () => {
  let root: string;
  let work: string;
  let bare: string;
  let shell: AgentHostShell;
  const secrets = {
    OPENCODE_SERVER_PASSWORD: 'pw-1234567890',
    OPENCODE_SERVER_USERNAME: 'opencode',
    OPENCODE_CONFIG_CONTENT: '{"mcp":{"forge":{"headers":{"Authorization":"Bearer tool-secret-abc"}}}}',
    FORGE_TOOL_SECRET: 'forge-secret',
    ANTHROPIC_API_KEY: 'sk-ant-xyz',
    GITHUB_TOKEN: 'ghp_abc',
    AWS_SECRET_ACCESS_KEY: 'aws-secret',
    SSH_AUTH_SOCK: '/run/ssh-agent.sock',
  };

  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'forge-host-shell-'));
    bare = path.join(root, 'remote.git');
    work = path.join(root, 'work');
    spawnSync('git', ['init', '-q', '--bare', bare]);
    spawnSync('git', ['init', '-q', '-b', 'main', work]);
    git(work, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'one');
    git(work, 'remote', 'add', 'origin', bare);
    shell = await prepareAgentHostShell({ dir: path.join(root, 'shims', 'loop-host'), loopName: 'loop' });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  /** Runs `command` as opencode's shell tool does: `<shell> -c <command>` with opencode's environment. */
  function run(command: string, extraEnv: Record<string, string> = {}) {
    return spawnSync(shell.shellPath, ['-c', command], {
      cwd: work,
      encoding: 'utf8',
      env: { PATH: process.env.PATH!, HOME: root, ...secrets, ...extraEnv },
    });
  }

  it('gives the command no secret of Forge, opencode or a provider, and keeps the rest', () => {
    const r = run('env; echo "pw=[${OPENCODE_SERVER_PASSWORD:-}]"', { KEEP_ME: 'yes' });
    assert.equal(r.status, 0, r.stderr);
    for (const [name, value] of Object.entries(secrets)) {
      assert.ok(!r.stdout.includes(value), `${name}'s value reached the command:\n${r.stdout}`);
      assert.doesNotMatch(r.stdout, new RegExp(`^${name}=`, 'm'));
    }
    assert.match(r.stdout, /^KEEP_ME=yes$/m);
    assert.match(r.stdout, /^pw=\[\]$/m);
    assert.match(r.stdout, new RegExp(`^PATH=${path.join(root, 'shims', 'loop-host', 'bin')}:`, 'm'));
  });

  it('the secret-name rule matches the shell\'s', () => {
    for (const name of Object.keys(secrets)) assert.ok(isSecretVariableName(name), name);
    for (const name of ['PATH', 'HOME', 'LANG', 'NODE_OPTIONS', 'KEYBOARD_LAYOUT', 'GIT_AUTHOR_NAME']) assert.ok(!isSecretVariableName(name), name);
  });

  it('refuses git push however it is spelled, to a named remote, a path or a URL', () => {
    const before = spawnSync('git', ['--git-dir', bare, 'for-each-ref'], { encoding: 'utf8' }).stdout;
    const attempts = [
      'git push origin HEAD:main',
      'git -c x.y=1 push origin HEAD:main',
      '/usr/bin/git  push origin HEAD:main',
      'command git push origin HEAD:main',
      'env GIT_TRACE=0 git push origin HEAD:main',
      `git push ${bare} HEAD:main`,
      `/usr/bin/git push file://${bare} HEAD:main`,
      `/usr/bin/git -c url.x.pushInsteadOf=y push ../remote.git HEAD:main`,
      `/usr/bin/git -c alias.p=push p origin HEAD:main`,
      `git send-pack ${bare} HEAD:refs/heads/main`,
      'git push https://127.0.0.1:9/nowhere.git HEAD:main',
      'git push git@127.0.0.1:nowhere.git HEAD:main',
    ];
    for (const attempt of attempts) {
      const r = run(attempt);
      assert.notEqual(r.status, 0, `${attempt} succeeded:\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /git push is not allowed in a Forge loop|remote-forge-push-refused/, `${attempt}: ${r.stderr}`);
    }
    assert.equal(spawnSync('git', ['--git-dir', bare, 'for-each-ref'], { encoding: 'utf8' }).stdout, before, 'the remote changed');
  });

  it('leaves the rest of git working: status, commit, log, fetch', () => {
    const r = run('git status --short && git -c user.name=a -c user.email=a@a commit -q --allow-empty -m two && git log --oneline | wc -l && git fetch -q origin');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^2$/m);
  });

  it('joins the loop\'s process cgroup before the command runs, and runs nothing when it cannot (fails closed)', async () => {
    const procs = path.join(root, 'cgroup.procs');
    writeFileSync(procs, '');
    const joined = await prepareAgentHostShell({ dir: path.join(root, 'shims', 'joined'), loopName: 'loop', cgroupProcsFiles: [procs], loopMarker: 'mark123' });
    const r = spawnSync(joined.shellPath, ['-c', 'echo "pid=$$ mark=$FORGE_LOOP_INSTANCE"'], { cwd: work, encoding: 'utf8', env: { PATH: process.env.PATH! } });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^pid=${readFileSync(procs, 'utf8').trim()} mark=mark123$`, 'm'), 'the command ran as the process written into cgroup.procs, with the loop marker');
    const closed = await prepareAgentHostShell({ dir: path.join(root, 'shims', 'closed'), loopName: 'loop', cgroupProcsFiles: [path.join(root, 'no-such-cgroup', 'cgroup.procs')] });
    const ran = path.join(root, 'ran');
    const refused = spawnSync(closed.shellPath, ['-c', `touch ${ran}`], { cwd: work, encoding: 'utf8', env: { PATH: process.env.PATH! } });
    assert.equal(refused.status, 126);
    assert.match(refused.stderr, /cannot join the loop's process cgroup .* so it was not run/);
    assert.equal(existsSync(ran), false, 'the command ran outside the cgroup');
  });

  it('keeps a user\'s own GIT_CONFIG_* entries and appends the guard after them', () => {
    const r = run('git config --get user.name; echo count=$GIT_CONFIG_COUNT', { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'user.name', GIT_CONFIG_VALUE_0: 'From The User' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^From The User$/m);
    assert.match(r.stdout, new RegExp(`^count=${Number(pushGuardEnv().GIT_CONFIG_COUNT) + 1}$`, 'm'));
  });
});
