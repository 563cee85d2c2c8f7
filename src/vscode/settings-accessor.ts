import * as vscode from 'vscode';
import type { ForgeSettings, SettingKey, SettingProblem } from '../core/config/settings';
import type { ForgeLog } from './log';

/**
 * `resolveSettings` of src/core/config/settings.ts (loaded lazily: its validator is large), given
 * the `forge` configuration section too, whose keys the user set beyond Forge's own settings (a
 * typo such as forge.loop.maxIteration) are reported with the nearest known key.
 */
export type ResolveSettings = (read: (key: SettingKey) => unknown, forgeSection: unknown) => { settings: ForgeSettings; problems: SettingProblem[] };

/**
 * The one typed accessor over `forge.*` settings. Values are validated by the engine's
 * `resolveSettings`; a bad value is replaced by its default and reported once (key, value,
 * what is allowed) until the user changes it.
 */
export interface SettingsAccessor {
  /** Loads the validator (once) and returns the validated window settings. */
  load(): Promise<ForgeSettings>;
  /** Validated window settings; only after `load()` resolved (the engine calls it synchronously). */
  get(): ForgeSettings;
  isLoaded(): boolean;
  /** Raw boolean for display before the validator is loaded (the status bar at activation). */
  rawBoolean(key: SettingKey, fallback: boolean): boolean;
  /** Writes one setting where the user expects it: the workspace when set there, else user settings. */
  update(key: SettingKey, value: unknown): Promise<void>;
  /** Fires after a `forge.*` setting changed (validated again when the validator is loaded). */
  readonly onDidChange: vscode.Event<void>;
}

export interface SettingsAccessorDeps {
  loadResolver: () => Promise<ResolveSettings>;
  log: ForgeLog;
  /** Tells the user about a bad value (once per key and value). */
  report: (problem: SettingProblem) => void;
}

function readExplicit(key: SettingKey): unknown {
  // Only values the user set: defaults are resolveSettings' business, not the manifest's.
  const inspected = vscode.workspace.getConfiguration().inspect(key);
  return inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
}

export function createSettingsAccessor(deps: SettingsAccessorDeps): SettingsAccessor & vscode.Disposable {
  const changed = new vscode.EventEmitter<void>();
  const reported = new Set<string>();
  let resolver: ResolveSettings | undefined;
  let loading: Promise<ResolveSettings> | undefined;
  let current: ForgeSettings | undefined;

  const validate = (resolve: ResolveSettings): ForgeSettings => {
    // The section object holds every forge.* value (defaults merged): its own keys list what the
    // user set beyond the declared settings.
    const { settings, problems } = resolve(readExplicit, vscode.workspace.getConfiguration('forge'));
    for (const problem of problems) {
      const id = `${problem.key}=${JSON.stringify(problem.value)}`;
      if (reported.has(id)) continue;
      reported.add(id);
      deps.log.warn(problem.message);
      deps.report(problem);
    }
    current = settings;
    return settings;
  };

  const subscription = vscode.workspace.onDidChangeConfiguration((event) => {
    if (!event.affectsConfiguration('forge')) return;
    if (resolver) validate(resolver);
    changed.fire();
  });

  return {
    async load() {
      if (current) return current;
      resolver ??= await (loading ??= deps.loadResolver());
      return current ?? validate(resolver);
    },
    get() {
      if (!current) throw new Error(vscode.l10n.t('Forge settings were read before they were loaded (call load() first).'));
      return current;
    },
    isLoaded: () => current !== undefined,
    rawBoolean(key, fallback) {
      const value = readExplicit(key);
      return typeof value === 'boolean' ? value : fallback;
    },
    async update(key, value) {
      const config = vscode.workspace.getConfiguration();
      const target =
        config.inspect(key)?.workspaceValue !== undefined ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
      await config.update(key, value, target);
    },
    onDidChange: changed.event,
    dispose() {
      subscription.dispose();
      changed.dispose();
    },
  };
}
