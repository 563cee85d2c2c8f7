// The pure builders behind the Loop Explorer, the diagnostics, the status bar and the
// execution flow, checked against the engine's own definitions.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { FINDING_PSEUDO_PATHS } from '../../../src/core/loop/tool-backend';
import type { ProviderCatalog } from '../../../src/core/opencode/agent-client';
import { modelPickItems, modelVariants, runExecutionFlow, variantPickItems, type ExecutionFlowDeps, type ExecutionMemory } from '../../../src/vscode/execution-flow';
import {
  buildLoopDiagnostics,
  findingDocumentPath,
  findingDocumentText,
  findingIdFromCode,
  parseFindingDocumentPath,
  type DiagnosticFinding,
} from '../../../src/vscode/findings-diagnostics-model';
import { buildLoopDetails, buildLoopTooltip, buildLoopTree, buildSectionNodes, LOOP_CONTEXT, PSEUDO_FINDING_PATHS, type LoopSummary } from '../../../src/vscode/loop-tree-model';
import { loopsItemView, sandboxItemView } from '../../../src/vscode/status-bar';
import { toTreeItem } from '../../../src/vscode/loop-explorer';
import { chatStatusAnswer, escapeMarkdown } from '../../../src/vscode/chat/chat-status';
import { createForgeLog, type LogSink } from '../../../src/vscode/log';
import { createNotifier } from '../../../src/vscode/notifier';

function summary(name: string, status: LoopSummary['loop']['status'], extra: Partial<LoopSummary> & { updatedAt?: number } = {}): LoopSummary {
  return {
    loop: {
      projectId: 'p',
      name,
      status,
      phase: 'auditing',
      kind: 'plan',
      iteration: 3,
      maxIterations: 15,
      sectionIndex: 1,
      worktreeDir: `/data/worktrees/${name}`,
      branch: `forge/${name}`,
      terminationReason: status === 'running' ? null : status === 'completed' ? 'completed' : 'stall_timeout',
      model: 'mock/fake-1',
      auditorModel: null,
      sandbox: false,
      supervisorId: status === 'running' ? 'x' : null,
      leaseExpiresAt: null,
      updatedAt: extra.updatedAt ?? 1000,
      endedAt: status === 'running' ? null : (extra.updatedAt ?? 1000),
      state: { loopState: { sectionCount: 4 } },
    },
    openFindings: { bug: 2, warning: 1 },
    usage: { sessions: 5, cost: 0.25, inputTokens: 12_345, outputTokens: 678 },
    pseudoFindings: [],
    supervisedHere: true,
    ...extra,
  };
}

const finding = (over: Partial<DiagnosticFinding>): DiagnosticFinding => ({
  id: 1,
  projectId: 'p',
  loopName: 'l',
  file: 'src/a.ts',
  line: 3,
  severity: 'bug',
  description: 'It breaks.',
  scenario: null,
  status: 'open',
  recurrenceCount: 1,
  sectionIndex: null,
  ...over,
});

