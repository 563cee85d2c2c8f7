import * as vscode from 'vscode';
import type { ProviderCatalog } from '../core/opencode/agent-client';

export type ExecutionMode = 'loop' | 'session';

export interface ExecutionChoices {
  readonly mode: ExecutionMode;
  /** "provider/model", or null for the configured default. */
  readonly model: string | null;
  /** "provider/model", or null for "same as the coding model / configured default". */
  readonly auditorModel: string | null;
  /** A variant of the coding model as opencode names it (reasoning effort: "high", "minimal" …), or null for the model's default. */
  readonly variant: string | null;
  readonly maxIterations: number;
  /** true: sandbox required; false: unconfined; null: the settings decide (sandboxed where a driver works). */
  readonly sandbox: boolean | null;
  /** Money budget of the loop (null: none); absent: the forge.budget.* settings decide. */
  readonly budget?: number | null;
}

export interface ExecutionDefaults {
  readonly model: string | null;
  readonly auditorModel: string | null;
  readonly maxIterations: number;
  readonly sandbox: boolean;
}

/** Last choices and recently used models, kept in the extension's global state. */
export interface ExecutionMemory {
  last(): Partial<ExecutionChoices>;
  recentModels(): string[];
  remember(choices: ExecutionChoices): Promise<void>;
}

const LAST_KEY = 'forge.execution.last';
const RECENT_KEY = 'forge.execution.recentModels';
const MAX_RECENT = 8;

export function createExecutionMemory(state: vscode.Memento): ExecutionMemory {
  return {
    last: () => state.get<Partial<ExecutionChoices>>(LAST_KEY) ?? {},
    recentModels: () => state.get<string[]>(RECENT_KEY) ?? [],
    async remember(choices) {
      const recent = [choices.model, choices.auditorModel, ...(state.get<string[]>(RECENT_KEY) ?? [])].filter(
        (m, i, all): m is string => typeof m === 'string' && m !== '' && all.indexOf(m) === i,
      );
      await state.update(LAST_KEY, choices);
      await state.update(RECENT_KEY, recent.slice(0, MAX_RECENT));
    },
  };
}

export interface ModelPickItem extends vscode.QuickPickItem {
  readonly model: string | null;
}

export interface VariantPickItem extends vscode.QuickPickItem {
  readonly variant: string | null;
}

/** The variants opencode knows for a "provider/model" (empty when the model or its variants are unknown). */
export function modelVariants(catalog: ProviderCatalog | undefined, model: string | null): string[] {
  if (!model || !catalog) return [];
  const slash = model.indexOf('/');
  const provider = catalog.providers.find((p) => p.id === model.slice(0, slash));
  return provider?.models.find((m) => m.modelId === model.slice(slash + 1))?.variants ?? [];
}

/** Quick-pick items for the variant of `model`: the last chosen one first (Enter keeps it), then its default, then its other variants. */
export function variantPickItems(model: string, variants: readonly string[], last: string | null): VariantPickItem[] {
  const defaultItem: VariantPickItem = { variant: null, label: vscode.l10n.t('$(settings-gear) Default'), description: vscode.l10n.t('{0} as configured', model) };
  const others = variants.filter((v) => v !== last).map((v): VariantPickItem => ({ variant: v, label: v }));
  if (!last || !variants.includes(last)) return [defaultItem, ...others];
  return [{ variant: last, label: last, description: vscode.l10n.t('last used') }, defaultItem, ...others];
}

