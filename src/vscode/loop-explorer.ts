import * as vscode from 'vscode';
import { buildLoopDetails, loopNodeTooltip, type LoopDetailNode, type LoopTreeNode, type TreeIconSpec } from './loop-tree-model';
import type { LoopsModel } from './loops-model';
import { inertLine, inertText } from '../core/text/inert-text';

export const LOOP_EXPLORER_VIEW_ID = 'forge.loopExplorer';

export function themeIcon(spec: TreeIconSpec | undefined): vscode.ThemeIcon | undefined {
  if (!spec) return undefined;
  return spec.color ? new vscode.ThemeIcon(spec.id, new vscode.ThemeColor(spec.color)) : new vscode.ThemeIcon(spec.id);
}

/** A node as VS Code's tree item; labels, descriptions and tooltips quote model text (plan titles, findings), shown inert. */
export function toTreeItem(node: LoopTreeNode): vscode.TreeItem {
  const collapsible =
    node.kind === 'group' || node.kind === 'featureGroup'
      ? vscode.TreeItemCollapsibleState.Expanded
      : node.kind === 'loop' || (node.kind === 'detail' && node.sectionsOf)
        ? vscode.TreeItemCollapsibleState.Collapsed
        : vscode.TreeItemCollapsibleState.None;
  const item = new vscode.TreeItem(inertLine(node.label), collapsible);
  item.id = node.id;
  if (node.description !== undefined) item.description = inertLine(node.description);
  if (node.tooltip !== undefined) item.tooltip = inertText(node.tooltip);
  const icon = themeIcon(node.icon);
  if (icon) item.iconPath = icon;
  if (node.contextValue) item.contextValue = node.contextValue;
  if (node.kind === 'loop') {
    // A click opens the loop in the dashboard; the context menu has the rest.
    item.command = { command: 'forge.openDashboard', title: vscode.l10n.t('Open Dashboard'), arguments: [{ projectId: node.projectId, name: node.name }] };
  }
  if (node.kind === 'featureGroup') {
    // A click opens the group's part of the dashboard.
    item.command = { command: 'forge.openDashboard', title: vscode.l10n.t('Open Dashboard'), arguments: [{ projectId: node.projectId, groupId: node.groupId }] };
  }
  return item;
}

/**
 * The Loop Explorer: loops grouped Running / Recent, details as children. Asking for the
 * root is the first use of the view, so it starts the engine; afterwards the view follows
 * the loops model (events, no polling). An empty root shows the manifest's welcome view.
 */
export class LoopExplorer implements vscode.TreeDataProvider<LoopTreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<LoopTreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly model: LoopsModel,
    private readonly onError: (what: string, error: unknown) => void,
    /** The children of a Sections detail, read from the store when the user expands it. */
    private readonly readSections: (node: LoopDetailNode) => LoopDetailNode[] = () => [],
  ) {
    this.subscription = model.onDidChange(() => this.changed.fire(undefined));
  }

  getTreeItem(node: LoopTreeNode): vscode.TreeItem {
    return toTreeItem(node);
  }

  /** Hover text is built only for the item the user hovers. */
  resolveTreeItem(item: vscode.TreeItem, node: LoopTreeNode): vscode.TreeItem {
    if (node.kind === 'loop') item.tooltip = inertText(loopNodeTooltip(node));
    return item;
  }

  async getChildren(node?: LoopTreeNode): Promise<LoopTreeNode[]> {
    if (!node) {
      if (!vscode.workspace.workspaceFolders?.length) return [];
      if (!this.model.isStarted()) {
        try {
          await this.model.start();
        } catch (error) {
          this.onError(vscode.l10n.t('Forge could not start'), error);
          return [];
        }
      }
      return [...this.model.tree()];
    }
    if (node.kind === 'group') return [...node.loops];
    if (node.kind === 'featureGroup') return [...node.children];
    if (node.kind === 'loop') return buildLoopDetails(node);
    if (node.kind === 'detail' && node.sectionsOf) {
      try {
        return this.readSections(node);
      } catch (error) {
        this.onError(vscode.l10n.t('Forge could not read the loop\'s sections'), error);
        return [];
      }
    }
    return [];
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}
