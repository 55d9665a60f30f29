"""Builds lakecdc's C extensions (the columnar binlog rows decoder and the snapshot's text-protocol row scanner);
everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lakecdc.source._rowsdecoder",
            ["lakecdc/source/_rowsdecoder.c"],
            depends=["lakecdc/source/_buffers.h"],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-function"],
        ),
        Extension(
            "lakecdc.source._textrows",
            ["lakecdc/source/_textrows.c"],
            depends=["lakecdc/source/_buffers.h"],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-function"],
        ),
    ]
)
