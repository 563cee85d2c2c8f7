/** One engine per data folder: the endpoint a supervising process listens on, and its clients. */
export { becomeEngine, type EngineEndpoint, type EngineEndpointDeps } from './engine-server';
export { connectOrClaimEngine, connectToEngine, type EngineConnection, type StartOrRestart } from './engine-client';
export { endpointPaths, readEngineInfo } from './endpoint-files';
export { compatibilityKey, type EngineInfo, type EngineKind } from './protocol';
export { describeSupervision, formatSupervision, supervisorKind, type LoopSupervision } from './supervision';
export { judgeHandOverAnswer, planHandOver, type HandOverOutcome, type HandOverPlan, type SuperviseHereReason } from './handover-decision';
export { tellLoop, type ToldLoop } from './tell-loop';
export { cancelLoop } from './cancel-loop';
