"""The process that claims, runs and settles: the loop, its slot threads, the guards
around its database calls and a run's connection, and ``services`` for maintenance."""
