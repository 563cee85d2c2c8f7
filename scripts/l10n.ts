// Forge's localisation tooling (`npm run l10n`), a small extractor of its own: @vscode/l10n-dev
// is not among Forge's dependencies and the build machine installs nothing at test time.
//
// - `extractMessages`: the messages of every `vscode.l10n.t('…', …)` call in src/ (the first
//   argument must be a string literal, else extraction reports it), written as the English bundle
//   l10n/bundle.l10n.json (message → message, sorted).
// - `findBypasses`: user-facing text in src/vscode/ and src/extension.ts that does not go through
//   l10n: a string or template literal with words in a position the user reads (a message of
//   showInformationMessage/…, a notifier call, a quick pick item/title/placeholder, a tree item's
//   label/description/tooltip, a status-bar item's text, a chat response's markdown, …). It sees
//   literals in those positions, through ?:, ??, ||, +, arrays and template parts; it does not
//   follow a variable or a function's return value to the sink (those functions are converted too,
//   and `--check` catches their literals where they meet a sink property such as `label:`).
//
// `npx tsx scripts/l10n.ts` writes the bundle; `--check` fails when the bundle is stale, a
// message is not a literal or a bypass is found (test/core/l10n/l10n.test.ts runs the same checks).
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
export const bundlePath = join(repoRoot, 'l10n', 'bundle.l10n.json');

export interface SourceFile {
  readonly path: string;
  readonly text: string;
}

export interface L10nProblem {
  readonly file: string;
  readonly line: number;
  readonly text: string;
  readonly why: string;
}

/** Calls whose arguments (from the index given) the user reads. Receiver: a regexp on the callee's object, when the name alone is too common. */
const SINK_CALLS: Record<string, { from: number; only?: number[]; receiver?: RegExp }> = {
  showInformationMessage: { from: 0 },
  showWarningMessage: { from: 0 },
  showErrorMessage: { from: 0 },
  setStatusBarMessage: { from: 0, only: [0] },
  info: { from: 0, receiver: /notifier$/ },
  warn: { from: 0, receiver: /notifier$/ },
  error: { from: 0, only: [0], receiver: /notifier$/ },
  refused: { from: 2 },
  noWorkspace: { from: 1 },
  noLoop: { from: 0 },
  refuseIfUntrusted: { from: 1 },
  untrustedMessage: { from: 0 },
  registerForgeCommand: { from: 2, only: [2] },
  resolveLoop: { from: 3 },
  showQuickPick: { from: 0, only: [0] },
  TreeItem: { from: 0, only: [0] },
  MarkdownString: { from: 0, only: [0] },
  markdown: { from: 0, only: [0], receiver: /(stream|response)$/ },
  progress: { from: 0, only: [0], receiver: /(stream|response)$/ },
  // Errors Forge raises reach the user through the notifier ("<what>: <message>").
  Error: { from: 0, only: [0] },
  onError: { from: 0, only: [0] },
  createWebviewPanel: { from: 1, only: [1] },
  modelPickItems: { from: 2, only: [2] },
  describeCheckProblems: { from: 1, only: [1] },
};

/** Properties (in object literals and assignments) the user reads. */
const SINK_PROPERTIES = new Set(['title', 'placeHolder', 'placeholder', 'prompt', 'label', 'description', 'detail', 'tooltip', 'text', 'validationMessage', 'openLabel', 'emptyMessage', 'validateInput']);
/** Assignments the user reads that are too common as object-literal keys (a status-bar item's `.name`). */
const SINK_ASSIGNMENTS = new Set([...SINK_PROPERTIES, 'name']);

const WORDS = /[A-Za-z]{2,}/;
/** Words of a literal, codicons (`$(sync~spin)`) aside. */
const hasWords = (text: string): boolean => WORDS.test(text.replace(/\$\([\w~-]+\)/g, ''));
const TEXT_METHODS = new Set(['join', 'replace', 'trim', 'slice', 'concat', 'padEnd', 'padStart']);

function isL10nCall(node: ts.Node): boolean {
  if (!ts.isCallExpression(node)) return false;
  const callee = node.expression;
  return ts.isPropertyAccessExpression(callee) && callee.name.text === 't' && /(^|\.)l10n$/.test(callee.expression.getText());
}

/** Where a name used in a sink comes from within its file: `const`/`let` initializers and the returns of functions of that name. */
interface LocalDefinitions {
  /** Initializers of a variable, and what is pushed onto it (`parts.push(…)`). */
  readonly variables: Map<string, ts.Expression[]>;
  readonly functionReturns: Map<string, ts.Expression[]>;
}