/** Quick-pick items for a model choice: the default first, recently used models next, then every provider's models. */
export function modelPickItems(catalog: ProviderCatalog | undefined, recent: readonly string[], defaultLabel: string): ModelPickItem[] {
  const items: ModelPickItem[] = [{ model: null, label: vscode.l10n.t('$(settings-gear) {0}', defaultLabel) }];
  const known = new Map<string, { name: string; provider: string }>();
  for (const provider of catalog?.providers ?? []) {
    for (const m of provider.models) known.set(`${provider.id}/${m.modelId}`, { name: m.name, provider: provider.name });
  }
  const recentKnown = recent.filter((m) => known.size === 0 || known.has(m));
  if (recentKnown.length > 0) {
    items.push({ model: null, label: vscode.l10n.t('Recently used'), kind: vscode.QuickPickItemKind.Separator });
    for (const m of recentKnown) items.push({ model: m, label: vscode.l10n.t('$(history) {0}', m), description: known.get(m)?.name });
  }
  for (const provider of catalog?.providers ?? []) {
    const models = provider.models.filter((m) => !recentKnown.includes(`${provider.id}/${m.modelId}`));
    if (models.length === 0) continue;
    items.push({ model: null, label: provider.name || provider.id, kind: vscode.QuickPickItemKind.Separator });
    for (const m of models) {
      const ref = `${provider.id}/${m.modelId}`;
      const isDefault = catalog?.defaults[provider.id] === m.modelId;
      items.push({ model: ref, label: ref, description: `${m.name}${isDefault ? vscode.l10n.t(' · provider default') : ''}` });
    }
  }
  return items;
}

export interface ExecutionFlowDeps {
  readonly kind: 'plan' | 'goal';
  readonly given: Partial<ExecutionChoices>;
  readonly interactive: boolean;
  readonly defaults: ExecutionDefaults;
  readonly memory: ExecutionMemory;
  /** opencode's providers; starting opencode to ask costs seconds, so only called when a model is to be picked. */
  readonly catalog: () => Promise<ProviderCatalog | undefined>;
  readonly sandboxAvailability: () => Promise<{ available: boolean; driver?: string | null; reason: string | null }>;
  /** Title of the steps (default: Execute Plan / Execute Goal); Restart Loop walks the same model steps. */
  readonly title?: string;
  /**
   * The budget step (money; empty = none), with the estimate for the chosen models shown in
   * it, labelled as one. Absent: no budget step.
   */
  readonly budget?: {
    readonly current: number | null;
    readonly estimate: (model: string | null, auditorModel: string | null) => Promise<string | null>;
  };
  /** Steps the caller asks after these (Execute PRD's cap and group budget), counted in the step titles. */
  readonly extraSteps?: number;
}

/** How many steps the flow of `deps` numbers before the caller's extra ones. */
export function executionFlowSteps(deps: Pick<ExecutionFlowDeps, 'kind' | 'budget'>): number {
  return (deps.kind === 'plan' ? 6 : 5) + (deps.budget ? 1 : 0);
}

/**
 * One budget box: money (an amount such as 5.00) or tokens (a whole number); empty = none.
 * Resolves to the figure, null for none, undefined when the user pressed Escape. Shared by the
 * loop budget step and the feature group's budget steps.
 */
export async function askBudgetAmount(options: { readonly title: string; readonly kind: 'money' | 'tokens'; readonly prompt: string; readonly current: number | null }): Promise<number | null | undefined> {
  const money = options.kind === 'money';
  const value = await vscode.window.showInputBox({
    title: options.title,
    prompt: options.prompt,
    value: options.current !== null ? String(options.current) : '',
    ignoreFocusOut: true,
    validateInput: (v) =>
      v.trim() === '' || (money ? /^\d*\.?\d+$/.test(v.trim()) && Number(v) > 0 : /^\d+$/.test(v.trim()) && Number(v) > 0)
        ? undefined
        : money
          ? vscode.l10n.t('An amount above 0 such as 5.00, or empty for no budget')
          : vscode.l10n.t('A whole number of tokens above 0 such as 2000000, or empty for no token budget'),
  });
  if (value === undefined) return undefined;
  return value.trim() === '' ? null : Number(value.trim());
}

/**
 * The Execute Plan / Execute Goal quick-pick flow: mode, model, auditor model, variant of the
 * coding model (when opencode knows variants for it), maximum iterations, sandbox. What the caller gave is not asked again; without interaction the
 * last choices and the settings fill the rest. Returns undefined when the user cancelled.
 */
