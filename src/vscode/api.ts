import type * as vscode from 'vscode';
import type { RenderProbe } from './dashboard/protocol';
import type { DashboardState } from './dashboard/protocol';
import type { ForgeEngine } from './engine-contract';
import type { RecordedNotification } from './notifier';
import type { StatusBarSnapshot } from './status-bar';

/** A Loop Explorer node as plain data (what the user sees). */
export interface TreeSnapshotNode {
  readonly id: string;
  readonly label: string;
  readonly description: string | undefined;
  readonly tooltip: string | undefined;
  readonly icon: string | undefined;
  readonly contextValue: string | undefined;
  readonly children: readonly TreeSnapshotNode[];
}

/**
 * What `activate` returns: read-only views of Forge's state for other extensions and for
 * Forge's own extension tests, plus the one test hook (`setTestEnvironment`).
 */
export interface ForgeExtensionApi {
  /** Milliseconds the `activate` call took (measured by the extension itself). */
  readonly activationMs: number;
  /** The engine, if a feature has started it. */
  engine(): ForgeEngine | undefined;
  /** Starts the engine (as the first use of a feature would). */
  startEngine(): Promise<ForgeEngine>;
  /**
   * Tests only: environment for the engine and the opencode processes it starts (isolated
   * HOME/XDG folders, FORGE_DATA_DIR). Closes a running engine; the next use starts a new one.
   */
  setTestEnvironment(env: Record<string, string>): Promise<void>;
  /** The Loop Explorer's nodes, groups → loops → details, as last read (run forge.refreshLoops to re-read). */
  treeSnapshot(): readonly TreeSnapshotNode[];
  /** Fires after the Loop Explorer's data changed. */
  onDidChangeLoops(listener: () => void): vscode.Disposable;
  statusBar(): StatusBarSnapshot;
  notifications(): readonly RecordedNotification[];
  dashboard(): { readonly open: boolean; readonly state: DashboardState | undefined; probe(): Promise<RenderProbe> };
  /** Number of files carrying Forge diagnostics. */
  diagnosticFileCount(): number;
  /** Folder of the extension's logs; the 'Forge' output channel writes `Forge.log` there. */
  readonly logUri: vscode.Uri;
  /** Whether the `@forge` chat participant was registered (false where this VS Code build has no chat API). */
  readonly chatParticipantRegistered: boolean;
}
