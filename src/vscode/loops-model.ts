import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import type { LoopRuntimeEvent } from '../core/loop/runtime-types';
import type { ForgeLog } from './log';
import type { FeatureGroupService, FeatureGroupView, GroupEvent, GroupRef } from '../core/groups/group-types';
import { buildExplorerRoot } from './group-tree-model';
import { checkCountOf, isLoopLevelFindingPath, summariseLoopChecks, LOOP_LEVEL_FINDING_PATHS, type LoopRootNode, type LoopSummary } from './loop-tree-model';
import type { WorkspaceProject, WorkspaceProjects } from './projects';

export const loopKey = (ref: { projectId: string; name: string }): string => `${ref.projectId}/${ref.name}`;
export const groupKey = (ref: GroupRef): string => `${ref.projectId}/${ref.id}`;

/** The engine's feature-group service (the surfaces never reach into its scheduler or storage). */
export function groupServiceOf(engine: ForgeEngine): FeatureGroupService | undefined {
  // Optional: an engine built without groups (tests' stand-ins) shows none.
  return (engine as Partial<Pick<ForgeEngine, 'groups'>>).groups;
}

/** Reads every loop of `projects` with its aggregates: a few queries per project, none per loop. */
export function readLoopSummaries(engine: ForgeEngine, projects: readonly WorkspaceProject[]): LoopSummary[] {
  const { repos, runtime } = engine;
  const out: LoopSummary[] = [];
  for (const { projectId } of projects) {
    const counts = new Map(repos.reviewFindings.countOpenByLoop(projectId).map((c) => [c.loopName, c]));
    const usage = new Map(repos.sessionUsage.totalsByLoop(projectId).map((u) => [u.loopName, u]));
    const accepted = new Map(repos.accepts.lastAcceptedByLoop(projectId).map((a) => [a.loopName, a.at]));
    const pseudo = new Map<string, LoopSummary['pseudoFindings'][number][]>();
    for (const file of LOOP_LEVEL_FINDING_PATHS) {
      for (const f of repos.reviewFindings.listByFile(projectId, file, { status: 'open' })) {
        if (!isLoopLevelFindingPath(f.file)) continue;
        const list = pseudo.get(f.loopName) ?? [];
        list.push({ id: f.id, file: f.file, severity: f.severity, description: f.description });
        pseudo.set(f.loopName, list);
      }
    }
    for (const loop of repos.loops.list(projectId)) {
      const c = counts.get(loop.name);
      const u = usage.get(loop.name);
      // One query per loop that has checks: loops started without any (most) cost nothing.
      const checkCount = checkCountOf(loop);
      const checks = checkCount > 0 ? summariseLoopChecks(checkCount, repos.checkRuns.latestByCheck(projectId, loop.name)) : undefined;
      out.push({
        loop,
        openFindings: { bug: c?.bug ?? 0, warning: c?.warning ?? 0 },
        usage: u ? { sessions: u.sessions, cost: u.cost, inputTokens: u.inputTokens, outputTokens: u.outputTokens } : undefined,
        pseudoFindings: pseudo.get(loop.name) ?? [],
        supervisedHere: runtime.isSupervising({ projectId, name: loop.name }),
        ...(checks ? { checks } : {}),
        ...(accepted.has(loop.name) ? { acceptedAt: accepted.get(loop.name)! } : {}),
      });
    }
  }
  return out;
}

/**
 * The live picture of this workspace's loops, shared by the Loop Explorer, the status bar,
 * the diagnostics and the dashboard. Refreshed by events only: the runtime's events and
 * the store's change notifications (which also fire for other windows' writes).
 */
