"""lakecdc's test suite, a package so that its private-server helpers (tests.mariadb_server, tests.s3_server) are
importable by the benchmarks too (``python -m bench`` from the repository root)."""