function localDefinitions(sourceFile: ts.SourceFile): LocalDefinitions {
  const variables = new Map<string, ts.Expression[]>();
  const functionReturns = new Map<string, ts.Expression[]>();
  const add = (map: Map<string, ts.Expression[]>, name: string, e: ts.Expression) => map.set(name, [...(map.get(name) ?? []), e]);
  const returnsOf = (body: ts.Node, name: string) => {
    if (ts.isExpression(body)) return add(functionReturns, name, body);
    const walk = (n: ts.Node): void => {
      if (ts.isReturnStatement(n) && n.expression) add(functionReturns, name, n.expression);
      if (!ts.isFunctionLike(n) || n === body) ts.forEachChild(n, walk);
    };
    ts.forEachChild(body, walk);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
      if (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer)) returnsOf(node.initializer.body, node.name.text);
      else add(variables, node.name.text, node.initializer);
    }
    if (ts.isFunctionDeclaration(node) && node.name && node.body) returnsOf(node.body, node.name.text);
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'push' && ts.isIdentifier(node.expression.expression)) {
      for (const arg of node.arguments) add(variables, node.expression.expression.text, arg);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return { variables, functionReturns };
}

/**
 * The literals with words under a sink expression that are not inside an l10n.t call: through
 * ?:, ??, ||, &&, +, arrays, spreads and template parts, and into the initializer of a local
 * variable or the returns of a local function the expression names.
 */
function offendingLiterals(node: ts.Expression, out: ts.Node[], defs: LocalDefinitions, seen = new Set<ts.Node>()): void {
  if (seen.has(node)) return;
  seen.add(node);
  const recurse = (e: ts.Expression) => offendingLiterals(e, out, defs, seen);
  // The values of an l10n.t call's placeholders are read too: a word among them is a bypass.
  if (isL10nCall(node)) return (node as ts.CallExpression).arguments.slice(1).forEach(recurse);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    if (hasWords(node.text)) out.push(node);
  } else if (ts.isTemplateExpression(node)) {
    const literalText = node.head.text + node.templateSpans.map((s) => s.literal.text).join('');
    if (hasWords(literalText)) out.push(node);
    else for (const span of node.templateSpans) recurse(span.expression);
  } else if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node) || ts.isSpreadElement(node) || ts.isNonNullExpression(node)) {
    recurse(node.expression);
  } else if (ts.isConditionalExpression(node)) {
    recurse(node.whenTrue);
    recurse(node.whenFalse);
  } else if (ts.isBinaryExpression(node)) {
    const op = node.operatorToken.kind;
    if (op === ts.SyntaxKind.PlusToken || op === ts.SyntaxKind.QuestionQuestionToken || op === ts.SyntaxKind.BarBarToken || op === ts.SyntaxKind.AmpersandAmpersandToken) {
      recurse(node.left);
      recurse(node.right);
    }
  } else if (ts.isArrayLiteralExpression(node)) {
    node.elements.forEach(recurse);
  } else if (ts.isIdentifier(node)) {
    defs.variables.get(node.text)?.forEach(recurse);
  } else if (ts.isCallExpression(node) && ts.isIdentifier(node.expression)) {
    defs.functionReturns.get(node.expression.text)?.forEach(recurse);
  } else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && TEXT_METHODS.has(node.expression.name.text)) {
    // `parts.join(' · ')`, `text.replace(a, b)`: the text comes from the receiver (and a replacement).
    recurse(node.expression.expression);
    node.arguments.slice(1).forEach(recurse);
  } else if (ts.isObjectLiteralExpression(node) || ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
    // A record of labels (`PHASE_LABELS[phase]`) is followed to its definition.
    const base = ts.isObjectLiteralExpression(node) ? undefined : node.expression;
    if (base && ts.isIdentifier(base)) defs.variables.get(base.text)?.forEach((init) => ts.isObjectLiteralExpression(init) && init.properties.forEach((p) => ts.isPropertyAssignment(p) && recurse(p.initializer)));
  }
}

function calleeName(node: ts.CallExpression | ts.NewExpression): { name: string; receiver: string } | undefined {
  const callee = node.expression;
  if (ts.isIdentifier(callee)) return { name: callee.text, receiver: '' };
  if (ts.isPropertyAccessExpression(callee)) return { name: callee.name.text, receiver: callee.expression.getText() };
  return undefined;
}

function propertyName(name: ts.PropertyName | ts.MemberName): string | undefined {
  return ts.isIdentifier(name) || ts.isStringLiteral(name) ? name.text : undefined;
}

