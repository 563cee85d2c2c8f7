import * as vscode from 'vscode';
import type { GroupEvent, GroupRef } from '../core/groups/group-types';
import type { ForgeContext } from './forge-context';
import { groupKey } from './loops-model';

export interface GroupNotifications extends vscode.Disposable {
  /** A resume: a later budget pause of the group is a new one, said again. */
  resumed(ref: GroupRef): void;
}

/**
 * What the user is told about the feature groups this window drives: the 80 % budget warning
 * exactly once per group, the budget pause once (with "Resume Group…"), and the group's end.
 * The service emits both a budget event and an end event for a budget pause: only one is said.
 */
export function createGroupNotifications(ctx: ForgeContext): GroupNotifications {
  const warned = new Set<string>();
  const paused = new Set<string>();
  const openDashboard = vscode.l10n.t('Open Dashboard');
  const resumeAction = vscode.l10n.t('Resume Group…');

  const notifyPause = (ref: GroupRef, message: string) => {
    const key = groupKey(ref);
    if (paused.has(key)) return;
    paused.add(key);
    void ctx.notifier.warn(vscode.l10n.t('Forge: {0}', message), resumeAction, openDashboard).then((choice) => {
      if (choice === resumeAction) void vscode.commands.executeCommand('forge.resumeGroup', ref);
      if (choice === openDashboard) void ctx.dashboard.show({ group: ref });
    });
  };

  const onEvent = (event: GroupEvent) => {
    const key = groupKey(event.group);
    if (event.type === 'group.budget') {
      if (event.level === 'paused') return notifyPause(event.group, event.message);
      if (warned.has(key)) return;
      warned.add(key);
      void ctx.notifier.warn(vscode.l10n.t('Forge: {0}', event.message), openDashboard).then((choice) => {
        if (choice === openDashboard) void ctx.dashboard.show({ group: event.group });
      });
      return;
    }
    if (event.type !== 'group.ended') return;
    if (event.status === 'paused' && event.pauseReason === 'budget_reached') {
      notifyPause(event.group, vscode.l10n.t('group "{0}" paused: its budget is spent. Resume it with a higher budget to continue.', event.group.id));
      return;
    }
    const group = ctx.engine.peek() && ctx.loops.findGroup(event.group);
    const show = (choice: string | undefined) => {
      if (choice === openDashboard) void ctx.dashboard.show({ group: event.group });
    };
    if (event.status === 'completed') {
      void ctx.notifier.info(vscode.l10n.t('Forge: feature group "{0}" completed: every feature\'s loop completed.', event.group.id), openDashboard).then(show);
    } else if (event.status === 'failed') {
      const failing = (group?.features ?? []).filter((f) => f.status === 'failed').map((f) => f.id);
      void ctx.notifier
        .warn(
          failing.length > 0
            ? vscode.l10n.t('Forge: feature group "{0}" failed: {1} failed; features depending on them are blocked.', event.group.id, failing.join(', '))
            : vscode.l10n.t('Forge: feature group "{0}" failed.', event.group.id),
          openDashboard,
        )
        .then(show);
    } else if (event.status === 'paused' && event.pauseReason === 'interrupted') {
      void ctx.notifier.warn(vscode.l10n.t('Forge: feature group "{0}" was interrupted; resume it to continue.', event.group.id), resumeAction).then((choice) => {
        if (choice === resumeAction) void vscode.commands.executeCommand('forge.resumeGroup', event.group);
      });
    }
  };

  const subscription = ctx.loops.onGroupEvent(onEvent);
  return {
    resumed: (ref) => paused.delete(groupKey(ref)),
    dispose: () => subscription.dispose(),
  };
}
