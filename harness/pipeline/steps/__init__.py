"""The steps of one case, in order (:func:`harness.pipeline.case.run_case` calls them). No pytest.

convert -> build-check (:mod:`.convert`) -> find-duplicate (:mod:`.duplicate`) -> execute (:mod:`.execute`) ->
judge (:mod:`.verdict`, pure) -> diagnose (:mod:`.diagnose`) -> time (:mod:`.execute`) -> record (:mod:`.record`).
Each step returns its own small frozen result, with the seconds it took; the record step assembles the
:class:`~harness.report.CaseRecord` once, from those results. No step calls back into the conductor.
"""