export interface LoopsModel {
  readonly onDidChange: vscode.Event<void>;
  /** Every runtime event of this window's engine (for per-event reactions such as opening a worktree). */
  readonly onRuntimeEvent: vscode.Event<LoopRuntimeEvent>;
  /** Makes sure the engine exists and the model follows it (first use of a view). */
  start(): Promise<void>;
  isStarted(): boolean;
  summaries(): readonly LoopSummary[];
  /** The feature groups of the workspace's projects, as last read. */
  groups(): readonly FeatureGroupView[];
  findGroup(ref: GroupRef): FeatureGroupView | undefined;
  /** Every event of this window's feature-group service (notifications react to them). */
  readonly onGroupEvent: vscode.Event<GroupEvent>;
  tree(): readonly LoopRootNode[];
  projects(): readonly WorkspaceProject[];
  find(ref: { projectId: string; name: string }): LoopSummary | undefined;
  /** Re-reads soon (coalesced). */
  refresh(): void;
  /** Re-reads now. */
  refreshNow(): Promise<void>;
}

export interface LoopsModelDeps {
  engine: { get(): Promise<ForgeEngine>; peek(): ForgeEngine | undefined; onDidStart: vscode.Event<ForgeEngine> };
  projects: WorkspaceProjects;
  log: ForgeLog;
  onError: (what: string, error: unknown) => void;
}

const COALESCE_MS = 50;
/** The conflict radar of a group another process drives: how often it is read while one of its loops runs. */
export const RADAR_RUNNING_MS = 3_000;
/** …and while none runs (a paused group, or one whose process went away): its files hardly change. */
export const RADAR_IDLE_MS = 30_000;

/** A group whose loops may be live (features running or paused): the radar has something to read. */
const isLiveStatus = (status: string) => status === 'running' || status === 'paused';

/**
 * When the conflict radar of `group` should next be read by this window, or undefined: never.
 * `last` is the previous reading here (when, and the group's status then); `runningLoop` says
 * whether one of the group's loops runs now, `drivenHere` whether this window's engine drives
 * one of them (its service then reads the radar itself). A group seen live is read once more
 * after it stopped being live, so that its last overlaps go.
 */
export function nextRadarReading(
  group: Pick<FeatureGroupView, 'status'>,
  state: { last: { at: number; status: string } | undefined; runningLoop: boolean; drivenHere: boolean },
): number | undefined {
  const { last } = state;
  if (!isLiveStatus(group.status)) return last && isLiveStatus(last.status) ? last.at + RADAR_RUNNING_MS : undefined;
  if (state.drivenHere) return undefined;
  if (!last) return 0;
  // A change of status (running → paused) is worth a prompt reading; otherwise the pace of its loops.
  return last.at + (last.status !== group.status || state.runningLoop ? RADAR_RUNNING_MS : RADAR_IDLE_MS);
}

