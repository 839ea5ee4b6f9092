"""The one part of the build that pyproject.toml cannot state yet without an experimental
table: the round's hottest loops (gavelsched/mechanism/_loops.pyx, _steps.pyx, which read
numpy arrays as _arrays.pxd says), the column model (policies/_columns.pyx) and the max-min
LP's matrix (policies/_lists.pyx), compiled when a C compiler is present. ``optional``: without one the install goes on, and the planner
and the policies run the same rules in Python (gavelsched/mechanism/loops.py,
policies/compiled.py)."""

from setuptools import Extension, setup

try:    # the loops read their arrays by numpy's C API (pyproject.toml's build requires)
    from numpy import get_include
except ImportError:   # no numpy to build with: the loops are not built (``optional``)
    HEADERS = []
else:
    HEADERS = [get_include()]


def round_loops(name: str) -> Extension:
    """One module of the round's loops, which read numpy arrays by its C API."""
    return Extension(f"gavelsched.mechanism.{name}", [f"gavelsched/mechanism/{name}.pyx"],
                     depends=["gavelsched/mechanism/_arrays.pxd"], include_dirs=HEADERS,
                     define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                     optional=True)


setup(ext_modules=[round_loops("_loops"), round_loops("_steps"),
                   Extension("policies._lists", ["policies/_lists.pyx"], optional=True),
                   Extension("policies._columns", ["policies/_columns.pyx"], optional=True)])
