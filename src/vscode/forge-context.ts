import type * as vscode from 'vscode';
import type { ApiKeyStore } from './api-keys';
import type { CoreModule } from './core-loader';
import type { Dashboard } from './dashboard/dashboard-panel';
import type { EngineHost } from './engine-host';
import type { ExecutionMemory } from './execution-flow';
import type { FindingsDiagnostics } from './findings-diagnostics';
import type { ForgeLog } from './log';
import type { LoopsModel } from './loops-model';
import type { Notifier } from './notifier';
import type { WorkspaceProjects } from './projects';
import type { SettingsAccessor } from './settings-accessor';
import type { ForgeStatusBar } from './status-bar';
import type { WorktreeFolders } from './worktree-folders';

/**
 * Everything a Forge feature may use, created once by the composition root
 * (src/extension.ts) and handed to each feature's registration function. Extension-lifetime
 * services only; per-loop resources (diagnostics, worktree watchers) live in the services
 * that own them, and the engine owns the agent and sandbox side.
 */
export interface ForgeContext {
  readonly extension: vscode.ExtensionContext;
  readonly channel: vscode.LogOutputChannel;
  readonly log: ForgeLog;
  readonly notifier: Notifier;
  readonly settings: SettingsAccessor;
  readonly loadCore: () => Promise<CoreModule>;
  readonly engine: EngineHost;
  readonly projects: WorkspaceProjects;
  readonly loops: LoopsModel;
  readonly diagnostics: FindingsDiagnostics;
  readonly statusBar: ForgeStatusBar;
  readonly worktreeFolders: WorktreeFolders;
  readonly dashboard: Dashboard;
  readonly apiKeys: ApiKeyStore;
  readonly executionMemory: ExecutionMemory;
}