export function createLoopsModel(deps: LoopsModelDeps): LoopsModel & vscode.Disposable {
  const changed = new vscode.EventEmitter<void>();
  const runtimeEvents = new vscode.EventEmitter<LoopRuntimeEvent>();
  const groupEvents = new vscode.EventEmitter<GroupEvent>();
  let summaries: LoopSummary[] = [];
  let groups: FeatureGroupView[] = [];
  let groupsByKey = new Map<string, FeatureGroupView>();
  let tree: LoopRootNode[] = [];
  let projects: WorkspaceProject[] = [];
  let byKey = new Map<string, LoopSummary>();
  let engineSubscriptions: (() => void)[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let disposed = false;
  /**
   * The conflict radar of groups another process (the CLI, another window) drives: this window's
   * service reads only the groups it drives by itself, so the model asks it (`radar(ref)`, which
   * is read-only) for the others — one reading at a time, at most one per group every few
   * seconds, none while no group is live. A reading that changed the overlaps fires
   * `group.overlap`, which re-reads the model.
   */
  const radarLast = new Map<string, { at: number; status: string }>();
  let radarTimer: NodeJS.Timeout | undefined;
  let radarBusy = false;

  const follow = (engine: ForgeEngine) => {
    for (const off of engineSubscriptions) off();
    engineSubscriptions = [
      engine.runtime.subscribe((event) => {
        runtimeEvents.fire(event);
        schedule();
      }),
      engine.onDidChangeStore(() => schedule()),
    ];
    const service = groupServiceOf(engine);
    if (service) {
      engineSubscriptions.push(
        service.subscribe((event) => {
          groupEvents.fire(event);
          schedule();
        }),
      );
    }
    schedule();
  };

  const read = async () => {
    const engine = deps.engine.peek();
    if (!engine) return;
    projects = await deps.projects.list(engine);
    summaries = readLoopSummaries(engine, projects);
    byKey = new Map(summaries.map((s) => [loopKey(s.loop), s]));
    const service = groupServiceOf(engine);
    groups = service ? projects.flatMap((p) => service.list(p.projectId)) : [];
    groupsByKey = new Map(groups.map((g) => [groupKey(g.ref), g]));
    tree = buildExplorerRoot(summaries, groups);
    changed.fire();
    planRadar();
  };

  /** The groups whose radar this window reads, with when each is due. */
  const radarDue = (): Array<{ group: FeatureGroupView; at: number }> => {
    const due: Array<{ group: FeatureGroupView; at: number }> = [];
    for (const group of groups) {
      const loops = group.features.flatMap((f) => {
        const summary = f.loopName ? byKey.get(loopKey({ projectId: group.ref.projectId, name: f.loopName })) : undefined;
        return summary ? [summary] : [];
      });
      const at = nextRadarReading(group, {
        last: radarLast.get(groupKey(group.ref)),
        runningLoop: loops.some((l) => l.loop.status === 'running' || l.loop.status === 'starting'),
        drivenHere: loops.some((l) => l.supervisedHere),
      });
      if (at !== undefined) due.push({ group, at });
    }
    return due;
  };

  function planRadar(): void {
    if (disposed || radarBusy || radarTimer) return;
    const due = radarDue();
    if (due.length === 0) return;
    const wait = Math.max(0, Math.min(...due.map((d) => d.at)) - Date.now());
    radarTimer = setTimeout(() => {
      radarTimer = undefined;
      void readRadars();
    }, wait);
  }

  async function readRadars(): Promise<void> {
    const engine = deps.engine.peek();
    const service = engine ? groupServiceOf(engine) : undefined;
    if (!service || disposed) return;
    radarBusy = true;
    try {
      for (const { group } of radarDue().filter((d) => d.at <= Date.now())) {
        if (disposed) return;
        try {
          await service.radar(group.ref);
        } catch (error) {
          deps.log.warn(`[groups] the conflict radar of group ${group.ref.id}: ${String(error)}`);
        }
        radarLast.set(groupKey(group.ref), { at: Date.now(), status: group.status });
      }
    } finally {
      radarBusy = false;
      planRadar();
    }
  }

  const refreshNow = async (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await read();
        } while (again);
      } catch (error) {
        deps.onError(vscode.l10n.t('Forge could not read its loops'), error);
      } finally {
        running = undefined;
      }
    })();
    return running;
  };

  function schedule() {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void refreshNow();
    }, COALESCE_MS);
  }

  const subscriptions = [
    deps.engine.onDidStart(follow),
    vscode.workspace.onDidChangeWorkspaceFolders(() => schedule()),
  ];
  const existing = deps.engine.peek();
  if (existing) follow(existing);

  return {
    onDidChange: changed.event,
    onRuntimeEvent: runtimeEvents.event,
    onGroupEvent: groupEvents.event,
    groups: () => groups,
    findGroup: (ref) => groupsByKey.get(groupKey(ref)),
    async start() {
      await deps.engine.get();
      await refreshNow();
    },
    isStarted: () => deps.engine.peek() !== undefined,
    summaries: () => summaries,
    tree: () => tree,
    projects: () => projects,
    find: (ref) => byKey.get(loopKey(ref)),
    refresh: schedule,
    refreshNow,
    dispose() {
      disposed = true;
      if (timer) clearTimeout(timer);
      if (radarTimer) clearTimeout(radarTimer);
      for (const off of engineSubscriptions) off();
      for (const s of subscriptions) s.dispose();
      changed.dispose();
      runtimeEvents.dispose();
      groupEvents.dispose();
    },
  };
}
