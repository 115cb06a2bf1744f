"""Floor 2, a reader: token and cost usage, per host session and over time (``c3async usage``,
``c3_status(view='sessions')`` and ``view='usage'``): ``prices`` (the model price table),
``reader`` (one transcript's new bytes, in bounded pieces, only the usage lines decoded),
``account`` (the incremental accountant, worker processes for a big first pass), ``totals``
(what it last wrote per session, folded: what the session rows show), ``timeline`` (the same
usage per quarter hour, session and model, which it writes too), ``limits`` (the rate-limit
windows Claude Code reported, as ``c3async statusline`` records them), ``buckets`` (the
timeline by day, week, month, 5-hour window, model, project or session, priced), ``burn`` (who
spends the current windows, and how fast now) and ``runway`` (a reported percent calibrated
against the usage counted: when a window reaches 100 % at this pace; its small file for the
status line). May import the
ground, the catalog and the stores."""

# What ``c3async usage --by`` sums by (here, where the CLI's parser reads it without the rest).
BY = ("day", "week", "month", "window", "model", "project", "session")
