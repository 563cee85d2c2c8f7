/**
 * The dashboard's message protocol, shared by the extension host (dashboard-panel.ts) and
 * the webview (webview/main.ts). Plain JSON data only.
 */
import type { LivePart, LivePartUpdate } from '../../core/live/live-parts';

export type { LivePart, LivePartUpdate };

export interface LoopKey {
  readonly projectId: string;
  readonly name: string;
}

export type LoopStatusView = 'starting' | 'running' | 'completed' | 'cancelled' | 'errored' | 'stalled' | 'paused' | 'setup_failed';

export interface LoopListItem {
  readonly key: LoopKey;
  readonly title: string;
  readonly status: LoopStatusView;
  readonly phase: string;
  readonly iteration: number;
  readonly openBugs: number;
  readonly openWarnings: number;
  readonly cost: number;
  readonly updatedAt: number;
}

export interface SectionView {
  readonly index: number;
  readonly title: string;
  readonly status: 'pending' | 'in_progress' | 'done';
  readonly attempts: number;
  readonly current: boolean;
}

/** One edge of the state machine; `from` null = the start, `to` null = the end (with status). */
export interface DiagramEdge {
  readonly from: string | null;
  readonly to: string | null;
  readonly count: number;
}

export interface FindingView {
  readonly id: number;
  readonly file: string;
  readonly line: number;
  readonly severity: 'bug' | 'warning';
  readonly status: 'open' | 'resolved' | 'dismissed';
  readonly description: string;
  readonly scenario: string | null;
  readonly sectionIndex: number | null;
  readonly recurrenceCount: number;
  /** GOAL / PLAN: not a file, no link. */
  readonly pseudo: boolean;
}

export interface UsageView {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
  readonly cost: number;
  readonly messages: number;
}

export interface SessionView extends UsageView {
  readonly sessionId: string;
  readonly role: string;
  readonly model: string;
  readonly updatedAt: number;
}

export interface TransitionView {
  readonly event: string;
  readonly from: string | null;
  readonly to: string | null;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  readonly status: string | null;
  readonly reason: string | null;
  readonly at: number;
}

/** One run of a verification check (the check log, issue 13). */
export interface CheckRunView {
  readonly id: number;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  /** 'section': a section's checkpoint; 'final': the loop's completion. */
  readonly gate: string;
  /** passed | failed | timed-out | not-started | refused | cancelled */
  readonly status: string;
  readonly message: string;
  readonly exitCode: number | null;
  readonly durationMs: number;
  /** The output's tail, kept for runs that did not pass ('' for passed runs: nothing to read there). */
  readonly outputTail: string;
  readonly outputBytes: number;
  readonly startedAt: number;
}

/** One verification check of the loop with its run history, newest run first. */
export interface CheckView {
  readonly checkId: string;
  readonly label: string;
  readonly kind: string;
  /** The command of a command check; null for a file assertion. */
  readonly command: string | null;
  /** The latest run's status, or null when the check never ran yet. */
  readonly latestStatus: string | null;
  readonly runs: readonly CheckRunView[];
  /** Runs left out of `runs` (only the latest are sent). */
  readonly olderRuns: number;
}

/** One auditor's plan_adjust: when, during which section's audit, why, and each section's diff. */
export interface AmendmentView {
  readonly id: number;
  readonly at: number;
  readonly auditedSection: number | null;
  readonly iteration: number | null;
  readonly rationale: string;
  readonly changes: readonly {
    readonly kind: 'revised' | 'added' | 'removed';
    readonly index: number;
    readonly title: string;
    readonly previousTitle?: string;
    readonly summary: string;
    readonly diff: readonly { readonly op: ' ' | '-' | '+'; readonly text: string }[];
  }[];
}

