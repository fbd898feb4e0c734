"""MetaSchedule plumbing: targets, tensor intrinsics, networks, tasks, the persistent
builder, the database checks, the no-repeat search wrapper, the round scheduler and the
evaluation of a tuned build.

Imports the core (:mod:`metatune`) and TVM only; never the learned models, the searches or
the application.
"""
