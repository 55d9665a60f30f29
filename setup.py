"""Builds lakecdc's C extension (the columnar binlog rows decoder and the snapshot's row scanner); everything else
is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lakecdc.source._rowsdecoder",
            ["lakecdc/source/_rowsdecoder.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-function"],
        )
    ]
)
