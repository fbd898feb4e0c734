"""The application: configuration, the tuning session, monitors, per-round records, the
report, ``tune.py``'s run, the dataset collector and the accuracy evaluation.

The top layer: imports :mod:`tuner.engine`, :mod:`tuner.models` and :mod:`tuner.search`;
nothing below imports it.
"""