export function sinkNodes(sourceFile: ts.SourceFile): { node: ts.Node; why: string }[] {
  const found: { node: ts.Node; why: string }[] = [];
  const defs = localDefinitions(sourceFile);
  const reported = new Set<ts.Node>();
  const report = (expression: ts.Expression, why: string) => {
    const out: ts.Node[] = [];
    offendingLiterals(expression, out, defs);
    for (const node of out) if (!reported.has(node)) (reported.add(node), found.push({ node, why }));
  };
  const visit = (node: ts.Node): void => {
    if (isL10nCall(node)) return;
    if ((ts.isCallExpression(node) || ts.isNewExpression(node)) && node.arguments) {
      const callee = calleeName(node);
      const sink = callee && Object.hasOwn(SINK_CALLS, callee.name) ? SINK_CALLS[callee.name] : undefined;
      if (callee && sink && (!sink.receiver || sink.receiver.test(callee.receiver))) {
        node.arguments.forEach((arg, index) => {
          if (index >= sink.from && (!sink.only || sink.only.includes(index))) report(arg, `argument ${index + 1} of ${callee.name}()`);
        });
      }
    }
    if (ts.isPropertyAssignment(node)) {
      const name = propertyName(node.name);
      const value = ts.isArrowFunction(node.initializer) && !ts.isBlock(node.initializer.body) ? node.initializer.body : node.initializer;
      if (name && SINK_PROPERTIES.has(name)) report(value, `property "${name}"`);
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isPropertyAccessExpression(node.left)) {
      const name = node.left.name.text;
      if (SINK_ASSIGNMENTS.has(name)) report(node.right, `assignment to .${name}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return found;
}

function parse(file: SourceFile): ts.SourceFile {
  return ts.createSourceFile(file.path, file.text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
}

/** User-facing literals of `file` that bypass vscode.l10n.t. */
export function findBypasses(file: SourceFile): L10nProblem[] {
  const sourceFile = parse(file);
  return sinkNodes(sourceFile).map(({ node, why }) => ({
    file: file.path,
    line: sourceFile.getLineAndCharacterOfPosition(node.getStart()).line + 1,
    text: node.getText(),
    why,
  }));
}

/** The messages of the l10n.t calls of `file`, and the calls whose message is not a literal. */
export function extractMessages(file: SourceFile): { messages: string[]; problems: L10nProblem[] } {
  const sourceFile = parse(file);
  const messages: string[] = [];
  const problems: L10nProblem[] = [];
  const visit = (node: ts.Node): void => {
    if (isL10nCall(node)) {
      const first = (node as ts.CallExpression).arguments[0];
      if (first && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first))) messages.push(first.text);
      else
        problems.push({
          file: file.path,
          line: sourceFile.getLineAndCharacterOfPosition(node.getStart()).line + 1,
          text: node.getText(),
          why: 'the message of l10n.t must be a string literal (placeholders {0}, {1}… for values), or it cannot be translated',
        });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return { messages, problems };
}

function tsFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? tsFilesUnder(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The extension's sources: src/extension.ts and src/vscode/ (src/core never shows UI). */
export function extensionSources(root = repoRoot): SourceFile[] {
  return [join(root, 'src', 'extension.ts'), ...tsFilesUnder(join(root, 'src', 'vscode'))].map((path) => ({ path: relative(root, path), text: readFileSync(path, 'utf8') }));
}

export function buildBundle(files: readonly SourceFile[]): { bundle: Record<string, string>; problems: L10nProblem[] } {
  const all = new Set<string>();
  const problems: L10nProblem[] = [];
  for (const file of files) {
    const result = extractMessages(file);
    result.messages.forEach((m) => all.add(m));
    problems.push(...result.problems);
  }
  const bundle: Record<string, string> = {};
  for (const message of [...all].sort()) bundle[message] = message;
  return { bundle, problems };
}

export function bundleText(bundle: Record<string, string>): string {
  return JSON.stringify(bundle, null, 2) + '\n';
}

/** Every `%key%` the manifest uses, anywhere in it. */
export function manifestNlsKeys(manifest: unknown): string[] {
  const keys = new Set<string>();
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      const m = /^%(.+)%$/.exec(value);
      if (m) keys.add(m[1]!);
    } else if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object') Object.values(value).forEach(walk);
  };
  walk(manifest);
  return [...keys].sort();
}

function main(): void {
  const check = process.argv.includes('--check');
  const files = extensionSources();
  const { bundle, problems } = buildBundle(files);
  problems.push(...files.flatMap(findBypasses));
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  const nls = JSON.parse(readFileSync(join(repoRoot, 'package.nls.json'), 'utf8')) as Record<string, string>;
  const missing = manifestNlsKeys(manifest).filter((k) => !Object.hasOwn(nls, k));
  for (const p of problems) process.stderr.write(`${p.file}:${p.line}: ${p.why}: ${p.text}\n`);
  for (const k of missing) process.stderr.write(`package.json uses %${k}% but package.nls.json has no "${k}"\n`);
  const text = bundleText(bundle);
  let current = '';
  try {
    current = readFileSync(bundlePath, 'utf8');
  } catch {
    /* not written yet */
  }
  if (check) {
    if (current !== text) process.stderr.write(`${relative(repoRoot, bundlePath)} is stale: run npm run l10n\n`);
    process.exitCode = problems.length > 0 || missing.length > 0 || current !== text ? 1 : 0;
    return;
  }
  mkdirSync(dirname(bundlePath), { recursive: true });
  writeFileSync(bundlePath, text);
  process.stdout.write(`${relative(repoRoot, bundlePath)}: ${Object.keys(bundle).length} messages from ${files.length} files\n`);
  if (problems.length > 0 || missing.length > 0) process.exitCode = 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
