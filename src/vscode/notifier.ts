import * as vscode from 'vscode';
import { errorMessage, type ForgeLog } from './log';
import { inertText } from '../core/text/inert-text';

export type NotificationLevel = 'info' | 'warning' | 'error';

export interface RecordedNotification {
  readonly level: NotificationLevel;
  readonly message: string;
  /** The buttons it offered. */
  readonly actions: readonly string[];
  readonly at: number;
}

/**
 * Every message Forge shows the user goes through here: errors are logged and offer
 * "Show Log"; the last messages are kept so the extension's API (and its tests) can
 * tell what the user was told. A message may quote model text: it is shown inert (control and
 * escape characters as `\uXXXX`).
 */
export interface Notifier {
  info(message: string, ...actions: string[]): Thenable<string | undefined>;
  warn(message: string, ...actions: string[]): Thenable<string | undefined>;
  /** Logs `error` under `what`, and shows `what: message` with a "Show Log" action. */
  error(what: string, error: unknown): void;
  recent(): readonly RecordedNotification[];
}

const KEEP = 50;

export function createNotifier(log: ForgeLog, showLog: () => void): Notifier {
  const recent: RecordedNotification[] = [];
  const record = (level: NotificationLevel, message: string, actions: readonly string[] = []) => {
    recent.push({ level, message, actions, at: Date.now() });
    if (recent.length > KEEP) recent.shift();
  };
  return {
    info(raw, ...actions) {
      const message = inertText(raw);
      record('info', message, actions);
      log.info(message);
      return vscode.window.showInformationMessage(message, ...actions);
    },
    warn(raw, ...actions) {
      const message = inertText(raw);
      record('warning', message, actions);
      log.warn(message);
      return vscode.window.showWarningMessage(message, ...actions);
    },
    error(what, error) {
      const message = inertText(vscode.l10n.t('{0}: {1}', what, errorMessage(error)));
      record('error', message, [vscode.l10n.t('Show Log')]);
      log.error(error instanceof Error && error.stack ? `${what}: ${error.stack}` : message);
      const showLogAction = vscode.l10n.t('Show Log');
      void vscode.window.showErrorMessage(message, showLogAction).then((choice) => {
        if (choice === showLogAction) showLog();
      });
    },
    recent: () => recent,
  };
}