export interface LoopDetail {
  readonly key: LoopKey;
  readonly title: string;
  readonly kind: 'plan' | 'goal';
  readonly status: LoopStatusView;
  readonly phase: string;
  readonly iteration: number;
  readonly maxIterations: number;
  readonly sectionIndex: number | null;
  readonly terminationReason: string | null;
  readonly branch: string | null;
  readonly baseBranch: string | null;
  readonly worktreeDir: string | null;
  readonly model: string | null;
  readonly auditorModel: string | null;
  readonly sandbox: boolean;
  /** How the loop's agent commands are confined, in words: "sandboxed (bwrap): …" or "UNCONFINED (…): …". */
  readonly confinement: string;
  /** The worktree's setup in one line (issue 27; absent: the loop has none). */
  readonly setup?: string;
  readonly supervision: 'this-window' | 'elsewhere' | 'none';
  readonly createdAt: number;
  readonly endedAt: number | null;
  readonly sections: readonly SectionView[];
  /** The auditor's amendments of the plan, oldest first. */
  readonly amendments: readonly AmendmentView[];
  /** Goal text of a goal loop. */
  readonly goal: string | null;
  readonly edges: readonly DiagramEdge[];
  readonly recentTransitions: readonly TransitionView[];
  readonly findings: readonly FindingView[];
  /** The loop's verification checks (empty: it has none). */
  readonly checks: readonly CheckView[];
  /** What the shell-hang watchdog did in this loop (empty: nothing). */
  readonly shellInterventions: readonly ShellInterventionView[];
  readonly sessions: readonly SessionView[];
  readonly usageTotal: UsageView & { readonly sessions: number };
  /**
   * The cost governor (absent: no budget): the budget in words, and how full each limit is,
   * fullest first; `warning` from 80 %, `reached` at 100 % (the loop pauses at its next hand-over).
   */
  readonly budget?: { readonly text: string; readonly used: readonly { readonly limit: string; readonly percent: number }[]; readonly state: 'ok' | 'warning' | 'reached' };
  readonly usageByModel: readonly (UsageView & { readonly model: string })[];
  readonly usageByRole: readonly (UsageView & { readonly role: string })[];
  readonly completionSummary: string | null;
  readonly lastAuditSummary: string | null;
  /** What the loop waits for and what the user can do next (src/core/loop/next-steps.ts), best first. */
  readonly next: NextStepsView;
}

/** A loop's next steps as the dashboard shows them (the first screen leads with them). */
export interface NextStepsView {
  /** LoopWait: running, completed, budget_paused, max_iterations, checks_failing, stalled, interrupted, errored, cancelled. */
  readonly wait: string;
  readonly waiting: boolean;
  readonly steps: readonly { readonly id: 'review' | 'accept' | 'restart' | 'raise_budget' | 'show_checks' | 'cancel' | 'read_answers' | 'send_review'; readonly cli: string }[];
}

export interface GroupKey {
  readonly projectId: string;
  readonly id: string;
}

export type GroupAction = 'launch' | 'resume' | 'cancel';

/** One feature of a group in the dashboard's Group part. */
export interface GroupFeatureItem {
  readonly id: string;
  readonly title: string;
  /** FeatureStatus as stored, and in words. */
  readonly status: string;
  readonly statusText: string;
  readonly dependsOn: readonly string[];
  /** Its loop, once started (a click selects it). */
  readonly loop: LoopKey | null;
  readonly error: string | null;
  /** Where it stands in the merge queue into the integration branch, in words ("merged", "queued to merge"); null: not completed yet. */
  readonly mergeText: string | null;
  /** FeatureMergeState as stored (null: not in the merge queue). */
  readonly mergeState: string | null;
}

/**
 * The dashboard's Group part (issue 14 part 3, issue 16's group budget): the group of the selected
 * loop, or the group selected in the Loop Explorer. Texts are made on the host (one wording with
 * the Loop Explorer: group-budget-text.ts).
 */
export interface GroupPanelView {
  readonly key: GroupKey;
  readonly title: string;
  /** FeatureGroupStatus as stored, and in words ("paused: budget reached"). */
  readonly status: string;
  readonly statusText: string;
  /** "2/3 done". */
  readonly progressText: string;
  readonly done: number;
  readonly total: number;
  /** The merge queue: "1 of 3 merged" once a feature completed (null before). */
  readonly mergeText: string | null;
  /** "Integration branch: forge/group/<id>" (null in review: the branch is made at launch). */
  readonly integrationText: string | null;
  /** "spent $0.40 of $1.00 (40 %)". */
  readonly spendText: string;
  readonly budgetState: 'none' | 'ok' | 'warning' | 'reached';
  /** The 80 % warning or the budget pause in a sentence (null: neither). */
  readonly budgetNote: string | null;
  readonly maxConcurrent: number;
  readonly source: string;
  readonly reviewDir: string;
  readonly features: readonly GroupFeatureItem[];
  /** What the user may do with the group now. */
  readonly actions: readonly GroupAction[];
  /** The conflict radar: files two or more live loops changed, in words ("shared.txt — changed by notes, search"). */
  readonly overlaps: readonly GroupOverlapItem[];
  /** What the overlaps mean, in a sentence (null: none). */
  readonly overlapNote: string | null;
}

