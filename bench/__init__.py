"""lakecdc's benchmark suite: ``bench/run.sh [--quick]`` or ``.venv/bin/python -m bench [--quick]`` (see
docs/benchmarks.md). Each case prints lakecdc's rate next to references measured in the same run."""
