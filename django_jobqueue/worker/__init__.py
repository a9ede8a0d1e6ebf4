"""The process that claims, runs and settles: the loop, its slot threads, the guards
around its database calls and a run's connection, and ``services`` for maintenance."""

#: What a worker logs each time it starts listening for wake-ups (at start, after a
#: reconnect; ``inline`` and ``listener``): in its log, the sign that NOTIFY wakes it.
#: Here, where importing it loads nothing else (the bench and the soak read logs).
LISTENING = "listening for new jobs"
