"""Build hook for the optional C accelerators: ``core.storage._native`` (Kafka's record
format: record sizes, the records section of a produce batch) and ``api._render`` (the
REST API's JSON rendering of records and base64 decoding of produce bodies). Both share
the record reader ``core/storage/_kafka_records.h``.

Everything else is configured in pyproject.toml. The extensions are optional: without a
C compiler the install still succeeds and ``core.storage.native`` and
``api.native_render`` fall back to pure-Python paths (same output, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("core.storage._native", ["core/storage/_native.c"], optional=True,
                  include_dirs=["core/storage"], depends=["core/storage/_kafka_records.h"],
                  extra_compile_args=["-O2", "-pthread"], extra_link_args=["-pthread"]),
        Extension("api._render", ["api/_render.c"], optional=True,
                  include_dirs=["core/storage"], depends=["core/storage/_kafka_records.h"],
                  extra_compile_args=["-O2"]),
    ],
)
