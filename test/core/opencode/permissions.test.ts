import assert from 'node:assert/strict';
import {
  buildLoopPermissionRuleset,
  decidePermissionReply,
  denyRulesFromOpencodePermission,
  evaluateRuleset,
  wildcardMatch,
} from '../../../src/core/opencode/permissions';
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

  it("keeps the deny rules of the user's opencode permission configuration", () => {
    assert.deepEqual(denyRulesFromOpencodePermission({ bash: { 'rm *': 'deny', 'ls *': 'allow' }, webfetch: 'deny', edit: 'ask' }), [
      { permission: 'bash', pattern: 'rm *', action: 'deny' },
      { permission: 'webfetch', pattern: '*', action: 'deny' },
    ]);
    assert.deepEqual(denyRulesFromOpencodePermission(undefined), []);
  });
});
