"""The composition root: the only code that opens the stores and hands out the leases
(``wiring``, over the SQL lease adapters; ``holding`` holds one for a run) and puts a
command together from settings (``operations``: one library function a command; ``daemon``:
``serve`` and the cron export; ``bootstrap``: adopting a collection; ``evaluating``: the
``eval`` scorecard; ``demo``). The CLI calls these; they hand the engine and the writers what they need, as
ports.
"""
