/**
 * Every model a command names (coder, auditor, the auditor's fallbacks, architect, splitter),
 * checked against opencode's provider catalog before anything is created, with a did-you-mean.
 * Pure: the catalog is read by the caller (the engine's configuration probe).
 */
import type { ProviderCatalog } from './agent-client';

export interface NamedModel {
  /** What the model is for, as the message says it: "coding model (--model)". */
  role: string;
  model: string;
}

/** One line per unknown model, or null when opencode knows them all. */
export function unknownModelsProblem(named: readonly NamedModel[], catalog: ProviderCatalog): string | null {
  const known = catalog.providers.flatMap((p) => p.models.map((m) => `${p.id}/${m.modelId}`));
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const { role, model } of named) {
    const key = `${role}\0${model}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (known.includes(model)) continue;
    problems.push(`The ${role} "${model}" is not a model opencode knows${hint(model, catalog, known)}`);
  }
  if (problems.length === 0) return null;
  return `${problems.join('\n')}\nName models as PROVIDER/MODEL from your opencode configuration (forge run --dry-run lists what would run); nothing was created.`;
}

function hint(model: string, catalog: ProviderCatalog, known: readonly string[]): string {
  if (!model.includes('/')) {
    const matching = known.filter((k) => k.slice(k.indexOf('/') + 1) === model);
    if (matching.length > 0) return ` (a model is PROVIDER/MODEL: did you mean "${matching[0]}"?).`;
    return ' (a model is named PROVIDER/MODEL).';
  }
  const best = closest(model, known);
  if (best) return `; did you mean "${best}"?`;
  const provider = catalog.providers.find((p) => p.id === model.slice(0, model.indexOf('/')));
  if (provider) return `; provider "${provider.id}" has ${listed(provider.models.map((m) => m.modelId))}.`;
  const ids = catalog.providers.map((p) => p.id);
  return ids.length > 0 ? `; the providers are ${listed(ids)}.` : '; opencode lists no provider (configure one in your opencode configuration).';
}

function listed(items: readonly string[]): string {
  const shown = items.slice(0, 8).join(', ');
  return items.length > 8 ? `${shown}, … (${items.length} in all)` : shown || 'no models';
}

/** The known id nearest to `model` by edit distance, when near enough to be a slip. */
function closest(model: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const k of known) {
    const d = editDistance(model.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(model.length / 4)) ? best : null;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The models a loop start names and where each comes from (flag, setting, environment), for the
 * check above. `defaults` is what the engine chose when nothing else named one (FORGE_MODEL,
 * opencode's own default); the embedded scripted model is the engine's own and never checked.
 */
export function namedLoopModels(
  request: { model?: string | null; auditorModel?: string | null },
  settings: { model: string; auditorModel: string; auditorFallbackModels: readonly string[] },
  defaults: { model: string | null; auditorModel: string | null; source: string } = { model: null, auditorModel: null, source: '' },
): NamedModel[] {
  const named: NamedModel[] = [];
  if (request.model) named.push({ role: 'coding model (--model)', model: request.model });
  else if (settings.model) named.push({ role: 'coding model (setting forge.model)', model: settings.model });
  else if (defaults.model) named.push({ role: `coding model (${defaults.source})`, model: defaults.model });
  if (request.auditorModel) named.push({ role: 'audit model (--auditor-model)', model: request.auditorModel });
  else if (settings.auditorModel) named.push({ role: 'audit model (setting forge.auditorModel)', model: settings.auditorModel });
  else if (defaults.auditorModel && defaults.auditorModel !== defaults.model) named.push({ role: `audit model (${defaults.source})`, model: defaults.auditorModel });
  for (const m of settings.auditorFallbackModels) named.push({ role: 'auditor fallback model (setting forge.auditorFallbackModels)', model: m });
  return named;
}
