import * as vscode from 'vscode';
import { inertText } from '../core/text/inert-text';

/** A component's view of Forge's one log channel: every line carries the component's tag. */
export interface ForgeLog {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string | Error): void;
  /** The same channel under another component tag. */
  child(component: string): ForgeLog;
}

export type LogSink = Pick<vscode.LogOutputChannel, 'trace' | 'debug' | 'info' | 'warn' | 'error'>;

/**
 * Tags lines as `[component] message` so the one channel stays readable when filtered. Lines
 * carry model text (findings, agent errors): control and escape characters are shown escaped.
 */
export function createForgeLog(sink: LogSink, component = 'forge'): ForgeLog {
  const tag = (message: string) => inertText(`[${component}] ${message}`);
  return {
    trace: (m) => sink.trace(tag(m)),
    debug: (m) => sink.debug(tag(m)),
    info: (m) => sink.info(tag(m)),
    warn: (m) => sink.warn(tag(m)),
    error: (m) => sink.error(tag(m instanceof Error ? (m.stack ?? m.message) : m)),
    child: (name) => createForgeLog(sink, name),
  };
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