export interface GroupOverlapItem {
  readonly file: string;
  readonly features: readonly string[];
  readonly text: string;
}

export interface DashboardState {
  readonly loops: readonly LoopListItem[];
  readonly selected: LoopKey | null;
  readonly detail: LoopDetail | null;
  /** The Group part: the selected loop's feature group, or the selected group (null: none). */
  readonly group: GroupPanelView | null;
  /** A finding to scroll to and highlight ("Show in Dashboard"). */
  readonly focusFindingId: number | null;
  /** Shown instead of the list when there is nothing to show (no workspace, no repository). */
  readonly emptyMessage: string | null;
}

/** What the webview keeps across reloads (vscode.setState) and the serializer restores. */
export interface DashboardViewState {
  readonly selected: LoopKey | null;
  readonly selectedGroup?: GroupKey | null;
}

/** A session of the loop in the live view's session list. */
export interface LiveSessionView {
  readonly sessionId: string;
  /** A subagent's session: the session it was started from. */
  readonly parentSessionId: string | null;
  readonly phase: string;
  readonly iteration: number;
  readonly startedAt: number;
}

/** The parts of one session, replacing what the webview had for it. */
export interface LiveSnapshot {
  readonly sessionId: string;
  readonly parts: readonly LivePart[];
  /** Parts left out before these (older than the last N). */
  readonly dropped: number;
  /** `opencode`: the session read in full from the loop's opencode server; `memory`: what this window kept. */
  readonly source: 'memory' | 'opencode';
  readonly note: string | null;
}

/** One batch of live updates for the selected loop (sent at most every ~50 ms). */
export interface LiveBatch {
  readonly type: 'live';
  readonly loop: LoopKey;
  /** The loop's whole session list, when it changed (or on a reset). */
  readonly sessions?: readonly LiveSessionView[];
  /** Updates since the last batch, one per part (coalesced). */
  readonly updates: readonly LivePartUpdate[];
  /** Sent in place of what the webview kept for the loop (selection changed, or parts asked for). */
  readonly snapshot?: LiveSnapshot;
  /** The webview drops what it kept for other loops and sessions. */
  readonly reset?: boolean;
  /** Date.now() when the host posted it (the webview measures how far behind it renders). */
  readonly sentAt: number;
}

export type HostToWebview =
  | { readonly type: 'state'; readonly state: DashboardState }
  | LiveBatch
  /** Test probe: the webview answers with what it rendered. */
  | { readonly type: 'probe'; readonly requestId: number };

export interface RenderProbe {
  readonly selectedLoop: string | null;
  readonly loopCount: number;
  readonly diagramNodes: readonly string[];
  readonly diagramEdgeLabels: readonly string[];
  readonly currentNode: string | null;
  readonly findingRows: number;
  readonly findingFiles: readonly string[];
  /** Each finding row's text as shown (description, scenario), in row order. */
  readonly findingTexts: readonly string[];
  readonly sectionRows: number;
  /** Sections shown with the "amended" badge. */
  readonly amendedSections: number;
  /** Amendments shown, and their diff lines that add (+) or remove (−) text. */
  readonly amendments: number;
  readonly amendmentDiffLines: { readonly added: number; readonly removed: number };
  readonly usageRows: number;
  /** Per check shown in the Checks part: `label: latest status`. */
  readonly checks: readonly string[];
  readonly checkRunRows: number;
  /** Failed runs' output blocks rendered. */
  readonly checkOutputBlocks: number;
  /** The Group part as rendered (null: none shown). */
  readonly group: GroupProbe | null;
  readonly live: LiveProbe;
  /** The next steps shown at the top (their labels), and what the loop waits for as said. */
  readonly nextSteps: readonly string[];
  readonly waitText: string | null;
  /**
   * Where the first screen's parts are, in the webview's viewport (CSS px; null: not shown):
   * what must be visible without scrolling (issue 29 item 6).
   */
  readonly layout: {
    readonly viewport: { readonly width: number; readonly height: number };
    readonly nextSteps: ProbeRect | null;
    readonly checks: ProbeRect | null;
    /** Each check's head line. */
    readonly checkHeads: readonly ProbeRect[];
    /** Each open finding's row. */
    readonly openFindings: readonly ProbeRect[];
    readonly liveView: ProbeRect | null;
    readonly diagram: ProbeRect | null;
  };
}

