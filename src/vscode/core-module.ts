/**
 * Everything the extension needs from the engine at run time, behind one lazily loaded
 * module: the engine pulls in sql.js, zod, the opencode SDK and the MCP SDK, whose loading
 * alone would cost activation far more than its 50 ms budget. Only `import type` of this
 * file (and of src/core) may appear anywhere else in src/vscode; `loadCoreModule` loads it.
 */
export { createForgeEngine } from '../core/engine';
export { flattenSettingKeys, resolveSettings } from '../core/config/settings';
export { resolveDataDir } from '../core/workspace/data-dir';
export { LoopRuntimeError } from '../core/loop/runtime-types';
export { resolveOpencodeBinary } from '../core/opencode/server-process';
export { startEmbeddedModel } from '../core/opencode/embedded-model';
export { becomeEngine, cancelLoop, compatibilityKey, connectToEngine, judgeHandOverAnswer, planHandOver, tellLoop } from '../core/engine-host';