describe('Loop Explorer model', () => {
  it('groups running loops before recent ones, newest first, with menu context values and status icons', () => {
    const groups = buildLoopTree([summary('old', 'completed', { updatedAt: 1 }), summary('live', 'running'), summary('new', 'stalled', { updatedAt: 5000 })]);
    assert.deepEqual(groups.map((g) => g.label), ['Running', 'Recent']);
    assert.deepEqual(groups[1]!.loops.map((l) => l.name), ['new', 'old']);
    assert.equal(groups[0]!.loops[0]!.contextValue, LOOP_CONTEXT.running);
    assert.equal(groups[1]!.loops[0]!.contextValue, LOOP_CONTEXT.restartable);
    assert.equal(groups[1]!.loops[1]!.contextValue, LOOP_CONTEXT.completed);
    assert.equal(groups[0]!.loops[0]!.icon?.id, 'sync~spin');
    assert.equal(groups[1]!.loops[0]!.icon?.id, 'watch');
  });

  it('describes a running loop with phase, iteration, section N/M, open findings and cost', () => {
    const [running] = buildLoopTree([summary('live', 'running')]);
    assert.equal(running!.loops[0]!.description, 'auditing · iter 3 · §2/4 · 2 bugs, 1 warning · $0.2500');
    const details = buildLoopDetails(running!.loops[0]!).map((d) => `${d.label}=${d.description}`);
    for (const expected of ['Phase=auditing', 'Iteration=3/15', 'Section=2/4', 'Sections=4', 'Open findings=2 bugs, 1 warning', 'Sessions=5', 'Usage=12.3k in · 678 out · $0.2500']) {
      assert.ok(details.includes(expected), `${expected} in ${details.join(' | ')}`);
    }
  });

  it('lists a loop\'s sections under Sections, expandable, with an "amended" badge and the rationales', () => {
    const loopNode = buildLoopTree([summary('live', 'running')])[0]!.loops[0]!;
    const sectionsDetail = buildLoopDetails(loopNode).find((d) => d.label === 'Sections')!;
    assert.deepEqual(sectionsDetail.sectionsOf, { projectId: loopNode.summary.loop.projectId, name: 'live' });
    const nodes = buildSectionNodes(
      sectionsDetail.id,
      [
        { index: 0, title: 'Setup', status: 'done' },
        { index: 1, title: 'Tests', status: 'in_progress' },
        { index: 2, title: 'Docs', status: 'pending' },
      ],
      new Map([
        [1, ['the tests need a fixture']],
        [2, ['docs first', 'docs renamed']],
      ]),
    );
    assert.deepEqual(nodes.map((n) => `${n.label}=${n.description}`), ['1. Setup=done', '2. Tests=in progress · amended', '3. Docs=pending · amended ×2']);
    assert.match(nodes[1]!.tooltip!, /Amended by the auditor:\n- the tests need a fixture/);
    assert.equal(nodes[0]!.contextValue, undefined);
    assert.equal(nodes[1]!.contextValue, 'forge.section.amended');
    assert.ok(new Set(nodes.map((n) => n.id)).size === 3 && nodes.every((n) => n.id.startsWith(`${sectionsDetail.id}/`)));
    // A goal loop (no sections) has no Sections detail.
    const goal = buildLoopTree([summary('g', 'running', { loop: { ...loopNode.summary.loop, name: 'g', state: {} } })])[0]!.loops[0]!;
    assert.equal(buildLoopDetails(goal).find((d) => d.label === 'Sections'), undefined);
  });

  it('shows GOAL / PLAN findings on the loop item itself', () => {
    const node = buildLoopTree([summary('g', 'running', { pseudoFindings: [{ id: 9, file: 'PLAN', severity: 'warning', description: 'Section 2 contradicts the objective.' }] })])[0]!.loops[0]!;
    assert.match(node.description ?? '', /⚑ PLAN/);
    assert.match(buildLoopTooltip(node.summary), /warning on PLAN: Section 2 contradicts the objective\./);
    assert.ok(buildLoopDetails(node).some((d) => d.label === 'PLAN' && d.description === 'Section 2 contradicts the objective.'));
  });

  it('knows the same pseudo-paths as the engine', () => {
    assert.deepEqual([...PSEUDO_FINDING_PATHS], [...FINDING_PSEUDO_PATHS]);
  });
});