export interface ProbeRect {
  readonly top: number;
  readonly bottom: number;
  readonly left: number;
  readonly right: number;
}

export interface GroupProbe {
  readonly id: string;
  readonly status: string;
  readonly progress: string;
  readonly spend: string;
  readonly budgetNote: string | null;
  /** Per feature row: `id: status`. */
  readonly features: readonly string[];
  /** Per feature row in the merge queue: `id: merge text`. */
  readonly merges: readonly string[];
  /** "1 of 3 merged" as shown (null: not shown). */
  readonly merged: string | null;
  readonly integration: string | null;
  readonly actions: readonly string[];
  /** The conflict radar's rows as rendered. */
  readonly overlaps: readonly string[];
}

export interface LiveProbe {
  /** `live`: parts shown; otherwise the reason none are (`elsewhere`: another window drives the loop). */
  readonly state: 'live' | 'elsewhere' | 'none' | 'hidden';
  readonly message: string;
  readonly follow: boolean;
  readonly shownSession: string | null;
  readonly sessions: number;
  /** Tool call rows shown: `name status`. */
  readonly toolCalls: readonly string[];
  readonly partRows: number;
  /** The user's messages (forge tell, Message the Agent) shown as such, as their rows read. */
  readonly userMessages: readonly string[];
  /** Characters of text seen in the shown session (kept or not). */
  readonly textChars: number;
  /** The shown session's parts: characters seen and updates applied per part. */
  readonly parts: readonly { readonly partId: string; readonly kind: string; readonly chars: number; readonly updates: number }[];
  /** Updates applied since the loop was selected (merged ones counted as many). */
  readonly updatesApplied: number;
  readonly batches: number;
  readonly frames: number;
  /** Host post → DOM updated, per batch: median and maximum (ms). */
  readonly lagMedianMs: number;
  readonly lagMaxMs: number;
}

export type LoopAction = 'cancel' | 'message' | 'restart' | 'forceRestart' | 'openWorktree' | 'showDiff' | 'accept' | 'review' | 'sendReview';

export type WebviewToHost =
  | { readonly type: 'ready' }
  | { readonly type: 'select'; readonly loop: LoopKey }
  | { readonly type: 'openFile'; readonly loop: LoopKey; readonly file: string; readonly line: number }
  | { readonly type: 'loopAction'; readonly loop: LoopKey; readonly action: LoopAction }
  | { readonly type: 'groupAction'; readonly group: GroupKey; readonly action: GroupAction }
  | { readonly type: 'dismissFinding'; readonly loop: LoopKey; readonly findingId: number }
  | { readonly type: 'probeResult'; readonly requestId: number; readonly probe: RenderProbe }
  /** The parts of a session: what the host kept (`full` false), or the whole session read from opencode. */
  | { readonly type: 'liveSession'; readonly loop: LoopKey; readonly sessionId: string; readonly full: boolean };

/** The phases in the order the diagram lays them out. */
export const DIAGRAM_PHASES = ['coding', 'auditing', 'final_auditing', 'final_audit_fix', 'post_action'] as const;

/** One intervention of the shell-hang watchdog: a builtin bash call that ran past its threshold. */
export interface ShellInterventionView {
  readonly id: number;
  readonly action: 'killed' | 'dry-run' | 'unresolved';
  readonly command: string;
  readonly elapsedMs: number;
  readonly thresholdMs: number;
  readonly processes: readonly { readonly pid: number; readonly command: string }[];
  readonly at: number;
}
