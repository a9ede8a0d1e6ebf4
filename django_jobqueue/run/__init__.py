"""What happens to one claimed job: the rules of how a run ends (``lifecycle``, pure, and
``backoff``), the control signals a task raises (``control``), the ``Context`` it sees,
the executor that calls it, and running it inside a transaction (``transactional``)."""
