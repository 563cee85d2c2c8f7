import type { SqlExecutor } from '../sql-executor';
import { createCheckRunsRepository, type CheckRunsRepository } from './check-runs-repository';
import { createFeatureGroupsRepository, type FeatureGroupsRepository } from './feature-groups-repository';
import { createLoopAcceptsRepository, type LoopAcceptsRepository } from './loop-accepts-repository';
import { createLoopAttemptsRepository, type LoopAttemptsRepository } from './loop-attempts-repository';
import { createLoopHandoffsRepository, type LoopHandoffsRepository } from './loop-handoffs-repository';
import { createLoopSessionUsageRepository, type LoopSessionUsageRepository } from './loop-session-usage-repository';
import { createLoopTransitionsRepository, type LoopTransitionsRepository } from './loop-transitions-repository';
import { createLoopsRepository, type LoopsRepository } from './loops-repository';
import { createPlanAmendmentsRepository, type PlanAmendmentsRepository } from './plan-amendments-repository';
import { createPlansRepository, type PlansRepository } from './plans-repository';
import { createPlanDraftsRepository, type PlanDraftsRepository } from './plan-drafts-repository';
import { createPreferencesRepository, type PreferencesRepository } from './preferences-repository';
import { createReviewFindingsRepository, type ReviewFindingsRepository } from './review-findings-repository';
import { createSectionPlansRepository, type SectionPlansRepository } from './section-plans-repository';
import { createShellInterventionsRepository, type ShellInterventionsRepository } from './shell-interventions-repository';
import { systemClock, type Clock } from './row-values';

export * from './check-runs-repository';
export * from './feature-groups-repository';
export * from './loop-accepts-repository';
export * from './loop-attempts-repository';
export * from './loop-handoffs-repository';
export * from './loop-session-usage-repository';
export * from './loop-transitions-repository';
export * from './loops-repository';
export * from './plan-amendments-repository';
export * from './plans-repository';
export * from './plan-drafts-repository';
export * from './preferences-repository';
export * from './review-findings-repository';
export * from './section-plans-repository';
export * from './shell-interventions-repository';
export { RowNotFoundError, systemClock, type Clock } from './row-values';

export interface ForgeRepositories {
  readonly loops: LoopsRepository;
  readonly plans: PlansRepository;
  readonly planDrafts: PlanDraftsRepository;
  readonly reviewFindings: ReviewFindingsRepository;
  readonly sectionPlans: SectionPlansRepository;
  readonly transitions: LoopTransitionsRepository;
  readonly planAmendments: PlanAmendmentsRepository;
  readonly sessionUsage: LoopSessionUsageRepository;
  readonly handoffs: LoopHandoffsRepository;
  readonly featureGroups: FeatureGroupsRepository;
  readonly attempts: LoopAttemptsRepository;
  readonly preferences: PreferencesRepository;
  readonly checkRuns: CheckRunsRepository;
  readonly shellInterventions: ShellInterventionsRepository;
  readonly accepts: LoopAcceptsRepository;
}

/**
 * Every repository over one database (or over a transaction handle, so that
 * several repositories' writes commit atomically:
 * `db.transaction((tx) => { const r = createForgeRepositories(tx); … })`).
 */
export function createForgeRepositories(db: SqlExecutor, clock: Clock = systemClock): ForgeRepositories {
  return {
    loops: createLoopsRepository(db, clock),
    plans: createPlansRepository(db, clock),
    planDrafts: createPlanDraftsRepository(db, clock),
    reviewFindings: createReviewFindingsRepository(db, clock),
    sectionPlans: createSectionPlansRepository(db, clock),
    transitions: createLoopTransitionsRepository(db, clock),
    planAmendments: createPlanAmendmentsRepository(db, clock),
    sessionUsage: createLoopSessionUsageRepository(db, clock),
    handoffs: createLoopHandoffsRepository(db, clock),
    featureGroups: createFeatureGroupsRepository(db, clock),
    attempts: createLoopAttemptsRepository(db, clock),
    preferences: createPreferencesRepository(db, clock),
    checkRuns: createCheckRunsRepository(db, clock),
    shellInterventions: createShellInterventionsRepository(db, clock),
    accepts: createLoopAcceptsRepository(db, clock),
  };
}