export async function runExecutionFlow(deps: ExecutionFlowDeps): Promise<ExecutionChoices | undefined> {
  const last = deps.memory.last();
  const title = deps.title ?? (deps.kind === 'plan' ? vscode.l10n.t('Forge: Execute Plan') : vscode.l10n.t('Forge: Execute Goal'));
  const fallback: ExecutionChoices = {
    mode: last.mode ?? 'loop',
    model: last.model !== undefined ? last.model : deps.defaults.model,
    auditorModel: last.auditorModel !== undefined ? last.auditorModel : deps.defaults.auditorModel,
    variant: null,
    maxIterations: deps.defaults.maxIterations,
    // Without a choice the settings decide at start: sandboxed where a driver works, else unconfined and said.
    sandbox: null,
  };
  if (!deps.interactive) {
    const chosen = { ...fallback, ...Object.fromEntries(Object.entries(deps.given).filter(([, v]) => v !== undefined)) } as ExecutionChoices;
    // The last variant belongs to the last model: it carries over only to the same model.
    const variant = deps.given.variant !== undefined ? deps.given.variant : chosen.model === (last.model ?? null) ? (last.variant ?? null) : null;
    return { ...chosen, variant: chosen.mode === 'session' ? null : variant };
  }
  const steps = executionFlowSteps(deps) + (deps.extraSteps ?? 0);
  let step = 0;
  const stepTitle = () => `${title} (${++step}/${steps})`;

  let mode: ExecutionMode = 'loop';
  if (deps.kind === 'plan') {
    if (deps.given.mode) {
      mode = deps.given.mode;
      step++;
    } else {
      type ModeItem = vscode.QuickPickItem & { mode: ExecutionMode };
      const items: ModeItem[] = [
        { mode: 'loop', label: vscode.l10n.t('$(sync) Loop'), description: vscode.l10n.t('audited'), detail: vscode.l10n.t('Coding and audit sessions in a git worktree until a clean final audit; findings show as problems.') },
        { mode: 'session', label: vscode.l10n.t('$(terminal) New session'), description: vscode.l10n.t('one opencode session'), detail: vscode.l10n.t('Opens opencode on the plan in a terminal, in your own working tree, without audits.') },
      ];
      if (fallback.mode === 'session') items.reverse();
      const picked = await vscode.window.showQuickPick(items, { title: stepTitle(), placeHolder: vscode.l10n.t('How should Forge execute the plan?'), ignoreFocusOut: true });
      if (!picked) return undefined;
      mode = picked.mode;
    }
  }

  let model = deps.given.model;
  let catalog: ProviderCatalog | undefined;
  if (model === undefined) {
    catalog = await deps.catalog();
    const items = modelPickItems(catalog, deps.memory.recentModels(), deps.defaults.model ? vscode.l10n.t('Default ({0})', deps.defaults.model) : vscode.l10n.t('Default model (from your settings or opencode configuration)'));
    const picked = await vscode.window.showQuickPick(items, { title: stepTitle(), placeHolder: vscode.l10n.t('Model for coding sessions'), matchOnDescription: true, ignoreFocusOut: true });
    if (!picked) return undefined;
    model = picked.model;
  } else step++;

  if (mode === 'session') {
    // opencode's interactive session takes no variant: the model's default applies.
    return { mode, model, auditorModel: null, variant: null, maxIterations: fallback.maxIterations, sandbox: false };
  }

  let auditorModel = deps.given.auditorModel;
  if (auditorModel === undefined) {
    catalog ??= await deps.catalog();
    const items = modelPickItems(catalog, deps.memory.recentModels(), vscode.l10n.t('Same as the coding model'));
    const picked = await vscode.window.showQuickPick(items, { title: stepTitle(), placeHolder: vscode.l10n.t('Model for audit sessions'), matchOnDescription: true, ignoreFocusOut: true });
    if (!picked) return undefined;
    auditorModel = picked.model;
  } else step++;

  let variant = deps.given.variant;
  if (variant === undefined) {
    const effective = model ?? deps.defaults.model;
    catalog ??= effective ? await deps.catalog() : undefined;
    const variants = modelVariants(catalog, effective);
    if (effective && variants.length > 0) {
      const lastVariant = (last.model ?? deps.defaults.model) === effective ? (last.variant ?? null) : null;
      const picked = await vscode.window.showQuickPick(variantPickItems(effective, variants, lastVariant), {
        title: stepTitle(),
        placeHolder: vscode.l10n.t('Variant of {0} (reasoning effort) for the sessions on it', effective),
        ignoreFocusOut: true,
      });
      if (!picked) return undefined;
      variant = picked.variant;
    } else {
      variant = null; // opencode knows no variants for this model
      step++;
    }
  } else step++;

  let budget: number | null | undefined = deps.given.budget;
  if (budget === undefined && deps.budget) {
    const estimate = await deps.budget.estimate(model, auditorModel).catch(() => null);
    const value = await askBudgetAmount({
      title: stepTitle(),
      kind: 'money',
      prompt: vscode.l10n.t('Budget in money (for example 5.00); empty = none. At 80 % Forge warns, at 100 % the loop pauses at its next hand-over. {0}', estimate ?? ''),
      current: deps.budget.current,
    });
    if (value === undefined) return undefined;
    budget = value;
  } else if (deps.budget) step++;

  let maxIterations = deps.given.maxIterations;
  if (maxIterations === undefined) {
    const value = await vscode.window.showInputBox({
      title: stepTitle(),
      prompt: vscode.l10n.t('Maximum iterations (coding passes) before the loop stops; 0 = unlimited'),
      value: String(fallback.maxIterations),
      ignoreFocusOut: true,
      validateInput: (v) => (/^\d+$/.test(v.trim()) && Number(v) <= 1000 ? undefined : vscode.l10n.t('A whole number from 0 to 1000')),
    });
    if (value === undefined) return undefined;
    maxIterations = Number(value.trim());
  } else step++;

  let sandbox = deps.given.sandbox;
  if (sandbox === undefined) {
    const availability = await deps.sandboxAvailability();
    type SandboxItem = vscode.QuickPickItem & { sandbox: boolean };
    const driver = availability.driver ? ` (${availability.driver})` : '';
    const on: SandboxItem = availability.available
      ? { sandbox: true, label: vscode.l10n.t('$(vm) Sandboxed{0}', driver), detail: vscode.l10n.t('Agent commands run confined to the worktree: nothing else is writable, no secret of Forge or opencode is reachable, no push.') }
      : { sandbox: true, label: vscode.l10n.t('$(vm-outline) Sandboxed (unavailable here)'), detail: vscode.l10n.t('{0} Choosing this refuses to start the loop.', availability.reason ?? vscode.l10n.t('No sandbox driver works here.')) };
    const off: SandboxItem = {
      sandbox: false,
      label: availability.available ? vscode.l10n.t('$(warning) Unconfined') : vscode.l10n.t('$(warning) Unconfined (no sandbox driver works here)'),
      detail: vscode.l10n.t('Agent commands run on this machine as you and can write outside the worktree. Forge keeps its secrets out of their environment and refuses git push through git; only a sandbox stops a determined agent.'),
    };
    const items = deps.defaults.sandbox && availability.available ? [on, off] : [off, on];
    const picked = await vscode.window.showQuickPick(items, { title: stepTitle(), placeHolder: vscode.l10n.t('Confine the agents in a sandbox?'), ignoreFocusOut: true });
    if (!picked) return undefined;
    sandbox = picked.sandbox;
  }
  return { mode, model, auditorModel, variant, maxIterations, sandbox, ...(budget !== undefined ? { budget } : {}) };
}
