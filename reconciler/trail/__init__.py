"""The audit log read back (``reconciler audit served`` and ``audit history``): ``survey``
(the first pass, beside the chain's verification: what an answer rests on, the documents a
scope asks about), ``replay`` (their entries into one timeline a chunk point) and ``answers``
(what the default filter admitted at an instant; each version's periods). Pure: entries in,
plain values out; ``reconciler/app/auditing.py`` reads the log and hands them over."""