describe('findings diagnostics model', () => {
  it('maps open findings to 0-based lines under the worktree, bug → error, warning → warning', () => {
    const { byFile, pseudo } = buildLoopDiagnostics('/wt/loop', [
      finding({ id: 1, line: 3 }),
      finding({ id: 2, line: 0, severity: 'warning', scenario: 'run it twice' }),
      finding({ id: 3, file: 'GOAL' }),
      finding({ id: 4, status: 'resolved' }),
      finding({ id: 5, status: 'dismissed' }),
      finding({ id: 6, file: '../outside.ts' }),
    ]);
    assert.deepEqual([...byFile.keys()], ['/wt/loop/src/a.ts']);
    const specs = byFile.get('/wt/loop/src/a.ts')!;
    assert.deepEqual(specs.map((s) => [s.findingId, s.line, s.severity, s.scenario]), [
      [1, 2, 'error', null],
      [2, 0, 'warning', 'run it twice'],
    ]);
    assert.deepEqual(pseudo.map((f) => f.id), [3]);
    assert.equal(findingIdFromCode(specs[0]!.code), 1);
    assert.equal(findingIdFromCode({ value: specs[1]!.code }), 2);
    assert.equal(findingIdFromCode('something else'), undefined);
  });

  it('names each finding\'s document by project and id, and reads the name back', () => {
    assert.equal(findingDocumentPath('0123abcd', 42), '/0123abcd/finding-42.md');
    assert.deepEqual(parseFindingDocumentPath('/0123abcd/finding-42.md'), { projectId: '0123abcd', findingId: 42 });
    for (const bad of ['/0123abcd/finding-0.md', '/finding-4.md', '/a/b/finding-4.md', '/a/finding-x.md', '/a/finding-4.txt', '/a/finding-99999999999999999999.md']) {
      assert.equal(parseFindingDocumentPath(bad), undefined, bad);
    }
  });

  it('shows a finding in full: severity, loop and section, place, status, recurrences, description, scenario', () => {
    const text = findingDocumentText({ ...finding({ id: 7, line: 12, scenario: 'call it twice' }), recurrenceCount: 3, sectionIndex: 1, description: 'Leaks the handle.' });
    assert.equal(
      text,
      ['# Finding 7: bug', '', '- Loop: l, section 2', '- Where: src/a.ts:12', '- Status: open', '- Reported 3 times by the auditor', '', '## Description', '', 'Leaks the handle.', '', '## Scenario', '', 'call it twice', ''].join('\n'),
    );
    const plain = findingDocumentText({ ...finding({ id: 8, line: 0, file: 'GOAL', severity: 'warning' }), sectionIndex: null });
    assert.match(plain, /^# Finding 8: warning\n\n- Loop: l\n- Where: GOAL\n- Status: open\n\n## Description/);
    assert.doesNotMatch(plain, /Scenario|Reported/);
  });
});

describe('model text is inert on every VS Code surface', () => {
  // Clear screen, window title, NUL, 8-bit CSI, a right-to-left override and a lone CR.
  const hostile = 'Leaks \u001b[2J\u001b]0;pwned\u0007 NUL\u0000 \u009b31m \u202eexe.ts\rFAKE';
  const shown = 'Leaks \\u001b[2J\\u001b]0;pwned\\u0007 NUL\\u0000 \\u009b31m \\u202eexe.ts\\u000dFAKE';
  const active = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

  it('diagnostics, the finding document, Loop Explorer items, chat, the log and notifications show escapes, never the sequences', () => {
    const { byFile } = buildLoopDiagnostics('/wt/loop', [finding({ id: 1, description: hostile, scenario: hostile })]);
    const spec = byFile.get('/wt/loop/src/a.ts')![0]!;
    assert.ok(spec.message.startsWith(shown) && spec.scenario === shown, spec.message);
    const document = findingDocumentText({ ...finding({ id: 1, description: hostile, scenario: hostile }), recurrenceCount: 1, sectionIndex: null });
    assert.doesNotMatch(document, active);
    assert.ok(document.includes(`\n${shown}\n`));

    const node = buildLoopTree([summary('g', 'running', { pseudoFindings: [{ id: 9, file: 'PLAN', severity: 'warning', description: hostile }] })])[0]!.loops[0]!;
    const items = [toTreeItem(node), ...buildLoopDetails(node).map(toTreeItem)];
    for (const item of items) {
      for (const text of [item.label, item.description, item.tooltip]) assert.doesNotMatch(String(text ?? ''), active, String(text));
    }
    const planItem = items.find((i) => i.label === 'PLAN')!;
    assert.equal(planItem.description, shown);

    assert.equal(escapeMarkdown('a\u001b[2J'), 'a\\\\u001b\\[2J');

    const lines: string[] = [];
    const sink: LogSink = { trace: (m) => lines.push(m), debug: (m) => lines.push(m), info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(String(m)) };
    const log = createForgeLog(sink, 'test');
    log.info(hostile);
    log.error(new Error(hostile));
    const notifier = createNotifier(log, () => {});
    void notifier.warn(`Forge: ${hostile}`);
    assert.equal(notifier.recent()[0]!.message, `Forge: ${shown}`);
    assert.equal(lines[0], `[test] ${shown}`);
    for (const line of lines) assert.doesNotMatch(line, active, line);
  });
});

describe('status bar and execution flow views', () => {
  it('says plainly when new loops would run unconfined, and why', () => {
    const none = sandboxItemView(true, { available: false, driver: null, reason: 'docker: not installed; bwrap: not installed' });
    assert.equal(none.disabled, true);
    assert.equal(none.warning, true);
    assert.match(none.text, /New loops: unconfined \(sandbox unavailable\)/);
    assert.match(none.tooltip, /run UNCONFINED: Forge cannot sandbox loops on this machine: docker: not installed; bwrap: not installed/);
    const off = sandboxItemView(false, { available: true, driver: 'bwrap', reason: null });
    assert.equal(off.warning, true);
    assert.match(off.text, /New loops: unconfined \(sandbox off\)/);
    assert.match(off.tooltip, /run UNCONFINED: the sandbox is turned off/);
    const on = sandboxItemView(true, { available: true, driver: 'bwrap', reason: null });
    assert.equal(on.text, '$(vm) New loops: sandboxed (bwrap)');
    assert.equal(on.warning, false);
    // The setting speaks of new loops; a loop running unconfined now is named beside it, as a warning (issue 29 item 6).
    const beside = sandboxItemView(true, { available: true, driver: 'bwrap', reason: null }, ['fix-parser']);
    assert.equal(beside.text, '$(vm) New loops: sandboxed (bwrap) · 1 running UNCONFINED');
    assert.equal(beside.warning, true);
    assert.match(beside.tooltip, /Running now UNCONFINED \(each loop keeps the confinement it started with\): fix-parser\./);
    assert.doesNotMatch(beside.text, /Sandbox: on/);
  });

  it('@forge /status names a waiting loop\'s next steps with their CLI lines, and offers them as buttons', () => {
    const answer = chatStatusAnswer([summary('live', 'running'), summary('done', 'completed'), summary('idle', 'stalled')]);
    const lines = answer.markdown.split('\n');
    assert.match(lines.find((l) => l.includes('**done**'))!, /\*\*next:\*\* Review \(`git diff \.\.\.forge\/done`\), Accept \(`forge accept done`\)$/);
    assert.match(lines.find((l) => l.includes('**idle**'))!, /\*\*next:\*\* Restart \(`forge restart idle`\), Review \(`git diff \.\.\.forge\/idle`\)$/);
    assert.doesNotMatch(lines.find((l) => l.includes('**live**'))!, /next:/);
    const titles = answer.buttons.map((b) => `${b.command} ${b.title}`);
    assert.ok(titles.includes('forge.acceptLoop Accept: done'), titles.join(' | '));
    assert.ok(titles.includes('forge.restartLoop Restart: idle'), titles.join(' | '));
  });

  it('counts the loops waiting for the user beside the running ones (issue 29 item 7)', () => {
    assert.deepEqual(loopsItemView(0, []), { text: '', tooltip: 'Show the Loop Explorer', visible: false });
    assert.equal(loopsItemView(1, []).text, '$(sync~spin) Forge: 1 loop running');
    const both = loopsItemView(2, ['a', 'b']);
    assert.equal(both.text, '$(sync~spin) Forge: 2 loops running · $(bell-dot) 2 waiting');
    assert.match(both.tooltip, /Loops waiting for you: a, b\./);
    assert.equal(loopsItemView(0, ['a']).text, '$(bell-dot) Forge: 1 waiting');
  });

  it('marks in the Loop Explorer the loops that wait for the user, with what they wait for and the next steps', () => {
    const [, recent] = buildLoopTree([
      summary('live', 'running'),
      summary('done', 'completed', { loop: { ...summary('x', 'completed').loop, name: 'done', terminationReason: 'completed', branch: 'forge/done' } }),
      summary('gone', 'cancelled', { loop: { ...summary('x', 'cancelled').loop, name: 'gone', terminationReason: 'user_aborted', branch: 'forge/gone' } }),
      summary('accepted', 'completed', { loop: { ...summary('x', 'completed').loop, name: 'accepted', terminationReason: 'completed', branch: 'forge/accepted', endedAt: 1000 }, acceptedAt: 2000 }),
    ]);
    const byName = new Map(recent!.loops.map((l) => [l.name, l]));
    assert.match(byName.get('done')!.description ?? '', /^completed · ● waits for you: Review, Accept · iter 3/);
    assert.match(buildLoopTooltip(byName.get('done')!.summary), /Waits for you: completed: review and accept\. Next: Review, Accept/);
    assert.doesNotMatch(byName.get('gone')!.description ?? '', /waits for you/, 'the user cancelled it');
    assert.doesNotMatch(byName.get('accepted')!.description ?? '', /waits for you/, 'accepted after it ended');
  });

  it('lists recently used models first, then each provider\'s models', () => {
    const items = modelPickItems(
      {
        providers: [
          { id: 'a', name: 'Provider A', models: [{ providerId: 'a', modelId: 'm1', name: 'M1', toolCall: true, reasoning: false, contextLimit: 1, outputLimit: 1, variants: [] }, { providerId: 'a', modelId: 'm2', name: 'M2', toolCall: true, reasoning: false, contextLimit: 1, outputLimit: 1, variants: [] }] },
        ],
        defaults: { a: 'm1' },
      },
      ['a/m2', 'gone/model'],
      'Default',
    );
    const labels = items.filter((i) => i.kind !== vscode.QuickPickItemKind.Separator).map((i) => i.model);
    assert.deepEqual(labels, [null, 'a/m2', 'a/m1']);
  });

  const variantCatalog: ProviderCatalog = {
    providers: [
      {
        id: 'a',
        name: 'Provider A',
        models: [
          { providerId: 'a', modelId: 'm1', name: 'M1', toolCall: true, reasoning: true, contextLimit: 1, outputLimit: 1, variants: ['low', 'medium', 'high'] },
          { providerId: 'a', modelId: 'm2', name: 'M2', toolCall: true, reasoning: false, contextLimit: 1, outputLimit: 1, variants: [] },
        ],
      },
    ],
    defaults: { a: 'm1' },
  };
  const flowDeps = (last: ReturnType<ExecutionMemory['last']>, over: Partial<ExecutionFlowDeps> = {}): ExecutionFlowDeps => ({
    kind: 'plan',
    interactive: false,
    given: {},
    defaults: { model: null, auditorModel: null, maxIterations: 15, sandbox: false },
    memory: { last: () => last, recentModels: () => [], remember: async () => {} },
    catalog: async () => variantCatalog,
    sandboxAvailability: async () => ({ available: false, reason: 'none here' }),
    ...over,
  });

  it("offers the chosen model's variants: the last chosen one first, then the default", () => {
    assert.deepEqual(modelVariants(variantCatalog, 'a/m1'), ['low', 'medium', 'high']);
    assert.deepEqual(modelVariants(variantCatalog, 'a/m2'), []);
    assert.deepEqual(modelVariants(variantCatalog, 'gone/model'), []);
    assert.deepEqual(modelVariants(undefined, 'a/m1'), []);
    assert.deepEqual(variantPickItems('a/m1', ['low', 'medium', 'high'], 'high').map((i) => i.variant), ['high', null, 'low', 'medium']);
    assert.deepEqual(variantPickItems('a/m1', ['low', 'medium', 'high'], null).map((i) => i.variant), [null, 'low', 'medium', 'high']);
    assert.deepEqual(variantPickItems('a/m1', ['low', 'high'], 'gone').map((i) => i.variant), [null, 'low', 'high']);
  });

  it('remembers the last variant for the model it was chosen for only', async () => {
    const last = { mode: 'loop' as const, model: 'a/m1', auditorModel: null, variant: 'high', maxIterations: 3, sandbox: false };
    assert.equal((await runExecutionFlow(flowDeps(last)))!.variant, 'high');
    assert.equal((await runExecutionFlow(flowDeps(last, { given: { model: 'a/m2' } })))!.variant, null);
    assert.equal((await runExecutionFlow(flowDeps(last, { given: { variant: 'low' } })))!.variant, 'low');
    assert.equal((await runExecutionFlow(flowDeps(last, { given: { variant: null } })))!.variant, null);
    assert.equal((await runExecutionFlow(flowDeps(last, { given: { mode: 'session' } })))!.variant, null);
  });

  it('asks for the variant in the quick-pick flow, the last one first', async () => {
    const last = { mode: 'loop' as const, model: 'a/m1', auditorModel: null, variant: 'medium', maxIterations: 3, sandbox: false };
    let done = false;
    const flow = runExecutionFlow(flowDeps(last, { interactive: true, given: { mode: 'loop', model: 'a/m1', auditorModel: null, maxIterations: 2, sandbox: false } })).finally(() => {
      done = true;
    });
    // The variant step is the only one asked. Accept its active (first) item as soon as it shows:
    // until then accepting does nothing.
    for (let i = 0; !done && i < 600; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    }
    const choices = await flow;
    assert.equal(choices?.variant, 'medium');
    assert.equal(choices?.model, 'a/m1');
  });

  it('asks for the budget with the estimate for the chosen models beside it; the current budget is the default', async () => {
    const asked: Array<[string | null, string | null]> = [];
    let done = false;
    const flow = runExecutionFlow(
      flowDeps({}, {
        interactive: true,
        given: { mode: 'loop', model: 'a/m2', auditorModel: 'a/m1', variant: null, maxIterations: 2, sandbox: false },
        budget: { current: 5, estimate: async (model, auditorModel) => (asked.push([model, auditorModel]), 'estimate (not a quote): ~$1.00') },
      }),
    ).finally(() => {
      done = true;
    });
    // The budget box is the only step asked: accept its value (the current budget) once it shows.
    for (let i = 0; !done && i < 600; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    }
    const choices = await flow;
    assert.equal(choices?.budget, 5);
    assert.deepEqual(asked, [['a/m2', 'a/m1']], 'the estimate is made for the models chosen in the steps before');
    // Without a budget step (no deps.budget), the settings decide: no budget in the choices.
    const none = await runExecutionFlow(flowDeps({}, { given: { mode: 'loop', model: 'a/m2' } }));
    assert.equal(none?.budget, undefined);
  });

  it('skips the variant step for a model without variants', async () => {
    const choices = await runExecutionFlow(flowDeps({}, { interactive: true, given: { mode: 'loop', model: 'a/m2', auditorModel: null, maxIterations: 2, sandbox: false } }));
    assert.equal(choices?.variant, null);
  });
});
