"""The framework comparison behind ``bench/compare_frameworks.py``: its run plan
(:mod:`frameworks.plan`), statistics (:mod:`frameworks.stats`), markdown page
(:mod:`frameworks.page`) and figures (:mod:`frameworks.plots`), over ``bench/common.py``.

Imported with ``bench/`` on ``sys.path``, as the scripts there are run.
"""
