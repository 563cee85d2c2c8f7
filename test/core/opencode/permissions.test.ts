import assert from 'node:assert/strict';
import {
  buildLoopPermissionRuleset,
  decidePermissionReply,
  denyRulesFromOpencodePermission,
  evaluateRuleset,
  LINK_CHECKED_PERMISSIONS,
  wildcardMatch,
} from '../../../src/core/opencode/permissions';
import { realPathThroughLinks } from '../../../src/core/fs/real-path';
import fs from 'node:fs';
import os from 'node:os';
import nodePath from 'node:path';
import type { PermissionRequest } from '../../../src/core/opencode/agent-client';

const WT = '/data/worktrees/demo';
const ask = (permission: string, patterns: string[]): PermissionRequest => ({ id: 'per_1', sessionId: 's', permission, patterns, metadata: {} });

describe('loop permissions', () => {
  it("matches opencode's wildcards", () => {
    assert.ok(wildcardMatch('git push origin main', 'git push *'));
    assert.ok(!wildcardMatch('git pushx', 'git push *'));
    assert.ok(wildcardMatch('forge_plan_write', 'forge_*'));
    assert.ok(wildcardMatch('a.b', 'a?b'));
    assert.ok(!wildcardMatch('ab', 'a.b'));
  });

  it('allows the worktree, denies leaving it, and puts structural denies last', () => {
    const rules = buildLoopPermissionRuleset({ role: 'code', worktreeDir: WT, userDenyRules: [{ permission: 'bash', pattern: 'rm *', action: 'deny' }] });
    assert.deepEqual(rules[0], { permission: '*', pattern: '*', action: 'allow' });
    assert.equal(evaluateRuleset(rules, 'edit', 'src/a.ts'), 'allow');
    assert.equal(evaluateRuleset(rules, 'bash', 'npm test'), 'allow');
    assert.equal(evaluateRuleset(rules, 'external_directory', '/etc/*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'external_directory', `${WT}/*`), 'allow');
    assert.equal(evaluateRuleset(rules, 'bash', 'git push origin main'), 'deny');
    assert.equal(evaluateRuleset(rules, 'bash', 'git push'), 'deny');
    assert.equal(evaluateRuleset(rules, 'bash', 'rm -rf build'), 'deny');
    assert.equal(evaluateRuleset(rules, 'question', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'doom_loop', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'forge_loop_handoff', '*'), 'allow');
    assert.equal(evaluateRuleset(rules, 'forge_review_write', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'forge_plan_write', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'forge_loop_cancel', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'edit', 'x'), 'allow', 'coders edit');
    const userIndex = rules.findIndex((r) => r.pattern === 'rm *');
    const structuralIndex = rules.findIndex((r) => r.pattern === 'git push');
    assert.ok(userIndex > 0 && userIndex < structuralIndex);
  });

  it('never lets a user rule lift a structural deny', () => {
    const rules = buildLoopPermissionRuleset({
      role: 'code',
      worktreeDir: WT,
      userDenyRules: [
        { permission: 'bash', pattern: 'git push *', action: 'allow' },
        { permission: 'question', pattern: '*', action: 'ask' },
      ],
    });
    assert.equal(evaluateRuleset(rules, 'bash', 'git push origin'), 'deny');
    assert.equal(evaluateRuleset(rules, 'question', '*'), 'deny');
    assert.ok(!rules.some((r) => r.action === 'allow' && r.permission === 'bash'));
  });

  it('gives auditors no way to edit: no edit/write tools, only read-only subagents, review tools allowed', () => {
    const rules = buildLoopPermissionRuleset({ role: 'auditor', worktreeDir: WT });
    for (const permission of ['edit', 'write', 'patch', 'multiedit']) assert.equal(evaluateRuleset(rules, permission, 'src/a.ts'), 'deny', permission);
    assert.equal(evaluateRuleset(rules, 'task', 'general'), 'deny');
    assert.equal(evaluateRuleset(rules, 'task', 'explore'), 'allow');
    assert.equal(evaluateRuleset(rules, 'forge_review_write', '*'), 'allow');
    assert.equal(evaluateRuleset(rules, 'forge_plan_adjust', '*'), 'allow');
    assert.equal(evaluateRuleset(rules, 'forge_plan_edit', '*'), 'deny');
    assert.equal(evaluateRuleset(rules, 'bash', 'npm test'), 'allow');
  });

  it('answers requests that still arrive: reject outside the worktree or structurally denied, else once', () => {
    const code = { role: 'code' as const, worktreeDir: WT, opencodeDirectories: ['/home/u/.local/share/opencode/tool-output'] };
    assert.equal(decidePermissionReply(ask('external_directory', ['/etc/*']), code).reply, 'reject');
    assert.match(decidePermissionReply(ask('external_directory', ['/etc/*']), code).reason, /only inside the worktree/);
    assert.equal(decidePermissionReply(ask('external_directory', [`${WT}/src/*`]), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('external_directory', ['/home/u/.local/share/opencode/tool-output/x']), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('read', ['../../secret.env']), code).reply, 'reject');
    assert.equal(decidePermissionReply(ask('read', ['.env']), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('doom_loop', ['*']), code).reply, 'reject');
    assert.equal(decidePermissionReply(ask('bash', ['git push origin main']), code).reply, 'reject');
    assert.equal(decidePermissionReply(ask('bash', ['npm test']), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('edit', ['src/a.ts']), { ...code, role: 'auditor' }).reply, 'reject');
    assert.equal(
      decidePermissionReply(ask('bash', ['rm -rf /']), { ...code, userDenyRules: [{ permission: 'bash', pattern: 'rm *', action: 'deny' }] }).reply,
      'reject',
    );
  });

  it('refuses every file write into a .git entry, at the top or below, and allows reading it (issue 26)', () => {
    const code = { role: 'code' as const, worktreeDir: WT };
    for (const p of ['.git', `${WT}/.git`, 'sub/.git/config', `${WT}/a/.git/hooks/pre-commit`]) {
      for (const permission of ['edit', 'write']) {
        const d = decidePermissionReply(ask(permission, [p]), code);
        assert.equal(d.reply, 'reject', `${permission} ${p}`);
        assert.match(d.reason, /\.git file or folder/);
      }
    }
    assert.equal(decidePermissionReply(ask('write', ['.gitignore']), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('write', ['src/my.git/x']), code).reply, 'once');
    assert.equal(decidePermissionReply(ask('read', ['.git']), code).reply, 'once');
  });

  it("keeps the deny rules of the user's opencode permission configuration", () => {
    assert.deepEqual(denyRulesFromOpencodePermission({ bash: { 'rm *': 'deny', 'ls *': 'allow' }, webfetch: 'deny', edit: 'ask' }), [
      { permission: 'bash', pattern: 'rm *', action: 'deny' },
      { permission: 'webfetch', pattern: '*', action: 'deny' },
    ]);
    assert.deepEqual(denyRulesFromOpencodePermission(undefined), []);
  });
});

describe('file tools through symbolic links (real files)', () => {
  let root: string;
  let wt: string;
  let outside: string;
  before(() => {
    root = fs.mkdtempSync(nodePath.join(os.tmpdir(), 'forge-links-'));
    wt = nodePath.join(root, 'wt');
    outside = nodePath.join(root, 'outside');
    fs.mkdirSync(nodePath.join(wt, 'src'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(nodePath.join(outside, 'secret.txt'), 'secret');
    fs.symlinkSync(outside, nodePath.join(wt, 'escape-dir'));
    fs.symlinkSync(nodePath.join(outside, 'secret.txt'), nodePath.join(wt, 'secret-link'));
    fs.symlinkSync(nodePath.join(outside, 'not-yet.txt'), nodePath.join(wt, 'dangling'));
    fs.symlinkSync('src', nodePath.join(wt, 'inner-link'));
    fs.symlinkSync('loop-b', nodePath.join(wt, 'loop-a'));
    fs.symlinkSync('loop-a', nodePath.join(wt, 'loop-b'));
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const options = () => ({ role: 'code' as const, worktreeDir: wt, realPath: realPathThroughLinks });
  const decide = (permission: string, pattern: string) => decidePermissionReply(ask(permission, [pattern]), options());

  it('the ruleset sends file tools to Forge (ask) only when it can follow links', () => {
    const withLinks = buildLoopPermissionRuleset(options());
    for (const p of LINK_CHECKED_PERMISSIONS) assert.equal(evaluateRuleset(withLinks, p, 'src/a.ts'), 'ask', p);
    assert.equal(evaluateRuleset(withLinks, 'bash', 'ls'), 'allow');
    const without = buildLoopPermissionRuleset({ role: 'code', worktreeDir: wt });
    assert.equal(evaluateRuleset(without, 'read', 'src/a.ts'), 'allow');
  });

  it('refuses a path whose link leads outside the worktree, for reads and writes, existing or not', () => {
    for (const [permission, pattern] of [
      ['edit', 'escape-dir/new.txt'],
      ['write', `${wt}/escape-dir/secret.txt`],
      ['read', 'secret-link'],
      ['edit', 'dangling'],
      ['list', 'escape-dir'],
    ] as const) {
      const d = decide(permission, pattern);
      assert.equal(d.reply, 'reject', `${permission} ${pattern}`);
      assert.match(d.reason, /symbolic link leads outside/);
    }
  });

  it('allows paths inside, links that stay inside, and new files in real folders', () => {
    for (const [permission, pattern] of [
      ['edit', 'src/new.ts'],
      ['read', 'inner-link/a.ts'],
      ['write', 'brand/new/folder/file.txt'],
      ['read', 'loop-a'],
    ] as const) {
      assert.equal(decide(permission, pattern).reply, 'once', `${permission} ${pattern}`);
    }
  });

  it("refuses file tools while Forge's file tool guard is not active in the session's opencode", () => {
    let active = false;
    const guarded = { ...options(), fileGuardActive: () => active };
    const d = decidePermissionReply(ask('read', ['src/a.ts']), guarded);
    assert.equal(d.reply, 'reject');
    assert.match(d.reason, /file tool guard is not active/);
    assert.equal(decidePermissionReply(ask('bash', ['ls']), guarded).reply, 'once', 'other tools are not concerned');
    active = true;
    assert.equal(decidePermissionReply(ask('read', ['src/a.ts']), guarded).reply, 'once');
  });
});
