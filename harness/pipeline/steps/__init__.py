"""The steps of one case (:data:`harness.pipeline.case.SWEEP_STEPS` and ``TUNED_STEPS`` list them). No pytest.

check-runnable, convert, build-check (:mod:`.convert`) -> find-duplicate (:mod:`.duplicate`) -> execute
(:mod:`.execute`) -> judge (:mod:`.judge`, pure) -> diagnose (:mod:`.diagnose`) -> time (:mod:`.execute`) -> save
(:mod:`.record`). Each has the shape ``step(run, env) -> run`` on a :class:`~harness.pipeline.caserun.CaseRun` and
fills its own field with its own small frozen result (and its seconds), or stops the case;
:func:`~harness.pipeline.steps.record.record` then builds the one :class:`~harness.report.CaseRecord`. No step calls
back into the conductor.
"""
