"""The one part of the build that pyproject.toml cannot state yet without an experimental
table: the round's hottest loops (gavelsched/mechanism/_loops.pyx) and the max-min LP's
matrix (policies/_lists.pyx), compiled when a C compiler is present. ``optional``: without
one the install goes on, and the planner and the policies run the same rules in Python
(gavelsched/mechanism/loops.py, policies/compiled.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gavelsched.mechanism._loops",
                             ["gavelsched/mechanism/_loops.pyx"], optional=True),
                   Extension("policies._lists", ["policies/_lists.pyx"], optional=True)])
