"""Build hook for the optional C accelerator ``core.storage._native``.

Everything else is configured in pyproject.toml. The extension is optional: without a
C compiler the install still succeeds and ``core.storage.native`` falls back to the
pure-Python path (same output, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("core.storage._native", ["core/storage/_native.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
