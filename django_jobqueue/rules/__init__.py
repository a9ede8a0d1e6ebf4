"""The pure rules, below everything that reads a setting or a table: how a run ends
(``lifecycle``), when a workflow's join fires and what status it leaves (``joins``),
how long a retry waits (``backoff``), and the signals a task raises to steer its run
(``control``). The store writes what these decide; nothing here touches a database."""
