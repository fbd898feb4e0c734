"""The framework comparison behind ``python -m bench.compare_frameworks``: its run plan
(:mod:`bench.frameworks.plan`), statistics (:mod:`bench.frameworks.stats`), markdown page
(:mod:`bench.frameworks.page`) and figures (:mod:`bench.frameworks.plots`), over
:mod:`bench.common`.
"""
