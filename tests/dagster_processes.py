"""Running Dagster asset jobs the way a deployment does: out of the launching process, on an instance from its
``dagster.yaml`` (shared by the executor tests)."""

from __future__ import annotations

from pathlib import Path


def materialize_out_of_process(module: str, tmp_path: Path, home: Path, keys: list[str]) -> None:
    """What ``dagster asset materialize -m <module> --select <keys>`` does, launched from this process: the
    module's implicit asset job, reconstructable from the module (so the executor's step processes or workers load
    it themselves), executed on the instance at ``home``; without the CLI's own process start-up (tested by
    tests/test_tutorial.py's `dagster asset materialize` runs)."""
    import dagster as dg
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    repository = ReconstructableRepository.for_module(module, "defs", working_directory=str(tmp_path))
    asset_keys = [dg.AssetKey.from_user_string(key) for key in keys]
    job = repository.get_definition().get_implicit_job_def_for_assets(asset_keys)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.execute_job(repository.get_reconstructable_job(job.name), instance, asset_selection=asset_keys)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
